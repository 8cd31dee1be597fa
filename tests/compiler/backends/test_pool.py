"""The native worker pool: every chunk runs exactly once, on several threads when the
pool has workers, from several Python threads at once, and again after ``fork``; and the
thread knob (``tc.set_num_threads``, ``TENSORCODE_NUM_THREADS``)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading

import llvmlite.binding as llvm
import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.backends import pool, threads

#: chunk(ctx, i): ctx -> [who: i64 x 1024, count: i64, order: i64 x 1024]; writes
#: pthread_self() to who[i], spins a little so that workers get a share, counts itself
#: atomically and writes the count it found to order[i] (the order chunks ended in)
_CHUNK_IR = r"""
declare i64 @pthread_self()
define void @chunk(i8* %ctx, i64 %i) {
entry:
  %who = bitcast i8* %ctx to i64*
  %slot = getelementptr i64, i64* %who, i64 %i
  %me = call i64 @pthread_self()
  store volatile i64 %me, i64* %slot
  br label %spin
spin:
  %k = phi i64 [ 0, %entry ], [ %k1, %spin ]
  %k1 = add i64 %k, 1
  %v = load volatile i64, i64* %slot
  %again = icmp slt i64 %k1, 200000
  br i1 %again, label %spin, label %out
out:
  %countp = getelementptr i64, i64* %who, i64 1024
  %old = atomicrmw add i64* %countp, i64 1 seq_cst
  ; the order the chunks started in: order[i] at 1025 + i
  %at = add i64 %i, 1025
  %orderp = getelementptr i64, i64* %who, i64 %at
  store i64 %old, i64* %orderp
  ret void
}
"""


@pytest.fixture(scope="module")
def chunk():
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly(_CHUNK_IR)
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    function = pool.ChunkFunction(engine.get_function_address("chunk"))
    yield function, engine
    threads.set_num_threads(threads.available_cpus())


def _run(chunk, n):
    function, _ = chunk
    area = np.zeros(1025 + 1024, np.int64)
    pool.parallel_for(function, area.ctypes.data, n)
    return area[:n], int(area[1024])


def _run_in_order(chunk, n):
    """Which thread ran each chunk, and the order the chunks ended in."""
    function, _ = chunk
    area = np.zeros(1025 + 1024, np.int64)
    pool.parallel_for(function, area.ctypes.data, n)
    return area[:n], area[1025:1025 + n]


def test_every_chunk_runs_once_on_one_thread(chunk):
    threads.set_num_threads(1)
    threads.ensure_pool()
    who, count = _run(chunk, 37)
    assert count == 37 and np.all(who != 0)
    assert len(set(who.tolist())) == 1  # the caller alone


def test_workers_share_the_chunks(chunk):
    threads.set_num_threads(3)
    threads.ensure_pool()
    assert pool.workers() == 2
    used = set()
    for _ in range(20):
        who, count = _run(chunk, 64)
        assert count == 64 and np.all(who != 0)
        used |= set(who.tolist())
    assert len(used) >= 2  # the caller and at least one worker took chunks



def test_one_thread_parks_the_workers_and_the_usual_count_wakes_the_same_ones(chunk):
    """Switching to one thread and back neither stops nor starts threads: the same
    workers take chunks again, and at one thread the caller runs every chunk."""
    threads.set_num_threads(3)
    threads.ensure_pool()
    _run(chunk, 64)
    tasks = set(os.listdir("/proc/self/task"))
    threads.set_num_threads(1)
    assert pool.workers() == 0
    who, count = _run(chunk, 37)
    assert count == 37 and len(set(who.tolist())) == 1
    threads.set_num_threads(3)
    assert pool.workers() == 2
    again = set()
    for _ in range(10):
        who, _ = _run(chunk, 64)
        again |= set(who.tolist())
    assert set(os.listdir("/proc/self/task")) == tasks  # the same threads
    assert len(again) >= 2  # the caller and a worker took chunks


def test_each_thread_runs_its_own_segment_first(chunk):
    """Two threads own half the chunks each and run their own half first: whatever the
    timing, the first chunk the worker runs is in its half (from chunk 32 of 64), where
    from one shared counter it took the next one the caller had not."""
    threads.set_num_threads(2)
    threads.ensure_pool()
    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_uint64
    caller = np.uint64(libc.pthread_self()).astype(np.int64)
    helped = 0
    for _ in range(100):  # until the worker has run chunks in 5 runs (on a busy machine
        if helped == 5:   # it may sit some out)
            break
        who, order = _run_in_order(chunk, 64)
        assert sorted(order.tolist()) == list(range(64))
        worker_chunks = np.flatnonzero(who != caller)
        if worker_chunks.size and worker_chunks.size < 64:
            helped += 1
            first = worker_chunks[np.argmin(order[worker_chunks])]
            assert first >= 32, f"the worker began with chunk {first}"
    assert helped, "the worker never ran a chunk"


def test_python_threads_share_the_pool(chunk):
    threads.set_num_threads(2)
    threads.ensure_pool()
    errors = []

    def caller():
        try:
            for _ in range(30):
                _, count = _run(chunk, 9)
                assert count == 9
        except BaseException as error:  # handed to the main thread below
            errors.append(error)

    callers = [threading.Thread(target=caller) for _ in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in callers)
    assert not errors


def test_a_forked_child_starts_its_own_workers(chunk):
    threads.set_num_threads(2)
    threads.ensure_pool()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            threads.ensure_pool()
            _, count = _run(chunk, 16)
            os.write(write, f"{pool.workers()} {count}".encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    answer = os.read(read, 100).decode()
    os.close(read)
    assert status == 0 and answer == "1 16"


def test_the_knob_is_checked_and_public():
    assert tc.get_num_threads() >= 1
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(tc.TensorCodeError, match="whole number of threads"):
            tc.set_num_threads(bad)


def test_the_environment_variable_sets_the_default():
    code = "import tensorcode as tc; print(tc.get_num_threads())"
    env = dict(os.environ, TENSORCODE_NUM_THREADS="3", OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "3", out.stderr
    del env["TENSORCODE_NUM_THREADS"]  # then OMP_NUM_THREADS, as Ray sets it per worker
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip() == "2", out.stderr
    env = dict(os.environ, TENSORCODE_NUM_THREADS="many")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "TENSORCODE_NUM_THREADS must be" in out.stderr


def test_blas_runs_one_thread_whatever_the_knob():
    """Plans split large products on the pool; BLAS's own threads would oversubscribe
    the cores the pool already uses."""
    path = threads.scipy_openblas()
    assert path is not None
    library = ctypes.CDLL(path)
    getter = library.scipy_openblas_get_num_threads
    getter.restype = ctypes.c_int
    setter = library.scipy_openblas_set_num_threads
    setter(2)
    threads.set_num_threads(2)
    assert getter() == threads.BLAS_THREADS == 1
    threads.set_num_threads(threads.available_cpus())
    assert getter() == 1


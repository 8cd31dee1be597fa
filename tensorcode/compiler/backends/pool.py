"""One native worker pool per process: threads parked between calls, woken to run the
chunks of a partitioned loop, with no Python and no GIL on the way.

Why native, and why this way: a plan's kernels run inside one compiled call with the GIL
released, so the threads that share a loop's chunks must be native threads running
native code. The pool is a small module of LLVM IR (written here as text, compiled once
per process by llvmlite, which is already a dependency) over the C library's POSIX
threads: ``pthread_create`` to start the workers, a mutex and two condition variables
to park and wake them, and atomic counters to hand out chunks. A worker spins a while
(``SPIN`` ``pause`` rounds) before it parks, and so does a caller waiting for the last
chunks: measured here, waking a parked thread cost more than the work of a small
partition, while a spinning one picks up the next run within a microsecond. No OpenMP runtime (none
of our wheels ships one we could rely on) and no Python thread per chunk.

``tc_pool_run(fn, ctx, n)`` calls ``fn(ctx, i)`` once for every chunk ``i < n`` and
returns when all have returned. The calling thread takes chunks too, so one thread
(``set_num_threads(1)``) runs every chunk itself in order. With workers, each of the
``p`` threads of the run (the caller first) owns a contiguous segment of the chunks, the
``q``-th ``p``-th of them, runs it first, then takes what is left of the others'
segments: consecutive kernels partitioned over the same rows then find most of their
operands in the cache of the core that wrote them. Handing out chunks from one shared
counter instead (the first version) interleaved them between the threads, and a 2-layer
transformer step at 2 threads measured 1.51x its one-thread time against 1.64x with
segments (best of 15 steps, alternated processes, 2-core AMD EPYC); its partitioned
elementwise kernels went from 1.40x to 1.73x. Which thread runs a chunk
never changes what it computes: a partitioned loop's chunks are fixed by the loop
program (a fixed chunk size), not by the thread count, and a reduction combines its
per-chunk partials in chunk order afterwards, so results are bit-identical for any
number of threads.

Several Python threads may call plans at once: one run holds the pool at a time
(``busy``, taken with a compare-and-swap); a caller that finds it busy runs its chunks
on its own thread, so the process never has more runnable threads than the pool's plus
the callers'. After ``fork`` the child has none of the workers: ``os.register_at_fork``
resets the pool's state in the child and starts as many workers again.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

#: the pool's module: globals, the worker loop, the run, start and stop. pthread_mutex_t
#: and pthread_cond_t are opaque 64-byte, zero-initialized blocks (glibc's static
#: initializers are all zeros; both types are at most 48 bytes on x86-64).
_IR = r"""
%fn = type void (i8*, i64)*

@mu = internal global [64 x i8] zeroinitializer, align 16
@wake = internal global [64 x i8] zeroinitializer, align 16
@done = internal global [64 x i8] zeroinitializer, align 16
@gen = internal global i64 0
@quit = internal global i32 0
@busy = internal global i32 0
@job_fn = internal global %fn null
@job_ctx = internal global i8* null
@job_n = internal global i64 0
@parts = internal global i64 0
; per participant (the caller 0, worker j at j + 1), one cache line each: the next chunk
; of its segment of the run, the run's generation in the high 32 bits, the chunk in the
; low ones
@slots = internal global [257 x [8 x i64]] zeroinitializer, align 64
@left = internal global i64 0
@workers = internal global i64 0
; the workers runs use: all of them, or 0 while they stay parked (one thread)
@active = internal global i64 0
@threads = internal global [256 x i64] zeroinitializer

declare i32 @pthread_mutex_lock(i8*)
declare i32 @pthread_mutex_unlock(i8*)
declare i32 @pthread_cond_wait(i8*, i8*)
declare i32 @pthread_cond_broadcast(i8*)
declare i32 @pthread_create(i64*, i8*, i8* (i8*)*, i8*)
declare i32 @pthread_join(i64, i8**)
declare void @llvm.memset.p0i8.i64(i8*, i8, i64, i1)
declare void @llvm.x86.sse2.pause()

define private i8* @mu_p() {
  %p = getelementptr [64 x i8], [64 x i8]* @mu, i64 0, i64 0
  ret i8* %p
}
define private i8* @wake_p() {
  %p = getelementptr [64 x i8], [64 x i8]* @wake, i64 0, i64 0
  ret i8* %p
}
define private i8* @done_p() {
  %p = getelementptr [64 x i8], [64 x i8]* @done, i64 0, i64 0
  ret i8* %p
}

define private i64* @slot(i64 %q) {
  %p = getelementptr [257 x [8 x i64]], [257 x [8 x i64]]* @slots, i64 0, i64 %q, i64 0
  ret i64* %p
}

; where participant q's segment of n chunks begins (and q - 1's ends): q n / parts
define private i64 @boundary(i64 %q, i64 %n, i64 %parts) {
  %qn = mul i64 %q, %n
  %at = udiv i64 %qn, %parts
  ret i64 %at
}

; claim and run chunks of run %g while any is left, participant %p of %parts: first its
; own segment of the chunks (segment q is [q n / parts, (q + 1) n / parts), @boundary), then the
; rest of the others' in turn. A claim is a compare-and-swap on the segment's slot that
; fails once a newer run has begun, so a late worker never runs a chunk of a run that has
; returned; the chunks it ran are taken off @left once, and the participant that takes
; the last wakes the caller
define private void @take(%fn %f, i8* %ctx, i64 %n, i64 %g, i64 %p, i64 %parts) {
entry:
  %tag = shl i64 %g, 32
  br label %segment
segment:
  %s = phi i64 [ 0, %entry ], [ %s1, %next_segment ]
  %ran = phi i64 [ 0, %entry ], [ %ran2, %next_segment ]
  %more_segments = icmp slt i64 %s, %parts
  br i1 %more_segments, label %open, label %report
open:
  %ps = add i64 %p, %s
  %q = urem i64 %ps, %parts
  %q1 = add i64 %q, 1
  %end = call i64 @boundary(i64 %q1, i64 %n, i64 %parts)
  %slotp = call i64* @slot(i64 %q)
  br label %loop
loop:
  %ran1 = phi i64 [ %ran, %open ], [ %ran1, %lost ], [ %ran_body, %body ]
  %cur = load atomic i64, i64* %slotp seq_cst, align 8
  %hi = and i64 %cur, -4294967296
  %ours = icmp eq i64 %hi, %tag
  br i1 %ours, label %index, label %next_segment
index:
  %i = and i64 %cur, 4294967295
  %left_here = icmp ult i64 %i, %end
  br i1 %left_here, label %claim, label %next_segment
claim:
  %cur1 = add i64 %cur, 1
  %pair = cmpxchg i64* %slotp, i64 %cur, i64 %cur1 seq_cst seq_cst
  %won = extractvalue { i64, i1 } %pair, 1
  br i1 %won, label %body, label %lost
lost:
  br label %loop
body:
  call void %f(i8* %ctx, i64 %i)
  %ran_body = add i64 %ran1, 1
  br label %loop
next_segment:
  %ran2 = phi i64 [ %ran1, %loop ], [ %ran1, %index ]
  %s1 = add i64 %s, 1
  br label %segment
report:
  %any = icmp ne i64 %ran, 0
  br i1 %any, label %count, label %out
count:
  %was = atomicrmw sub i64* @left, i64 %ran seq_cst
  %last = icmp eq i64 %was, %ran
  br i1 %last, label %signal, label %out
signal:
  %mu = call i8* @mu_p()
  %done = call i8* @done_p()
  call i32 @pthread_mutex_lock(i8* %mu)
  call i32 @pthread_cond_broadcast(i8* %done)
  call i32 @pthread_mutex_unlock(i8* %mu)
  br label %out
out:
  ret void
}

define private i8* @worker(i8* %arg) {
entry:
  %me = ptrtoint i8* %arg to i64
  %mu = call i8* @mu_p()
  %wake = call i8* @wake_p()
  br label %park
park:
  %seen = phi i64 [ 0, %entry ], [ %g, %work ]
  br label %spin
spin:
  ; a worker that just ran spins a while before it sleeps: a plan's next partitioned loop
  ; usually follows within microseconds, and waking a sleeping thread costs tens of them
  %k = phi i64 [ 0, %park ], [ %k1, %pause ]
  %gs = load atomic i64, i64* @gen seq_cst, align 8
  %new = icmp ne i64 %gs, %seen
  br i1 %new, label %lock, label %pause
pause:
  call void @llvm.x86.sse2.pause()
  %k1 = add i64 %k, 1
  %more = icmp slt i64 %k1, SPIN
  br i1 %more, label %spin, label %lock
lock:
  call i32 @pthread_mutex_lock(i8* %mu)
  br label %check
check:
  %q = load i32, i32* @quit
  %stop = icmp ne i32 %q, 0
  br i1 %stop, label %leave, label %same
same:
  %g0 = load atomic i64, i64* @gen seq_cst, align 8
  %idle = icmp eq i64 %g0, %seen
  br i1 %idle, label %sleep, label %work
sleep:
  call i32 @pthread_cond_wait(i8* %wake, i8* %mu)
  br label %check
work:
  %g = load atomic i64, i64* @gen seq_cst, align 8
  %f = load %fn, %fn* @job_fn
  %ctx = load i8*, i8** @job_ctx
  %n = load i64, i64* @job_n
  %parts = load i64, i64* @parts
  call i32 @pthread_mutex_unlock(i8* %mu)
  call void @take(%fn %f, i8* %ctx, i64 %n, i64 %g, i64 %me, i64 %parts)
  br label %park
leave:
  call i32 @pthread_mutex_unlock(i8* %mu)
  ret i8* null
}

; start k workers (at most 256); 0 on success, else the failing pthread_create's code
define i32 @tc_pool_start(i64 %k) {
entry:
  store i32 0, i32* @quit
  store i64 0, i64* @workers
  br label %loop
loop:
  %j = phi i64 [ 0, %entry ], [ %j1, %made ]
  %more = icmp slt i64 %j, %k
  br i1 %more, label %make, label %out
make:
  %slot = getelementptr [256 x i64], [256 x i64]* @threads, i64 0, i64 %j
  %id = add i64 %j, 1
  %arg = inttoptr i64 %id to i8*
  %rc = call i32 @pthread_create(i64* %slot, i8* null, i8* (i8*)* @worker, i8* %arg)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %made, label %fail
made:
  %j1 = add i64 %j, 1
  store i64 %j1, i64* @workers
  br label %loop
fail:
  ret i32 %rc
out:
  store i64 %k, i64* @active
  ret i32 0
}

; use the started workers (%on true) or leave them parked and run every chunk on the
; caller (%on false)
define void @tc_pool_activate(i1 %on) {
  %k = load i64, i64* @workers
  %use = select i1 %on, i64 %k, i64 0
  store i64 %use, i64* @active
  ret void
}

; wake every worker to leave and join them
define void @tc_pool_stop() {
entry:
  store i64 0, i64* @active
  %mu = call i8* @mu_p()
  %wake = call i8* @wake_p()
  call i32 @pthread_mutex_lock(i8* %mu)
  store i32 1, i32* @quit
  call i32 @pthread_cond_broadcast(i8* %wake)
  call i32 @pthread_mutex_unlock(i8* %mu)
  %k = load i64, i64* @workers
  br label %loop
loop:
  %j = phi i64 [ 0, %entry ], [ %j1, %join ]
  %more = icmp slt i64 %j, %k
  br i1 %more, label %join, label %out
join:
  %slot = getelementptr [256 x i64], [256 x i64]* @threads, i64 0, i64 %j
  %t = load i64, i64* %slot
  call i32 @pthread_join(i64 %t, i8** null)
  %j1 = add i64 %j, 1
  br label %loop
out:
  store i64 0, i64* @workers
  ret void
}

; the child after fork: no workers exist there, and the locks may be in any state
define void @tc_pool_forget() {
  %mu = call i8* @mu_p()
  call void @llvm.memset.p0i8.i64(i8* %mu, i8 0, i64 64, i1 false)
  %wake = call i8* @wake_p()
  call void @llvm.memset.p0i8.i64(i8* %wake, i8 0, i64 64, i1 false)
  %done = call i8* @done_p()
  call void @llvm.memset.p0i8.i64(i8* %done, i8 0, i64 64, i1 false)
  store i64 0, i64* @workers
  store i64 0, i64* @active
  store i32 0, i32* @busy
  store i32 0, i32* @quit
  ret void
}

; fn(ctx, i) for every i < n, on the pool's workers and this thread
define void @tc_pool_run(%fn %f, i8* %ctx, i64 %n) {
entry:
  %k = load i64, i64* @active
  %alone = icmp eq i64 %k, 0
  %few = icmp sle i64 %n, 1
  %serial0 = or i1 %alone, %few
  br i1 %serial0, label %serial, label %claim
claim:
  %pair = cmpxchg i32* @busy, i32 0, i32 1 seq_cst seq_cst
  %got = extractvalue { i32, i1 } %pair, 1
  br i1 %got, label %shared, label %serial
serial:
  %i = phi i64 [ 0, %entry ], [ 0, %claim ], [ %i1, %step ]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %step, label %back
step:
  call void %f(i8* %ctx, i64 %i)
  %i1 = add i64 %i, 1
  br label %serial
back:
  ret void
shared:
  %mu = call i8* @mu_p()
  %wake = call i8* @wake_p()
  %done = call i8* @done_p()
  call i32 @pthread_mutex_lock(i8* %mu)
  %g = load i64, i64* @gen
  %g1 = add i64 %g, 1
  %g32 = and i64 %g1, 4294967295
  store %fn %f, %fn* @job_fn
  store i8* %ctx, i8** @job_ctx
  store i64 %n, i64* @job_n
  %parts = add i64 %k, 1
  store i64 %parts, i64* @parts
  store atomic i64 %n, i64* @left seq_cst, align 8
  %tag = shl i64 %g32, 32
  br label %segments
segments:
  %q = phi i64 [ 0, %shared ], [ %q1, %segment ]
  %more_q = icmp slt i64 %q, %parts
  br i1 %more_q, label %segment, label %publish
segment:
  %first = call i64 @boundary(i64 %q, i64 %n, i64 %parts)
  %tagged = or i64 %tag, %first
  %slotq = call i64* @slot(i64 %q)
  store atomic i64 %tagged, i64* %slotq seq_cst, align 8
  %q1 = add i64 %q, 1
  br label %segments
publish:
  store atomic i64 %g32, i64* @gen seq_cst, align 8
  call i32 @pthread_cond_broadcast(i8* %wake)
  call i32 @pthread_mutex_unlock(i8* %mu)
  call void @take(%fn %f, i8* %ctx, i64 %n, i64 %g32, i64 0, i64 %parts)
  br label %watch
watch:
  ; the workers' last chunks usually end within microseconds: spin before sleeping
  %w = phi i64 [ 0, %publish ], [ %w1, %relax ]
  %open0 = load atomic i64, i64* @left seq_cst, align 8
  %none = icmp eq i64 %open0, 0
  br i1 %none, label %release, label %relax
relax:
  call void @llvm.x86.sse2.pause()
  %w1 = add i64 %w, 1
  %patient = icmp slt i64 %w1, SPIN
  br i1 %patient, label %watch, label %sleepy
release:
  store atomic i32 0, i32* @busy seq_cst, align 4
  ret void
sleepy:
  call i32 @pthread_mutex_lock(i8* %mu)
  br label %settle
settle:
  %left = load atomic i64, i64* @left seq_cst, align 8
  %open = icmp ne i64 %left, 0
  br i1 %open, label %wait_done, label %finish
wait_done:
  call i32 @pthread_cond_wait(i8* %done, i8* %mu)
  br label %settle
finish:
  call i32 @pthread_mutex_unlock(i8* %mu)
  store atomic i32 0, i32* @busy seq_cst, align 4
  ret void
}
"""

#: the C library symbols the pool's module calls (the plan loader's allowlist names the
#: pool's own entry points, not these: plans reach the pool only through ``tc_pool_run``)
PTHREAD_SYMBOLS = ("pthread_mutex_lock", "pthread_mutex_unlock", "pthread_cond_wait",
                   "pthread_cond_broadcast", "pthread_create", "pthread_join")
#: the entry point generated code calls
RUN_SYMBOL = "tc_pool_run"
#: ``pause`` rounds a worker (and a caller waiting for the last chunks) spins before it
#: sleeps: 5-10 us on a 2-core AMD EPYC (Zen 4, AVX-512), longer on Intel's slower
#: ``pause``. Spinning 60-100 us by the clock there made a 2-thread transformer step
#: slower (median 23-27 -> 31-37 ms, alternated processes): the spinning thread slowed
#: the serial kernels between partitioned ones. A parked worker's wake costs 8-10 us.
SPIN = 2000
#: the most worker threads the pool starts (the size of its thread table)
MAX_WORKERS = 256

ChunkFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


class _Pool:
    """The compiled module and its entry points, built once per process."""

    def __init__(self) -> None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = llvm.parse_assembly(_IR.replace("SPIN", str(SPIN)))
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(opt=2)
        self.engine = llvm.create_mcjit_compiler(module, machine)
        self.engine.finalize_object()
        address = self.engine.get_function_address
        self.run_address = int(address("tc_pool_run"))
        self.start = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64)(address("tc_pool_start"))
        self.stop = ctypes.CFUNCTYPE(None)(address("tc_pool_stop"))
        self.forget = ctypes.CFUNCTYPE(None)(address("tc_pool_forget"))
        self.activate = ctypes.CFUNCTYPE(None, ctypes.c_bool)(address("tc_pool_activate"))
        self.run = ctypes.CFUNCTYPE(None, ChunkFunction, ctypes.c_void_p, ctypes.c_int64)(
            self.run_address)
        self.started = 0  # worker threads that exist
        self.workers = 0  # those runs use: all started, or 0 while they stay parked


_POOL: _Pool | None = None
_LOCK = threading.Lock()


def _pool() -> _Pool:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = _Pool()
        return _POOL


def resize(workers: int) -> None:
    """Run with ``workers`` threads beside the caller's (0: every chunk on the caller).

    Going to 0 leaves the workers parked, unused, and going back to as many uses them
    again: a caller that switches between one thread and its usual count (the threads
    suite does, every sample) neither stops nor starts threads, and its runs find
    workers the scheduler has already placed. Any other count stops the current workers
    (each finishes the chunk it holds; ``tc_pool_stop`` joins them) and starts the new
    ones. Called by ``threads.set_num_threads``."""
    workers = max(0, min(int(workers), MAX_WORKERS))
    pool = _pool()
    with _LOCK:
        if workers == pool.workers:
            return
        if workers in (0, pool.started) and pool.started:
            pool.activate(workers > 0)
            pool.workers = workers
            return
        if pool.started:
            pool.stop()
            pool.started = pool.workers = 0
        if workers:
            code = pool.start(workers)
            if code != 0:  # some started: stop those too, so the count is exact
                pool.stop()
                raise OSError(code, f"pthread_create failed ({os.strerror(code)}) starting "
                                    f"{workers} worker threads; set fewer threads")
        pool.started = pool.workers = workers


def workers() -> int:
    """How many worker threads run beside a caller now (0 before the first resize, and
    while they stay parked at one thread)."""
    return _POOL.workers if _POOL is not None else 0


def run_address() -> int:
    """The address of ``tc_pool_run`` for generated code (the pool is built on first
    ask)."""
    return _pool().run_address


def parallel_for(function: Any, context: int, chunks: int) -> None:
    """``function(context, i)`` for each chunk (a ``ChunkFunction``), through the pool:
    what generated code does, callable from Python for tests."""
    _pool().run(function, context, int(chunks))


def _after_fork_in_child() -> None:
    """The child of a fork has the pool's memory but none of its threads: forget them
    and start as many again, so a forked worker (a serve or multiprocessing worker)
    runs its plans on its own threads."""
    global _LOCK
    _LOCK = threading.Lock()  # the parent's may have been held by another thread
    if _POOL is not None:
        count = _POOL.workers
        _POOL.forget()
        _POOL.started = _POOL.workers = 0
        if count:
            resize(count)


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["ChunkFunction", "MAX_WORKERS", "PTHREAD_SYMBOLS", "RUN_SYMBOL", "parallel_for",
           "resize", "run_address", "workers"]

"""Plans on every core: each workload at one thread and at N (``tc.set_num_threads``).

For each workload the same plan runs at ``N`` threads (the baseline row; N is every CPU
this process may use, at least 2) and at one thread, alternately in one process, so
load on a shared machine hits both alike; the ratio column of the ``1 thread`` row is
N threads' speed-up over one. Every N-thread result is checked equal to the one-thread
result bit for bit (a partition's chunks do not depend on the thread count).

- ``W1``..``W5``: the compiler suite's fused training steps (``entry.lower(optimizer)``);
- ``gpt small``: the 4-layer, 128-wide GPT's full-context forward (T = 64) and its
  training step (AdamW, 16 rows); ``--quick`` runs these and W1-W4;
- ``gpt2-124M forward``: GPT-2 124M's forward at T = 128 on random weights (not with
  ``--quick``: writing and loading 500 MB of weights takes a minute);
- ``gpt 2x64 train step``: the transformer step issue-sized: 2 layers, dim 64, context
  128, 16 rows, Adam;
- ``pool: wake-up``: what one parallel run of empty chunks costs (the pool's fixed cost a
  partition must pay back), beside a serial run of the same chunks;
- ``...: scaling estimate``: the 2x64 step and (not with ``--quick``) GPT-2 124M's
  forward at 1, 2, 4, 8 and 16 threads, estimated from their kernels' one-thread times
  and chunk counts (``threads_scaling.py``: what a machine with more cores would show,
  an upper bound on the speed-up).

Threads here are TensorCode's own: the pool's workers, sized by
``tc.set_num_threads`` (plans call BLAS with one thread).
"""

from __future__ import annotations

import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .harness import Row

SUITE = "threads"
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _threads() -> int:
    import tensorcode as tc
    from tensorcode.compiler.backends.threads import available_cpus

    del tc
    return max(2, available_cpus())


def _alternate(fn: Callable[[], Any], n: int, repeat: int) -> tuple[float, float, bool]:
    """Median seconds of ``fn`` at ``n`` threads and at one, alternately; and whether
    both gave the same result bit for bit."""
    import tensorcode as tc

    results = {}
    samples: dict[int, list[float]] = {n: [], 1: []}
    for threads in (n, 1):  # warm both (the pool starts on first use)
        tc.set_num_threads(threads)
        fn()
        results[threads] = _snapshot(fn())
    for _ in range(repeat):
        for threads in (n, 1):
            tc.set_num_threads(threads)
            start = time.perf_counter()
            fn()
            samples[threads].append(time.perf_counter() - start)
    tc.set_num_threads(n)
    same = all(np.array_equal(a, b) for a, b in zip(results[n], results[1]))
    return statistics.median(samples[n]), statistics.median(samples[1]), same


def _snapshot(value: Any) -> list[np.ndarray]:
    """The arrays a workload's call returned (or the parameters it updated), copied."""
    if value is None:
        return []
    if isinstance(value, np.ndarray):
        return [value.copy()]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _snapshot(v)]
    if hasattr(value, "payloads"):
        return [np.array(p) for p in value.payloads()]
    return [np.asarray(value).copy()]


def _rows(workload: str, fn: Callable[[], Any], n: int, repeat: int, unit_scale: float,
          unit: str, note: str) -> list[Row]:
    many, one, same = _alternate(fn, n, repeat)
    check = "== 1 thread bit for bit" if same else "DIFFERS from 1 thread"
    return [Row(SUITE, workload, "tensorcode", many * unit_scale, unit=unit,
                note=f"{n} threads; {note}; {check}"),
            Row(SUITE, workload, "tensorcode 1 thread", one * unit_scale, unit=unit,
                note=f"ratio: {n} threads' speed-up over one (alternated)")]


def _compiler_rows(quick: bool, n: int) -> list[Row]:
    sys.path.insert(0, str(ROOT))
    from benchmarks.compiler_workloads import WORKLOADS, make_data, tensorcode_fused_step

    rows: list[Row] = []
    for name, spec in WORKLOADS.items():
        if quick and name == "W5":
            continue
        # learning rate 0: every step computes the same loss from the same parameters, so
        # the thread counts' losses can be compared bit for bit (and cost the same)
        step, note, _ = tensorcode_fused_step(dict(spec, lr=0.0), make_data(spec))
        repeat = 10 if name == "W5" else (30 if quick else 200)
        rows += _rows(spec["title"] + " fused step", step, n, repeat, 1e6, "us",
                      note + ", learning rate 0")
    return rows


def _step_maker(config: Any, optimizer: Any, rows: int = 16) -> Callable[[], Callable[[], Any]]:
    """A function that builds a training model of ``config`` (``rows`` rows of its full
    context) and returns one step at learning rate 0 on fixed random tokens."""
    from tensorcode.models import gpt2

    def make() -> Callable[[], Any]:
        context = config.block_size
        trainer = gpt2.GptModel(config, batch=rows, context=context)
        rng = np.random.default_rng(0)
        batch = rng.integers(0, config.vocab_size, (rows, context))
        targets = rng.integers(0, config.vocab_size, (rows, context))
        trainer.training().lower()
        return lambda: trainer.train_step(batch, targets, optimizer, 0.0)
    return make


def _gpt_rows(quick: bool, n: int, wake: float) -> list[Row]:
    import tensorcode as tc
    from tensorcode.models import gpt2
    from tensorcode.nn.transformer import GptConfig

    from .threads_scaling import scaling_rows

    rows: list[Row] = []
    small = GptConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)
    model = gpt2.GptModel(small, seed=0, context=64)
    ids = np.random.default_rng(1).integers(0, small.vocab_size, (1, 64))
    rows += _rows("gpt small 4x128 forward B=1 T=64", lambda: model.logits(ids), n,
                  10 if quick else 40, 1e3, "ms", "layered plans")
    # learning rate 0: every step computes the same loss from the same parameters, so
    # the thread counts' losses compare bit for bit
    step = _step_maker(small, tc.optim.AdamW(weight_decay=0.01))()
    rows += _rows("gpt small 4x128 train step B=16 T=64 AdamW", step, n,
                  5 if quick else 20, 1e3, "ms", "learning rate 0, so every step is the same")
    narrow = GptConfig(vocab_size=65, block_size=128, n_layer=2, n_head=4, n_embd=64)
    step = _step_maker(narrow, tc.optim.Adam())()
    rows += _rows("gpt 2x64 train step B=16 T=128 Adam", step, n, 5 if quick else 20, 1e3,
                  "ms", "learning rate 0, so every step is the same")
    rows += scaling_rows(SUITE, "gpt 2x64 train step B=16 T=128 Adam",
                         _step_maker(narrow, tc.optim.Adam()), 5 if quick else 20, wake)
    if not quick:
        with tempfile.TemporaryDirectory(prefix="tensorcode-threads-gpt-") as tmp:
            directory = pathlib.Path(tmp) / "model"
            config = GptConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12,
                               n_embd=768)
            gpt2.save(gpt2.GptModel(config, seed=0, context=8), directory)
            big = gpt2.load(directory, context=128, cache_length=256)
            big_ids = np.random.default_rng(1).integers(0, config.vocab_size, (1, 128))
            rows += _rows("gpt2-124M forward B=1 T=128", lambda: big.logits(big_ids), n, 3,
                          1e3, "ms", "random weights, layered plans")

            def forward() -> Callable[[], Any]:
                profiled = gpt2.load(directory, context=128, cache_length=256)
                return lambda: profiled.logits(big_ids)
            rows += scaling_rows(SUITE, "gpt2-124M forward B=1 T=128", forward, 3, wake)
    return rows


def _pool_rows(n: int) -> list[Row]:
    import tensorcode as tc
    from tensorcode.compiler.backends import pool, threads

    tc.set_num_threads(n)
    threads.ensure_pool()
    noop = pool.ChunkFunction(lambda ctx, i: None)
    chunks = 2 * n
    for _ in range(50):
        pool.parallel_for(noop, 0, chunks)
    samples = []
    for _ in range(500):
        start = time.perf_counter()
        pool.parallel_for(noop, 0, chunks)
        samples.append(time.perf_counter() - start)
    tc.set_num_threads(1)
    threads.ensure_pool()
    serial = []
    for _ in range(500):
        start = time.perf_counter()
        pool.parallel_for(noop, 0, chunks)
        serial.append(time.perf_counter() - start)
    tc.set_num_threads(n)
    return [Row(SUITE, f"pool: wake-up, {chunks} empty chunks", "tensorcode",
                statistics.median(samples) * 1e6, unit="us",
                note=f"{n} threads; through ctypes from Python (a plan's call pays the "
                     "pool part only); the cost a partition must pay back"),
            Row(SUITE, f"pool: wake-up, {chunks} empty chunks", "tensorcode 1 thread",
                statistics.median(serial) * 1e6, unit="us",
                note="the same chunks on the calling thread")]


def run(quick: bool) -> list[Row]:
    n = _threads()
    cpu = _cpu_name()
    pool = _pool_rows(n)
    wake = pool[0].value * 1e-6
    rows = pool + _compiler_rows(quick, n) + _gpt_rows(quick, n, wake)
    for row in rows:
        row.extra["cpu"] = cpu
    return rows


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine

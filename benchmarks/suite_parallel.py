"""The guide's parallel examples: what their threads gain over the same work serially.

- ``gradient_descent: 3 what-ifs``: ``examples/guide/gradient_descent.py`` (tanh MLP
  [1, 64, 1] on 256 samples, 1000 SGD steps per what-if, three learning rates): each
  what-if as one ``run_steps`` call of the shared step plan on its own thread (the
  baseline row) against the same three calls one after another; peer ``guide loop,
  serial`` is the per-step loop (``forward``, ``recorded_gradients``,
  ``Parameters.step``) the guide writes first. Three equal what-ifs share two cores
  only as the system time-slices them, so ``gradient_descent: 4 what-ifs`` runs the
  same form with four learning rates (two per core on two cores).
- ``makemore: 4 shards x 512`` and ``x 1024``: ``examples/guide/makemore_mlp_parallel.py``
  (makemore's sizes: embedding 10, hidden 200; SGD steps on minibatches of 4 shards):
  each step's shards split into one group per core, the calling thread running the
  first and a pool the others (baseline), against the same groups one after another.

- ``machine: GIL-free work``: the ceiling the machine offers now, measured in the same
  run: NumPy matrix products (one BLAS thread, the GIL released throughout), as many
  tasks as the pool has threads, on the threads against one after another. On a shared
  machine the examples' speed-ups read against this one.

The ratio column of a ``serial`` row is the threads' speed-up over serial (target at
least 1.6x on 2 idle cores). Each repeat alternates threaded and serial so load hits both
alike; every threaded result is checked equal to its serial one, bit for bit. BLAS runs
one thread per calling thread (set here before NumPy and SciPy load OpenBLAS), as the
examples ask: the threads are the programs' own.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .harness import Row

SUITE = "parallel"
EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples" / "guide"


def _example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"guide_example_{name}",
                                                  EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _alternate(runs: dict[str, Any], repeat: int) -> dict[str, tuple[float, Any]]:
    """Median seconds of each run, taking them in turn ``repeat`` times; the last result."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    results: dict[str, Any] = {}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            results[name] = run()
            samples[name].append(time.perf_counter() - start)
    return {name: (statistics.median(samples[name]), results[name]) for name in runs}


def _gradient_descent(repeat: int) -> list[Row]:
    example = _example("gradient_descent")
    problem = example.build()
    steps = example.STEPS
    four = tuple(example.LEARNING_RATES) + (0.02,)
    example.fused(problem, 2)  # start the step plan's threads once
    example.serial(problem, 2)
    timed = _alternate({
        "threads": lambda: example.fused(problem, steps),
        "serial": lambda: example.fused(problem, steps, threads=False),
        "loop": lambda: example.serial(problem, steps),
        "four threads": lambda: example.fused(problem, steps, rates=four),
        "four serial": lambda: example.fused(problem, steps, threads=False, rates=four),
    }, repeat)
    if not (example.same(timed["threads"][1], timed["serial"][1])
            and example.same(timed["threads"][1], timed["loop"][1])
            and example.same(timed["four threads"][1], timed["four serial"][1])):
        raise AssertionError("gradient_descent: threaded run_steps differs from serial")
    workload = "gradient_descent: 3 what-ifs"
    even = "gradient_descent: 4 what-ifs"
    return [
        Row(SUITE, workload, "run_steps, 3 threads", timed["threads"][0] * 1e3, "ms",
            baseline=True, note="one run_steps call per thread; == serial bit for bit"),
        Row(SUITE, workload, "run_steps, serial", timed["serial"][0] * 1e3, "ms",
            note="the ratio is the threads' speed-up over serial"),
        Row(SUITE, workload, "guide loop, serial", timed["loop"][0] * 1e3, "ms",
            note="forward + recorded_gradients + Parameters.step per step"),
        Row(SUITE, even, "run_steps, 4 threads", timed["four threads"][0] * 1e3, "ms",
            baseline=True, note="the same form, a fourth learning rate: two per core"),
        Row(SUITE, even, "run_steps, serial", timed["four serial"][0] * 1e3, "ms",
            note="the ratio is the threads' speed-up over serial"),
    ]


def _makemore(repeat: int, quick: bool, shard: int) -> list[Row]:
    example = _example("makemore_mlp_parallel")
    shards, steps = 4, 15 if quick else 50
    model = example.build(shard)
    threads = example.threads_for(shards)
    with ThreadPoolExecutor(max_workers=max(1, threads - 1)) as pool:
        example.train(model, shards, 2, pool=pool, threads=threads)  # the plan, the pool
        timed = _alternate({
            "threads": lambda: example.train(model, shards, steps, pool=pool,
                                             threads=threads),
            "serial": lambda: example.train(model, shards, steps, threads=threads),
        }, repeat)
    (threaded, threaded_losses), (serial, serial_losses) = (timed["threads"][1],
                                                            timed["serial"][1])
    if not (threaded.equals(serial) and threaded_losses == serial_losses):
        raise AssertionError("makemore: threaded shards differ from serial")
    workload = f"makemore: {shards} shards x {shard}"
    return [
        Row(SUITE, workload, f"{threads} threads", timed["threads"][0] * 1e3, "ms",
            baseline=True, note=f"{steps} steps, hidden 200, this thread + "
                                f"{threads - 1} in a pool; == serial bit for bit"),
        Row(SUITE, workload, "serial", timed["serial"][0] * 1e3, "ms",
            note="the ratio is the threads' speed-up over serial"),
    ]


def _machine(repeat: int) -> list[Row]:
    import numpy as np

    threads = os.cpu_count() or 1
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))

    def task(_: int) -> float:
        out = a
        for _ in range(8):
            out = np.tanh(out @ b * 0.05)
        return float(out[0, 0])

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(task, range(threads)))
        timed = _alternate({
            "threads": lambda: list(pool.map(task, range(threads))),
            "serial": lambda: [task(k) for k in range(threads)],
        }, repeat)
    workload = "machine: GIL-free work"
    return [
        Row(SUITE, workload, f"{threads} threads", timed["threads"][0] * 1e3, "ms",
            baseline=True, note="matrix products, 1 BLAS thread: the ceiling right now"),
        Row(SUITE, workload, "serial", timed["serial"][0] * 1e3, "ms",
            note="the ratio is what threads can gain on this machine now"),
    ]


def run(quick: bool = False) -> list[Row]:
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"  # before the examples load NumPy and SciPy's BLAS
    repeat = 3 if quick else 9
    return (_machine(repeat) + _gradient_descent(repeat) + _makemore(repeat, quick, 512)
            + _makemore(repeat, quick, 1024))

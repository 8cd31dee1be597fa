"""Data-parallel training and sweeps on a local Ray instance (the ``distributed`` extra).

- W4 (MLP [784,256,10] relu, batch 128, SGD) trained by ``DataParallel`` on 1 worker
  (the whole batch) and on 2 workers (64 rows each), against the same step in this
  process without Ray (the baseline row). The Ray rows' notes give the speed-up over 1
  worker and the median share of a step that is not compute: the step's wall time minus
  the slowest worker's plan time and the driver's update (both timed inside the step),
  over the wall time: object-store transfers, dispatch and the gradient sum.
- A sweep of 8 W4 configurations (learning rates, SGD and Adam), 100 steps each, as Ray
  tasks against ``sweep(..., parallel=False)`` (the same function, one after another):
  configurations per second, the two modes measured alternately, best of two each, so a
  change in the machine's load hits both.

Ray is started here with ``num_cpus=2`` (the issue's 2-core machine); on a machine with
fewer free cores than workers the 2-worker rows measure contention, not scaling. Every
process runs BLAS on one thread (Ray gives each of its one-CPU workers one; this process
is set the same before Numba loads SciPy's BLAS), so the rows compare processes, not
thread pools.
"""

from __future__ import annotations

import functools
import os
import pathlib
import statistics
import time

import numpy as np

from .harness import Row, median_time, module_available

SUITE = "distributed"
ROOT = pathlib.Path(__file__).resolve().parents[1]
BATCH = 128


def w4_build(rows: int):
    """W4 recorded with ``rows`` rows; the inputs are named ``x`` and ``y``."""
    from benchmarks.compiler_workloads import WORKLOADS, make_data, tensorcode_network

    spec = dict(WORKLOADS["W4"], batch=rows)
    network, _loss, adjoints = tensorcode_network(spec, make_data(spec))
    return network, adjoints


def _batch() -> dict[str, np.ndarray]:
    from benchmarks.compiler_workloads import WORKLOADS, make_data

    data = make_data(WORKLOADS["W4"], seed=1)
    return {"x": data["x"], "y": data["y"]}


def _in_process(rows: int, batch: dict, repeat: int) -> float:
    """Seconds per W4 step on ``rows`` rows in this process."""
    import tensorcode as tc
    from tensorcode.distributed.recording import Lowered, record

    lowered = Lowered(record(functools.partial(w4_build, rows)))
    optimizer = tc.optim.Sgd()
    state = {"p": lowered.recording.network.parameters()}
    feeds = {k: v[:rows] for k, v in batch.items()}

    def gradients():
        return lowered.loss_and_gradients(state["p"], feeds)[1]

    def step():
        state["p"] = optimizer.step(state["p"], gradients(), 0.05)

    return median_time(step, repeat=repeat)


def run(quick: bool = False) -> list[Row]:
    if not module_available("ray"):
        return [Row(SUITE, "W4 data-parallel", "tensorcode", 0.0,
                    note="skipped: Ray is not installed (pip install -e '.[distributed]')")]
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"  # before Numba loads SciPy's BLAS; the workers inherit it
    import ray

    import tensorcode as tc
    from tensorcode.distributed import Config, DataParallel, sweep

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    rows: list[Row] = []
    repeat = 20 if quick else 100
    batch = _batch()
    try:
        whole = _in_process(BATCH, batch, repeat)
        title = "W4 data-parallel step, batch 128"
        rows.append(Row(SUITE, title, "tensorcode", whole * 1e6, baseline=True,
                        note="one process, no Ray"))
        times, shares = {}, {}
        for workers in (1, 2):
            with DataParallel(functools.partial(w4_build, BATCH // workers), workers=workers,
                              optimizer=tc.optim.Sgd(), timeout_s=300) as trainer:
                for _ in range(3):
                    trainer.step(batch, 0.05)
                walls, rest = [], []
                for _ in range(repeat):
                    start = time.perf_counter()
                    result = trainer.step(batch, 0.05)
                    wall = time.perf_counter() - start
                    walls.append(wall)
                    rest.append(max(0.0, 1.0 - (result.compute_s + result.update_s) / wall))
                times[workers] = statistics.median(walls)
                shares[workers] = statistics.median(rest)
        rows.append(Row(SUITE, title, "ray 1 worker", times[1] * 1e6,
                        note=f"{shares[1]:.0%} of the step is not compute"))
        rows.append(Row(SUITE, title, "ray 2 workers", times[2] * 1e6,
                        note=f"speed-up over 1 worker {times[1] / times[2]:.2f}x; "
                             f"{shares[2]:.0%} of the step is not compute"))
        configs = [Config(lr, opt) for lr in (0.01, 0.03, 0.05, 0.1) for opt in ("sgd", "adam")]
        steps = 30 if quick else 100
        build = functools.partial(w4_build, BATCH)
        sweep(build, configs[:2], 2, timeout_s=300)  # start the task workers, warm caches
        sweep(build, configs[:1], 2, parallel=False)
        rates = {False: 0.0, True: 0.0}
        for _ in range(2):
            for parallel in (False, True):
                start = time.perf_counter()
                sweep(build, configs, steps, parallel=parallel, timeout_s=600)
                rate = len(configs) / (time.perf_counter() - start)
                rates[parallel] = max(rates[parallel], rate)
        title = f"W4 sweep, {len(configs)} configs x {steps} steps"
        rows.append(Row(SUITE, title, "tensorcode", rates[True], unit="config/s",
                        lower_is_better=False, baseline=True, note="Ray tasks, 2 CPUs"))
        rows.append(Row(SUITE, title, "serial", rates[False], unit="config/s",
                        lower_is_better=False, note="parallel=False, one after another"))
    finally:
        ray.shutdown()
    return rows

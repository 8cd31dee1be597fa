"""A keyword ticket router written in the author subset, against the same logic by hand.

The router reads twelve 0/1 keyword indicators and returns a route and a covered flag,
with a loop, slices, reductions and ``where``. Workloads, each measured in this run:

- one call from Python, dict in and dict out: the compiled ``Algorithm`` (baseline),
  the same call given a list instead of an array (converted once onto the compiled
  path), the reference executor (the NumPy interpreter), plain Python, NumPy, a hand-written
  Numba function (what a compiled call can cost on this machine) and PyTorch (in its
  own process, when installed);
- a ``Router`` over the compiled program against the program's own call, for a covered
  case given as an array and as a list (the issue's target: the Router at most 1.5x the
  program, input validation included), timed alternately in rounds;
- a batch of cases (throughput, million cases per second): ``Algorithm.batch`` through
  the compiled plan, vectorized NumPy, a hand-written Numba loop, vectorized PyTorch,
  and the reference executor on a smaller batch.

Also reported: the seconds this process spent compiling and lowering the program (a
cold plan compile is seconds; a warm on-disk cache makes it milliseconds).
"""

from __future__ import annotations

import json
import time

import numpy as np

from tensorcode.distill.spec import EXAMPLE_SOURCE

from .harness import Row, median_time, module_available, run_in_subprocess

SUITE = "router"

SOURCE = EXAMPLE_SOURCE  # the guide-shaped router SUBSET_SPEC shows authors
PARAMETERS = {"threshold": 0.5}
INPUTS = {"features": (12,)}
OUTPUTS = {"route": (), "covered": ()}


def python_router(inputs: dict) -> dict:
    f = inputs["features"]
    billing = f[0] + f[1] + f[2] + f[3]
    technical = f[4] + f[5] + f[6] + f[7]
    other = max(f[8], f[9], f[10], f[11])
    route = 0.0 if billing >= technical else 1.0
    if other > max(billing, technical):
        route = 2.0
    return {"route": route, "covered": 1.0 if sum(f) >= 0.5 else 0.0}


def numpy_router(inputs: dict) -> dict:
    f = inputs["features"]
    billing = f[0:4].sum()
    technical = f[4:8].sum()
    other = f[8:12].max()
    route = np.where(billing >= technical, 0.0, 1.0)
    route = np.where(other > np.maximum(billing, technical), 2.0, route)
    return {"route": route, "covered": np.where(f.sum() >= 0.5, 1.0, 0.0)}


def numpy_batch(features: np.ndarray) -> dict:
    billing = features[:, 0:4].sum(axis=1)
    technical = features[:, 4:8].sum(axis=1)
    other = features[:, 8:12].max(axis=1)
    route = np.where(billing >= technical, 0.0, 1.0)
    route = np.where(other > np.maximum(billing, technical), 2.0, route)
    return {"route": route, "covered": np.where(features.sum(axis=1) >= 0.5, 1.0, 0.0)}


def numba_routers():
    """Hand-written Numba: the cost of a compiled call on this machine."""
    import numba

    @numba.njit(cache=False, nogil=True)
    def one(f):
        billing = f[0] + f[1] + f[2] + f[3]
        technical = f[4] + f[5] + f[6] + f[7]
        other = max(max(f[8], f[9]), max(f[10], f[11]))
        route = 0.0 if billing >= technical else 1.0
        if other > max(billing, technical):
            route = 2.0
        total = 0.0
        for i in range(12):
            total += f[i]
        return route, 1.0 if total >= 0.5 else 0.0

    @numba.njit(cache=False, nogil=True)
    def many(features):
        n = features.shape[0]
        route = np.empty(n)
        covered = np.empty(n)
        for c in range(n):
            route[c], covered[c] = one(features[c])
        return route, covered

    def call(inputs: dict) -> dict:
        route, covered = one(inputs["features"])
        return {"route": route, "covered": covered}

    return call, many


TORCH_CODE = r'''
import json, statistics, time
import numpy as np
import torch
torch.set_num_threads(1)

def router(inputs):
    f = inputs["features"]
    billing = f[0:4].sum()
    technical = f[4:8].sum()
    other = f[8:12].max()
    route = torch.where(billing >= technical, 0.0, 1.0)
    route = torch.where(other > torch.maximum(billing, technical), 2.0, route)
    return {"route": route, "covered": torch.where(f.sum() >= 0.5, 1.0, 0.0)}

def batch(features):
    billing = features[:, 0:4].sum(dim=1)
    technical = features[:, 4:8].sum(dim=1)
    other = features[:, 8:12].max(dim=1).values
    route = torch.where(billing >= technical, 0.0, 1.0)
    route = torch.where(other > torch.maximum(billing, technical), 2.0, route)
    return {"route": route, "covered": torch.where(features.sum(dim=1) >= 0.5, 1.0, 0.0)}

def median(fn, repeat, number):
    for _ in range(5):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)

REPEAT, NUMBER, N = %(repeat)d, %(number)d, %(n)d
rng = np.random.default_rng(0)
one = {"features": torch.tensor(rng.integers(0, 2, 12).astype(np.float64))}
features = torch.tensor(rng.integers(0, 2, (N, 12)).astype(np.float64))
with torch.no_grad():
    single = median(lambda: router(one), REPEAT, NUMBER)
    many = median(lambda: batch(features), max(3, REPEAT // 5), 1)
print(json.dumps({"single_us": single * 1e6, "batch_cases_per_s": N / many,
                  "version": torch.__version__}))
'''


def run(quick: bool) -> list[Row]:
    import tensorcode.algorithm as algorithms

    repeat, number = (9, 300) if quick else (31, 2000)
    n = 100_000
    reference_n = 200 if quick else 2000
    rows: list[Row] = []
    single = "router, one call (dict in/out)"
    batch = f"router, batch of {n:,} cases"

    from tensorcode.errors import CompileError

    started = time.perf_counter()
    try:
        compiled = algorithms.compile(SOURCE, INPUTS, OUTPUTS, PARAMETERS, executor="numba")
        unavailable = ""
    except CompileError as error:  # reported as a row, never replaced by the reference
        compiled, unavailable = None, str(error)[:160]
    lowering = time.perf_counter() - started
    reference = algorithms.compile(SOURCE, INPUTS, OUTPUTS, PARAMETERS, executor="reference")
    stats = {}
    try:
        from tensorcode.compiler.plans import plan as plan_module
        stats = plan_module.compile_stats()
    except (ImportError, AttributeError):  # no plans: the rows above say so
        pass

    rng = np.random.default_rng(0)
    features = rng.integers(0, 2, 12).astype(np.float64)
    inputs = {"features": features}
    list_inputs = {"features": features.tolist()}
    many = rng.integers(0, 2, (n, 12)).astype(np.float64)

    # every peer gives the same answer before anything is timed
    expected = python_router(list_inputs)
    numba_one, numba_many = numba_routers()
    peers = [("reference", reference, inputs), ("numpy", numpy_router, inputs),
             ("numba", numba_one, inputs)] + ([("compiled", compiled, inputs)] if compiled else [])
    for name, fn, feed in peers:
        got = {k: float(v) for k, v in fn(feed).items()}
        if got != expected:
            raise AssertionError(f"{name} router disagrees: {got} != {expected}")
    want = numpy_batch(many)
    got = compiled.batch({"features": many}) if compiled else want
    for key in OUTPUTS:
        if not np.array_equal(got[key], want[key]):
            raise AssertionError(f"compiled batch disagrees with NumPy on {key}")

    def us(fn, count=number) -> float:
        return median_time(fn, repeat=repeat, warmup=20, number=count) * 1e6

    if compiled is not None:
        rows.append(Row(SUITE, single, "tensorcode", us(lambda: compiled(inputs)), "us",
                        baseline=True, note="compiled Algorithm: plan call, dict in/out"))
    else:
        rows.append(Row(SUITE, single, "tensorcode", 0.0, "us", baseline=True,
                        note=f"numba executor unavailable: {unavailable}"))
    if compiled is not None:
        rows.append(Row(SUITE, single, "tensorcode, list input",
                        us(lambda: compiled(list_inputs)), "us",
                        note="the same call given a list of 12 floats: converted once, then "
                             "the compiled path (target: within 2x of the array call)"))
    rows.append(Row(SUITE, single, "tensorcode reference", us(lambda: reference(inputs),
                                                              max(20, number // 20)), "us",
                    note="Algorithm(executor='reference'): the NumPy interpreter, graph "
                         "resolved once (reference.Prepared)"))
    rows.append(Row(SUITE, single, "python", us(lambda: python_router(list_inputs)), "us",
                    note="plain Python on a list of 12 floats"))
    rows.append(Row(SUITE, single, "numpy", us(lambda: numpy_router(inputs)), "us",
                    note="NumPy ops on one case"))
    rows.append(Row(SUITE, single, "numba (hand-written)", us(lambda: numba_one(inputs)), "us",
                    note="@njit function written for this router, dict in/out"))

    if compiled is not None:
        rows.extend(_router_rows(compiled, features, repeat, number))

    def throughput(fn, count: int) -> float:
        seconds = median_time(fn, repeat=max(3, repeat // 3), warmup=2, number=1)
        return count / seconds / 1e6

    if compiled is not None:
        rows.append(Row(SUITE, batch, "tensorcode",
                        throughput(lambda: compiled.batch({"features": many}), n),
                        "M cases/s", lower_is_better=False, baseline=True,
                        note="Algorithm.batch: the plan's compiled loop over cases"))
    else:
        rows.append(Row(SUITE, batch, "tensorcode", 0.0, "M cases/s", lower_is_better=False,
                        baseline=True, note="numba executor unavailable"))
    small = many[:reference_n]
    rows.append(Row(SUITE, batch, "tensorcode reference",
                    throughput(lambda: reference.batch({"features": small}), reference_n),
                    "M cases/s", lower_is_better=False,
                    note=f"reference executor, {reference_n} cases (one interpreter run each)"))
    rows.append(Row(SUITE, batch, "numpy", throughput(lambda: numpy_batch(many), n),
                    "M cases/s", lower_is_better=False, note="vectorized NumPy"))
    numba_many(many)
    rows.append(Row(SUITE, batch, "numba (hand-written)",
                    throughput(lambda: numba_many(many), n), "M cases/s",
                    lower_is_better=False, note="@njit loop over cases"))

    if module_available("torch"):
        try:
            torch = run_in_subprocess(TORCH_CODE % {"repeat": repeat, "number": number,
                                                    "n": n}, timeout=600)
            rows.append(Row(SUITE, single, "pytorch", torch["single_us"], "us",
                            note=f"torch {torch['version']} eager, one thread, own process"))
            rows.append(Row(SUITE, batch, "pytorch", torch["batch_cases_per_s"] / 1e6,
                            "M cases/s", lower_is_better=False,
                            note=f"torch {torch['version']} vectorized, one thread"))
        except Exception as error:  # reported, not hidden
            rows.append(Row(SUITE, single, "pytorch", 0.0, "us",
                            note=f"failed: {str(error)[-120:]}"))
    else:
        rows.append(Row(SUITE, single, "pytorch", 0.0, "us", note="not installed"))

    rows.append(Row(SUITE, "router, compile + lower (this process)", "tensorcode", lowering,
                    "s", baseline=True,
                    note=("plan cache: " + json.dumps({k: v for k, v in stats.items() if v}))
                    if compiled is not None else "numba executor unavailable"))
    return rows


def _router_rows(compiled, features: np.ndarray, repeat: int, number: int) -> list[Row]:
    """``Router`` calls against the compiled program's call, alternated round by round so
    that load on a shared machine falls on both alike; the note states the ratio."""
    from tensorcode.distill import Router

    router = Router(compiled, lambda inputs: {"route": 0.0}, ["route"])
    claimed = features.copy()
    claimed[0] = 1.0  # covered: the program answers
    rows = []
    for form, value in (("array", claimed), ("list", claimed.tolist())):
        inputs = {"features": value}
        assert router(inputs)["path"] == "program"
        program_us, router_us = _alternated([lambda: compiled(inputs), lambda: router(inputs)],
                                            repeat * 10, max(1, number // 10))
        workload = f"Router call, covered ({form} in)"
        ratio = router_us / program_us
        rows.append(Row(SUITE, workload, "tensorcode Router", router_us, "us", baseline=True,
                        note=f"Router / program = {ratio:.2f}x (target <= 1.5x): validation, "
                             "the compiled call, the path and the count",
                        extra={"router_over_program": ratio}))
        given = "a float64 array" if form == "array" else "a list"
        rows.append(Row(SUITE, workload, "compiled program", program_us, "us",
                        note=f"Algorithm call, a dict of {given} in (its own checks only)"))
    return rows


def _alternated(functions, repeat: int, number: int) -> list[float]:
    """Median microseconds per call of each function, timed in alternating rounds."""
    import statistics

    for fn in functions:
        for _ in range(50):
            fn()
    samples: list[list[float]] = [[] for _ in functions]
    for _ in range(repeat):
        for fn, kept in zip(functions, samples):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            kept.append((time.perf_counter() - start) / number * 1e6)
    return [statistics.median(kept) for kept in samples]

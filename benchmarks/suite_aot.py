"""The ticket router exported as a shared library, called from C and from a fresh Python.

The shipped ticket router (``distill.tickets``: distilled from the recorded replies,
saved, then ``Distillation.export``) is timed on its 240 workload cases:

- from C (``aot_bench.c``, built with ``cc``): one ``router_run`` per case (target at
  most 100 ns), against the in-process ``Router`` call of the same program;
- from C, ``router_batch`` over every case (cases per second), against the in-process
  compiled batch (``Distillation.batch``) measured in the same run;
- from C, ``dlopen`` + symbol lookup + a handle + the first answer (target at most 2 ms);
- a fresh Python process to its first answer through ``tensorcode.aot.load`` (hashes
  checked, library opened with ctypes), after NumPy's import (target at most 20 ms past
  NumPy), with NumPy's own import reported beside it; TensorCode's modules are
  byte-compiled first, as an install leaves them, and the process checks that neither
  llvmlite nor numba was imported.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from .harness import Row, median_time

SUITE = "aot"
HERE = pathlib.Path(__file__).resolve().parent

FRESH_PROCESS = """
import time
start = time.perf_counter()
import numpy as np
numpy_done = time.perf_counter()
from tensorcode import aot
route = aot.load({directory!r})
answer = route({{"features": np.array({case!r})}})
done = time.perf_counter()
import json, sys
heavy = sorted(m for m in ("llvmlite", "numba") if m in sys.modules)
print(json.dumps({{"numpy_ms": (numpy_done - start) * 1e3,
                  "after_numpy_ms": (done - numpy_done) * 1e3, "heavy": heavy,
                  "covered": answer["covered"]}}))
"""


def _fresh_process(directory: pathlib.Path, case: list[float], repeat: int,
                   bytecode: pathlib.Path) -> dict:
    """Medians of ``repeat`` fresh processes; TensorCode's modules are byte-compiled
    first into ``bytecode`` (as an install compiles them), which the processes read."""
    import tensorcode

    environment = {**os.environ, "PYTHONPYCACHEPREFIX": str(bytecode)}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(pathlib.Path(tensorcode.__file__).parent)], check=True,
                   env=environment, capture_output=True, timeout=600)
    code = FRESH_PROCESS.format(directory=str(directory), case=case)
    results = []
    for run in range(repeat + 1):  # the first run fills the prefix with NumPy's bytecode
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120, cwd=HERE.parent, env=environment)
        wall = (time.perf_counter() - start) * 1e3
        if done.returncode:
            raise RuntimeError(f"the fresh process failed:\n{done.stderr[-2000:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        found["wall_ms"] = wall
        if run:
            results.append(found)
    if any(r["heavy"] for r in results):
        raise RuntimeError(f"aot.load imported {results[0]['heavy']}")
    return {key: statistics.median(r[key] for r in results)
            for key in ("numpy_ms", "after_numpy_ms", "wall_ms")}


def run(quick: bool) -> list[Row]:
    from tensorcode.aot.toolchain import find_compiler
    from tensorcode.distill import Distillation, tickets

    rounds = 50 if quick else 400
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as temp:
        work = pathlib.Path(temp)
        tickets.run_example(work / "router")
        program = Distillation.load(work / "router")
        program.export(work / "library")
        cases = np.array([tickets.features(t.text) for t in
                          tickets.generate(tickets.WORKLOAD_SIZE, tickets.WORKLOAD_SEED)])
        binary = work / "aot_bench"
        subprocess.run(find_compiler() + ["-O2", "-std=c11", "-o", str(binary),
                                          str(HERE / "aot_bench.c"), "-ldl"],
                       check=True, capture_output=True, timeout=300)
        text = "\n".join(" ".join(f"{v:.17g}" for v in row) for row in cases) + "\n"
        done = subprocess.run([str(binary), str(work / "library" / "librouter.so"), "router",
                               str(rounds)], input=text, capture_output=True, text=True,
                              check=True, timeout=600)
        c = json.loads(done.stdout.strip().splitlines()[-1])

        router = program.router(lambda inputs: {"route": 0.0}, max_recorded=0)
        feeds = [{"features": row} for row in cases]

        def every_case() -> None:
            for feed in feeds:
                router(feed)
        python_call = median_time(every_case, repeat=max(rounds // 20, 5)) / len(feeds)
        batch = {"features": cases}
        python_batch = median_time(lambda: program.batch(batch), repeat=max(rounds // 4, 10))
        fresh = _fresh_process(work / "library", cases[0].tolist(), 3 if quick else 7,
                               work / "bytecode")

    workload = "ticket router, one call per case (240 workload cases)"
    rows.append(Row(SUITE, workload, "tensorcode", python_call * 1e9, "ns", baseline=True,
                    note="in-process Router, validation and counting included"))
    rows.append(Row(SUITE, workload, "tensorcode aot (C)", c["call_ns"], "ns",
                    note="router_run from C; target <= 100 ns"))
    workload = "ticket router, a batch of the 240 cases"
    rows.append(Row(SUITE, workload, "tensorcode", len(cases) / python_batch, "cases/s",
                    lower_is_better=False, baseline=True,
                    note="Distillation.batch, the in-process compiled batch"))
    rows.append(Row(SUITE, workload, "tensorcode aot (C)", c["batch_cases_per_s"], "cases/s",
                    lower_is_better=False, note="router_batch from C"))
    rows.append(Row(SUITE, "library open + first answer (C: dlopen, handle, one case)",
                    "tensorcode aot (C)", c["open_first_us"], "us", baseline=True,
                    note="target <= 2000 us"))
    workload = "fresh Python process to its first answer through aot.load"
    rows.append(Row(SUITE, workload, "numpy import", fresh["numpy_ms"], "ms", baseline=True,
                    note="the floor: import numpy alone"))
    rows.append(Row(SUITE, workload, "tensorcode aot.load", fresh["after_numpy_ms"], "ms",
                    note="past NumPy's import: target <= 20 ms; no llvmlite, no numba",
                    extra={"process_wall_ms": round(fresh["wall_ms"], 1)}))
    shutil.rmtree(work, ignore_errors=True)
    return rows

"""The compiler suite: one training step of W1..W5 per peer, cold and warm lowering.

Rows per workload: the TensorCode fused step plan on the default backend (baseline),
the unfused plan, run_steps, the reference interpreter on the same lowered plan, plain
NumPy, a hand-written Numba step, and PyTorch eager and JAX jit when installed (each in
its own process). Then W2's cold lowering (fresh process,
empty cache) and a fresh process's time to its first step with a warm cache, with JAX's
fresh-process time to its first jitted step beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .compiler_workloads import (
    WORKLOADS,
    hand_numba_step,
    make_data,
    numpy_step,
    repeats,
    tensorcode_bound_plan,
    tensorcode_fused_step,
    tensorcode_step,
)
from .harness import Row, median_time, module_available

SUITE = "compiler"


def _framework_rows(kind: str, quick: bool) -> list[dict]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import sys; sys.path.insert(0, {here!r}); "
            f"from benchmarks.compiler_workloads import main; "
            f"main([{kind!r}, {'quick' if quick else 'full'!r}])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


_IMPORTS = {
    "tensorcode": "import tensorcode",
    "tensorcode + first name": "import tensorcode; tensorcode.Tape",
    "numpy": "import numpy",
}


def _import_ms(statement: str, repeat: int) -> float:
    """Median milliseconds ``statement`` takes in a fresh interpreter (timed inside the
    process, so the interpreter's own start-up is left out), over ``repeat`` processes."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import sys, time; sys.path.insert(0, {here!r}); t0 = time.perf_counter(); "
            f"{statement}; print(time.perf_counter() - t0)")
    samples = []
    for _ in range(repeat):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=120, check=True)
        samples.append(float(result.stdout.strip().splitlines()[-1]) * 1e3)
    return sorted(samples)[len(samples) // 2]


def import_rows(quick: bool = False) -> list[Row]:
    """``import tensorcode`` in fresh processes: the import alone (every public name is
    loaded on first use), the import plus the first name read (NumPy and the compiler),
    and NumPy's own import beside them."""
    repeat = 3 if quick else 7
    rows = []
    for peer, statement in _IMPORTS.items():
        rows.append(Row(SUITE, "import tensorcode (fresh process)", peer,
                        _import_ms(statement, repeat), unit="ms",
                        baseline=peer == "tensorcode",
                        note=f"median of {repeat} processes; `{statement}`"))
    return rows


def _with_blas_threads(measure):
    """Run ``measure`` with SciPy's OpenBLAS at ``tc.get_num_threads()`` threads, then
    back at the one thread plans set. Numba's ``np.dot`` calls that OpenBLAS, which
    the llvm plans loaded earlier in this process left at one thread: a hand-written
    Numba step in a process of its own would use every core for its products."""
    from tensorcode.compiler.backends import threads

    threads.set_blas_threads(threads.get_num_threads())
    try:
        return measure()
    finally:
        threads.set_blas_threads(threads.BLAS_THREADS)


def run(quick: bool = False) -> list[Row]:
    rows: list[Row] = import_rows(quick)
    for name, spec in WORKLOADS.items():
        workload = spec["title"]
        data = make_data(spec)
        n = repeats(name, quick)
        fused, fused_note, step_plan = tensorcode_fused_step(spec, data)
        value = median_time(fused, repeat=n, warmup=3)
        blas = ""
        if name in ("W4", "W5") and os.environ.get("OPENBLAS_CORETYPE"):
            blas = f"; OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']}"
        rows.append(Row(SUITE, workload, "tensorcode", value * 1e6,
                        note=f"{fused_note}: one compiled call{blas}", baseline=True))
        step, note, plan = tensorcode_step(spec, data)
        rows.append(Row(SUITE, workload, "tensorcode unfused",
                        median_time(step, repeat=n, warmup=3) * 1e6,
                        note=f"plan.forward, recorded_gradients, {note}.step"))
        network = plan.network
        parameters = network.parameters()
        if name != "W5":
            k = 100
            many, _, _ = tensorcode_fused_step(spec, data, steps=k)
            one, _, _ = tensorcode_fused_step(spec, data, steps=k, shared=True)
            # a sample of K steps either way: one run_steps call, or K fused steps in a
            # Python loop. A single step is short enough to run between the other
            # processes' time slices on a loaded machine, a K-step sample is not, so only
            # samples of the same length compare the two paths (alternated)
            per = loop = same = float("inf")
            for _ in range(2):
                per = min(per, median_time(many, repeat=max(3, n // 40), warmup=1) / k)
                loop = min(loop, median_time(fused, repeat=max(3, n // 40), warmup=1,
                                             number=k))
                same = min(same, median_time(one, repeat=max(3, n // 40), warmup=1) / k)
            rows.append(Row(SUITE, workload, "tensorcode run_steps", per * 1e6,
                            note=f"per step of run_steps over {k} minibatches in one call; "
                                 f"{loop / per:.2f}x faster than {k} fused steps in a loop "
                                 "timed as one sample (which reuse one minibatch); over "
                                 f"one minibatch shared by the {k} steps, as the loop: "
                                 f"{loop / same:.2f}x"))
            inputs = [network.graph.nodes[s.index].value for s in plan.inputs()]
            bound = tensorcode_bound_plan(plan, parameters, inputs)
            only = median_time(bound, repeat=n, warmup=3)
            rows.append(Row(SUITE, workload, "tensorcode plan only", only * 1e6,
                            note="bound plan alone (bound.flat): loss and gradients, no "
                                 "update"))
            forward = median_time(lambda: plan.forward(parameters), repeat=n, warmup=3)
            rows.append(Row(SUITE, workload, "tensorcode plan.forward", forward * 1e6,
                            note="plan.forward alone (validated call)"))
            del step_plan
        if name != "W5" or not quick:
            ref_step, _, _ = tensorcode_step(spec, data, "reference")
            rows.append(Row(SUITE, workload, "reference interpreter",
                            median_time(ref_step, repeat=max(3, n // 4), warmup=1) * 1e6,
                            note="same lowered plan, NumPy per node"))
        rows.append(Row(SUITE, workload, "numpy",
                        median_time(numpy_step(spec, data), repeat=n, warmup=2) * 1e6,
                        note="hand-written NumPy"))
        hand, hand_note = hand_numba_step(name, spec, data)
        rows.append(Row(SUITE, workload, "hand numba", _with_blas_threads(
            lambda: median_time(hand, repeat=n, warmup=3)) * 1e6, note=hand_note))
    for kind, module in (("torch", "torch"), ("jax", "jax"), ("jax1", "jax")):
        if not module_available(module):
            rows.append(Row(SUITE, WORKLOADS["W1"]["title"], f"{kind} (not installed)", 0.0,
                            note="install it to compare"))
            continue
        try:
            for r in _framework_rows(kind, quick):
                rows.append(Row(SUITE, WORKLOADS[r["workload"]]["title"], r["peer"], r["value"],
                                note=r["note"]))
        except Exception as error:  # report, do not abort the suite
            rows.append(Row(SUITE, WORKLOADS["W1"]["title"], f"{kind} (failed)", 0.0,
                            note=str(error).splitlines()[-1][:80]))
    # cold start, warm start and warm speed per backend, with JAX's fresh process
    from .compiler_llvm import run as llvm_rows  # the llvm backend beside numba

    rows += llvm_rows(quick)
    return rows

"""Optimizer update throughput: parameters per second for one step.

TensorCode's ``Sgd(momentum=0.9)`` and ``Adam`` (compiled loop, and the NumPy reference
path) against ``torch.optim.SGD`` / ``Adam`` in their single-tensor, ``foreach`` and
``fused`` forms, measured in the same run (PyTorch in its own process). The parameters
are float32, split over four tensors. A TensorCode step returns a new parameter table
(tables are immutable) while PyTorch updates in place; both numbers include that.
"""

from __future__ import annotations

import textwrap

import numpy as np

from .harness import Row, median_time, module_available, run_in_subprocess

SUITE = "optim"
TENSORS = 4


def _sizes(quick: bool) -> list[int]:
    return [100_000, 1_000_000] if quick else [100_000, 10_000_000]


def _repeat(n: int, quick: bool) -> int:
    if n >= 10_000_000:
        return 5 if quick else 15
    return 20 if quick else 100


def _ours(n: int, quick: bool) -> list[Row]:
    import tensorcode as tc
    from tensorcode.compiler.plans.tables import Gradients

    rng = np.random.default_rng(0)
    tape = tc.Tape()
    for k in range(TENSORS):
        tape.parameter(rng.standard_normal(n // TENSORS).astype(np.float32), name=f"p{k}")
    parameters = tape.into_network().parameters()
    gradients = Gradients.from_payloads(parameters.layout, [
        rng.standard_normal(n // TENSORS).astype(np.float32) for _ in range(TENSORS)])
    rows = []
    for name, make in [("sgd-momentum", lambda b: tc.optim.Sgd(momentum=0.9, backend=b)),
                       ("adam", lambda b: tc.optim.Adam(backend=b))]:
        for backend, peer in [("numba", "tensorcode"), ("reference", "tensorcode-numpy")]:
            if backend == "reference" and n > 1_000_000 and quick:
                continue
            optimizer = make(backend)
            optimizer.step(parameters, gradients, 1e-3)  # compile / load, create state
            seconds = median_time(lambda: optimizer.step(parameters, gradients, 1e-3),
                                  repeat=_repeat(n, quick), warmup=2)
            rows.append(Row(SUITE, f"{name} {n:.0e} f32", peer, n / seconds, unit="param/s",
                            lower_is_better=False,
                            note="compiled loop, 1 thread" if backend == "numba"
                            else "NumPy reference path"))
    return rows


_TORCH = textwrap.dedent("""
    import json, statistics, time, torch
    n, tensors, repeat = {n}, {tensors}, {repeat}
    torch.manual_seed(0)
    results = []
    for name, cls, kwargs in [("sgd-momentum", torch.optim.SGD, dict(momentum=0.9)),
                              ("adam", torch.optim.Adam, dict())]:
        for mode in ("single-tensor", "foreach", "fused"):
            params = [torch.randn(n // tensors, requires_grad=True) for _ in range(tensors)]
            for p in params:
                p.grad = torch.randn_like(p)
            flags = dict(foreach=False) if mode == "single-tensor" else (
                dict(foreach=True) if mode == "foreach" else dict(fused=True))
            try:
                opt = cls(params, lr=1e-3, **kwargs, **flags)
                opt.step()
            except Exception as error:
                results.append([name, mode, None, str(error)[:80]])
                continue
            for _ in range(2):
                opt.step()
            samples = []
            for _ in range(repeat):
                start = time.perf_counter()
                opt.step()
                samples.append(time.perf_counter() - start)
            results.append([name, mode, statistics.median(samples), ""])
    print(json.dumps({{"threads": torch.get_num_threads(), "version": torch.__version__,
                      "results": results}}))
""")


def _torch(n: int, quick: bool) -> list[Row]:
    if not module_available("torch"):
        return []
    out = run_in_subprocess(_TORCH.format(n=n, tensors=TENSORS, repeat=_repeat(n, quick)))
    rows = []
    for name, mode, seconds, _error in out["results"]:
        if seconds is None:
            continue
        rows.append(Row(SUITE, f"{name} {n:.0e} f32", f"torch {mode}", n / seconds,
                        unit="param/s", lower_is_better=False,
                        note=f"torch {out['version']}, {out['threads']} threads"))
    return rows


def run(quick: bool) -> list[Row]:
    rows = []
    for n in _sizes(quick):
        measured = _ours(n, quick) + _torch(n, quick)
        if quick and n == 1_000_000:
            for row in measured:
                row.note += "; --quick: 1e6 parameters stand in for 1e7"
        rows += measured
    return rows

"""Randomness inside plans: what dropout costs a training step, and raw draw speed.

- ``W2 + dropout 0.1``: the W2 workload (``compiler_workloads.py``, MLP [2,16,16,1] tanh,
  batch 200, SGD) with dropout 0.1 after both hidden layers, one step (forward, gradient,
  update) with the masks drawn inside the plan; peers: the same TensorCode step without
  dropout (the ratio is dropout's cost, target at most 1.3x) and PyTorch eager with
  ``torch.nn.Dropout`` (in its own process, target TensorCode at least 3x faster).
- ``random_uniform 1e6``: float32 and float64 uniforms drawn by a plan (Philox-4x32-10)
  against NumPy's ``Generator.random`` (PCG64) writing into a preallocated array
  (target at least 1x).
"""

from __future__ import annotations

import textwrap

import numpy as np

from .compiler_workloads import WORKLOADS, make_data
from .harness import Row, median_time, module_available, run_in_subprocess

SUITE = "random"
P = 0.1


def _w2_network(data: dict, dropout: float):
    import tensorcode as tc

    tape = tc.Tape()
    h = tape.input(data["x"], name="x")
    params = []
    layers = data["layers"]
    for k, (w0, b0) in enumerate(layers):
        w = tape.parameter(w0, name=f"{k}.weights")
        b = tape.parameter(b0, name=f"{k}.bias")
        params += [w, b]
        h = h @ w + b
        if k < len(layers) - 1:
            h = tc.nn.dropout(h.tanh(), dropout)
    loss = tc.mse(h, tape.input(data["y"], name="y"))
    adjoints = tape.differentiate(loss, params)
    return tape.into_network(), adjoints


def _w2_rows(quick: bool) -> list[Row]:
    import tensorcode as tc

    spec = WORKLOADS["W2"]
    data = make_data(spec)
    repeat = 100 if quick else 600
    rows = []
    for dropout, peer in [(P, "tensorcode"), (0.0, "tensorcode, no dropout")]:
        network, adjoints = _w2_network(data, dropout)
        plan = network.entry(adjoints.roots()).lower("numba")
        optimizer = tc.optim.Sgd()
        state = {"p": network.parameters()}
        generator = tc.random.Generator(0)

        def step(plan=plan, adjoints=adjoints, optimizer=optimizer, state=state,
                 generator=generator):
            run = plan.forward(state["p"], generator=generator)
            state["p"] = optimizer.step(state["p"], run.recorded_gradients(adjoints),
                                        spec["lr"])
        seconds = median_time(step, repeat=repeat, warmup=10)
        rows.append(Row(SUITE, f"W2 + dropout {P} step", peer, seconds * 1e6,
                        baseline=dropout > 0,
                        note="plan + tc.optim.Sgd, 1 thread" if dropout else
                        "the same step without dropout"))
    return rows


_TORCH = textwrap.dedent("""
    import json, statistics, time, torch
    import numpy as np
    torch.manual_seed(0)
    data = np.load({path!r})
    x, y = torch.tensor(data["x"]), torch.tensor(data["y"])
    layers = [(torch.tensor(data[f"w{{k}}"], requires_grad=True),
               torch.tensor(data[f"b{{k}}"], requires_grad=True)) for k in range(3)]
    params = [t for pair in layers for t in pair]
    opt = torch.optim.SGD(params, lr={lr})
    drop = torch.nn.Dropout({p})
    drop.train()
    def step():
        opt.zero_grad(set_to_none=True)
        h = x
        for k, (w, b) in enumerate(layers):
            h = h @ w + b
            if k < 2:
                h = drop(torch.tanh(h))
        loss = ((h - y) ** 2).mean()
        loss.backward()
        opt.step()
    for _ in range(10):
        step()
    samples = []
    for _ in range({repeat}):
        start = time.perf_counter()
        step()
        samples.append(time.perf_counter() - start)
    print(json.dumps({{"seconds": statistics.median(samples), "version": torch.__version__,
                      "threads": torch.get_num_threads()}}))
""")


def _torch_rows(quick: bool) -> list[Row]:
    if not module_available("torch"):
        return []
    import tempfile

    data = make_data(WORKLOADS["W2"])
    arrays = {"x": data["x"], "y": data["y"]}
    for k, (w, b) in enumerate(data["layers"]):
        arrays[f"w{k}"], arrays[f"b{k}"] = w, b
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/w2.npz"
        np.savez(path, **arrays)
        out = run_in_subprocess(_TORCH.format(path=path, lr=WORKLOADS["W2"]["lr"], p=P,
                                              repeat=100 if quick else 600))
    return [Row(SUITE, f"W2 + dropout {P} step", "pytorch eager", out["seconds"] * 1e6,
                note=f"torch {out['version']} nn.Dropout, {out['threads']} threads")]


def _uniform_rows(quick: bool) -> list[Row]:
    import tensorcode as tc

    n = 1_000_000
    repeat = 20 if quick else 100
    rows = []
    for dtype in ("float32", "float64"):
        tape = tc.Tape()
        u = tc.random.random_uniform(tape.random_key(), (n,), dtype)
        network = tape.into_network()
        plan = network.entry([u]).lower("numba")
        table = network.parameters()
        generator = tc.random.Generator(0)
        seconds = median_time(lambda: plan.forward(table, generator=generator),
                              repeat=repeat, warmup=3)
        workload = f"random_uniform 1e6 {dtype}"
        rows.append(Row(SUITE, workload, "tensorcode", n / seconds, unit="draw/s",
                        lower_is_better=False, note="Philox-4x32-10 plan, 1 thread"))
        rng = np.random.default_rng(0)
        out = np.empty(n, dtype)
        seconds = median_time(lambda: rng.random(out=out, dtype=dtype), repeat=repeat,
                              warmup=3)
        rows.append(Row(SUITE, workload, "numpy Generator.random", n / seconds,
                        unit="draw/s", lower_is_better=False,
                        note=f"PCG64 into a preallocated array, numpy {np.__version__}"))
    return rows


def run(quick: bool) -> list[Row]:
    return _w2_rows(quick) + _torch_rows(quick) + _uniform_rows(quick)

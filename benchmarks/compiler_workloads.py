"""The compiler suite's workloads (W1..W5) and their peers, one module so every peer
trains the same network from the same data and initial weights.

Each workload is one full training step: forward, gradients, update (SGD; Adam for W3).
Peers: the TensorCode Numba plan (the baseline row), the reference interpreter running
the same lowered plan, plain NumPy, a hand-written Numba step (the practical limit a code
generator can reach here), PyTorch eager and JAX jit. PyTorch and JAX each run in their
own process (``python -m benchmarks.compiler_workloads torch|jax``): PyTorch slows down
several-fold with JAX loaded beside it.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
import time

import numpy as np

WORKLOADS = {
    "W1": dict(title="W1 MLP [1,16,1] tanh, 48 samples", sizes=[1, 16, 1], act="tanh",
               batch=48, loss="mse", opt="sgd", lr=0.05),
    "W2": dict(title="W2 MLP [2,16,16,1] tanh, 200", sizes=[2, 16, 16, 1], act="tanh",
               batch=200, loss="mse", opt="sgd", lr=0.05),
    "W3": dict(title="W3 makemore MLP, Adam", sizes=[30, 200, 27], act="tanh", batch=32,
               loss="ce", opt="adam", lr=1e-3, embedding=(27, 10, 3)),
    "W4": dict(title="W4 MLP [784,256,10] relu, 128", sizes=[784, 256, 10], act="relu",
               batch=128, loss="ce", opt="sgd", lr=0.05),
    "W5": dict(title="W5 MLP [512,2048,2048,512] tanh", sizes=[512, 2048, 2048, 512],
               act="tanh", batch=256, loss="mse", opt="sgd", lr=0.01),
}
ADAM = dict(b1=0.9, b2=0.999, eps=1e-8)


def make_data(spec: dict, seed: int = 0) -> dict:
    """Inputs, targets and initial weights (float32) for a workload."""
    rng = np.random.default_rng(seed)
    sizes, batch = spec["sizes"], spec["batch"]
    data: dict = {}
    if "embedding" in spec:
        vocab, dim, context = spec["embedding"]
        data["idx"] = rng.integers(0, vocab, size=(batch, context)).astype(np.int64)
        data["E"] = rng.normal(0, 1, (vocab, dim)).astype(np.float32)
    else:
        data["x"] = rng.uniform(-1, 1, (batch, sizes[0])).astype(np.float32)
    if spec["loss"] == "mse":
        data["y"] = rng.uniform(-1, 1, (batch, sizes[-1])).astype(np.float32)
    else:
        data["y"] = rng.integers(0, sizes[-1], size=(batch,)).astype(np.int64)
    layers = []
    for a, b in itertools.pairwise(sizes):
        limit = math.sqrt(6.0 / (a + b))
        layers.append((rng.uniform(-limit, limit, (a, b)).astype(np.float32),
                       np.zeros(b, np.float32)))
    data["layers"] = layers
    return data


def repeats(name: str, quick: bool) -> int:
    if name == "W5":
        return 3 if quick else 15
    return 60 if quick else 400


# ---------------------------------------------------------------------------------------
# TensorCode


def tensorcode_network(spec: dict, data: dict):
    import tensorcode as tc

    tape = tc.Tape()
    params = []
    if "embedding" in spec:
        _, dim, context = spec["embedding"]
        idx = tape.input(data["idx"], name="idx")
        table = tape.parameter(data["E"], name="E")
        params.append(table)
        h = table.take(idx, axis=0).reshape(spec["batch"], context * dim)
    else:
        h = tape.input(data["x"], name="x")
    layers = data["layers"]
    for k, (w0, b0) in enumerate(layers):
        w = tape.parameter(w0, name=f"{k}.weights")
        b = tape.parameter(b0, name=f"{k}.bias")
        params += [w, b]
        h = h @ w + b
        if k < len(layers) - 1:
            h = h.tanh() if spec["act"] == "tanh" else h.relu()
    y = tape.input(data["y"], name="y")
    loss = tc.mse(h, y) if spec["loss"] == "mse" else tc.cross_entropy(h, y)
    adjoints = tape.differentiate(loss, params)
    return tape.into_network(), loss, adjoints


def tensorcode_step(spec: dict, data: dict, backend: str = "llvm"):
    """A step closure for the TensorCode plan (the default backend unless named), and a
    note on the update it uses."""
    network, _, adjoints = tensorcode_network(spec, data)
    plan = network.entry(adjoints.roots()).lower(backend)
    state = {"p": network.parameters()}
    lr = spec["lr"]
    try:
        from tensorcode.runtime import optim
        opt = optim.Adam() if spec["opt"] == "adam" else optim.Sgd()
        note = f"tc.optim.{type(opt).__name__}"

        def step():
            run = plan.forward(state["p"])
            state["p"] = opt.step(state["p"], run.recorded_gradients(adjoints), lr)
    except ImportError:  # pragma: no cover - before tc.optim landed
        note = "parameters.step (plain SGD rule)"

        def step():
            run = plan.forward(state["p"])
            state["p"] = state["p"].step(run.recorded_gradients(adjoints),
                                         lambda p, g: p - lr * g)
    return step, note, plan


def tensorcode_fused_step(spec: dict, data: dict, steps: int = 0, shared: bool = False):
    """The fused step: ``entry.lower(optimizer=...)`` bound to a parameter table and its
    optimizer, so one compiled call runs forward, backward and the update. With
    ``steps`` > 0, a closure that runs that many steps in one ``run_steps`` call over a
    stack of copies of the minibatch (time it and divide by ``steps``), or with
    ``shared`` over the one minibatch given a leading axis of 1 (every step reads it, as
    a loop of fused steps over one minibatch does)."""
    from tensorcode.runtime import optim

    network, _, adjoints = tensorcode_network(spec, data)
    opt = optim.Adam() if spec["opt"] == "adam" else optim.Sgd()
    step_plan = network.entry(adjoints.roots()).lower(optimizer=opt)
    parameters = network.parameters()
    lr = spec["lr"]
    inputs = [network.graph.nodes[s.index].value for s in step_plan.inputs()]
    bound = step_plan.bind(parameters, opt)
    note = f"fused step plan, tc.optim.{type(opt).__name__}"
    if steps:
        stacked = [x[None] if shared else
                   np.ascontiguousarray(np.broadcast_to(x, (steps,) + x.shape)) for x in inputs]
        lrs = np.full(steps, lr)

        def many():
            bound.run_steps(lrs, *stacked)
        return many, note, step_plan

    def step():
        return bound(lr, *inputs)
    return step, note, step_plan


def tensorcode_bound_plan(plan, parameters, inputs):
    """The plan alone through its lowest-overhead call (``bound.flat``)."""
    fn, _ = plan.bind(parameters).flat
    return lambda: fn(*inputs)


# ---------------------------------------------------------------------------------------
# plain NumPy


def numpy_step(spec: dict, data: dict):
    layers = [(w.copy(), b.copy()) for w, b in data["layers"]]
    E = data.get("E")
    E = None if E is None else E.copy()
    lr, act, batch = spec["lr"], spec["act"], spec["batch"]
    adam = spec["opt"] == "adam"
    params = ([E] if E is not None else []) + [a for wb in layers for a in wb]
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    t = [0]

    def step():
        if E is not None:
            idx = data["idx"]
            x = E[idx].reshape(batch, -1)
        else:
            x = data["x"]
        hs, h = [x], x
        for k, (w, b) in enumerate(layers):
            h = h @ w + b
            if k < len(layers) - 1:
                h = np.tanh(h) if act == "tanh" else np.maximum(h, 0)
            hs.append(h)
        if spec["loss"] == "mse":
            g = 2.0 * (h - data["y"]) / h.size
        else:
            z = h - h.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(batch), data["y"]] -= 1
            g = p / batch
        grads = []
        for k in range(len(layers) - 1, -1, -1):
            w, b = layers[k]
            grads.append((hs[k].T @ g, g.sum(axis=0)))
            g = g @ w.T
            if k > 0:
                a = hs[k]
                g = g * (1 - a * a) if act == "tanh" else g * (a > 0)
        grads = grads[::-1]
        flat = [a for wb in grads for a in wb]
        if E is not None:
            gE = np.zeros_like(E)
            np.add.at(gE, data["idx"].reshape(-1), g.reshape(-1, E.shape[1]))
            flat = [gE] + flat
        t[0] += 1
        for p_, g_, (m, v) in zip(params, flat, moments):
            if adam:
                m *= ADAM["b1"]
                m += (1 - ADAM["b1"]) * g_
                v *= ADAM["b2"]
                v += (1 - ADAM["b2"]) * g_ * g_
                mh = m / (1 - ADAM["b1"] ** t[0])
                vh = v / (1 - ADAM["b2"] ** t[0])
                p_ -= lr * mh / (np.sqrt(vh) + ADAM["eps"])
            else:
                p_ -= lr * g_
    return step


# ---------------------------------------------------------------------------------------
# hand-written Numba


def _hand_kernels():
    from numba import njit

    @njit(nogil=True)
    def small1(x, y, W1, b1, W2, b2, lr):
        """[in, H, 1] tanh MLP, mse, SGD: one fused pass per sample."""
        n, d = x.shape
        H = W1.shape[1]
        gW1 = np.zeros_like(W1)
        gb1 = np.zeros_like(b1)
        gW2 = np.zeros_like(W2)
        gb2 = np.zeros_like(b2)
        h = np.empty(H, np.float32)
        scale = np.float32(2.0 / n)
        for i in range(n):
            for j in range(H):
                a = b1[j]
                for k in range(d):
                    a += x[i, k] * W1[k, j]
                h[j] = np.tanh(a)
            p = b2[0]
            for j in range(H):
                p += h[j] * W2[j, 0]
            g = (p - y[i, 0]) * scale
            gb2[0] += g
            for j in range(H):
                gW2[j, 0] += g * h[j]
                gh = g * W2[j, 0] * (np.float32(1) - h[j] * h[j])
                gb1[j] += gh
                for k in range(d):
                    gW1[k, j] += gh * x[i, k]
        W1 -= lr * gW1
        b1 -= lr * gb1
        W2 -= lr * gW2
        b2 -= lr * gb2

    @njit(nogil=True)
    def small2(x, y, W1, b1, W2, b2, W3, b3, lr):
        """[in, H1, H2, 1] tanh MLP, mse, SGD: one fused pass per sample."""
        n, d = x.shape
        H1, H2 = W1.shape[1], W2.shape[1]
        gW1, gb1 = np.zeros_like(W1), np.zeros_like(b1)
        gW2, gb2 = np.zeros_like(W2), np.zeros_like(b2)
        gW3, gb3 = np.zeros_like(W3), np.zeros_like(b3)
        h1 = np.empty(H1, np.float32)
        h2 = np.empty(H2, np.float32)
        g2 = np.empty(H2, np.float32)
        g1 = np.empty(H1, np.float32)
        scale = np.float32(2.0 / n)
        one = np.float32(1)
        for i in range(n):
            for j in range(H1):
                a = b1[j]
                for k in range(d):
                    a += x[i, k] * W1[k, j]
                h1[j] = np.tanh(a)
            for j in range(H2):
                h2[j] = b2[j]
            for k in range(H1):
                for j in range(H2):
                    h2[j] += h1[k] * W2[k, j]
            p = b3[0]
            for j in range(H2):
                h2[j] = np.tanh(h2[j])
                p += h2[j] * W3[j, 0]
            g = (p - y[i, 0]) * scale
            gb3[0] += g
            for j in range(H2):
                gW3[j, 0] += g * h2[j]
                g2[j] = g * W3[j, 0] * (one - h2[j] * h2[j])
                gb2[j] += g2[j]
            for k in range(H1):
                s = np.float32(0)
                for j in range(H2):
                    gW2[k, j] += h1[k] * g2[j]
                    s += W2[k, j] * g2[j]
                g1[k] = s * (one - h1[k] * h1[k])
                gb1[k] += g1[k]
                for q in range(d):
                    gW1[q, k] += g1[k] * x[i, q]
        W1 -= lr * gW1
        b1 -= lr * gb1
        W2 -= lr * gW2
        b2 -= lr * gb2
        W3 -= lr * gW3
        b3 -= lr * gb3

    @njit(nogil=True)
    def softmax_ce_grad(h, y):
        n, c = h.shape
        g = np.empty_like(h)
        loss = 0.0
        for i in range(n):
            m = h[i, 0]
            for j in range(c):
                m = max(m, h[i, j])
            s = np.float32(0)
            for j in range(c):
                g[i, j] = np.exp(h[i, j] - m)
                s += g[i, j]
            for j in range(c):
                g[i, j] = g[i, j] / s / n
            g[i, y[i]] -= np.float32(1.0 / n)
            loss += np.log(s) + m - h[i, y[i]]
        return g, loss / n

    @njit(nogil=True)
    def dense(x, y, labels, Ws, bs, flat, lr, relu, ce, E, idx, moments, t, adam):
        """Batch-matrix MLP step with BLAS matmuls (W3, W4, W5)."""
        n = x.shape[0] if E.shape[0] == 0 else idx.shape[0]
        if E.shape[0] > 0:
            dim = E.shape[1]
            ctx = idx.shape[1]
            x = np.empty((n, ctx * dim), np.float32)
            for i in range(n):
                for c in range(ctx):
                    for k in range(dim):
                        x[i, c * dim + k] = E[idx[i, c], k]
        L = len(Ws)
        hs = [x]
        h = x
        for k in range(L):
            z = np.dot(h, Ws[k])
            bias = bs[k]
            for i in range(z.shape[0]):
                for j in range(z.shape[1]):
                    v = z[i, j] + bias[j]
                    if k < L - 1:
                        v = max(v, np.float32(0)) if relu else np.tanh(v)
                    z[i, j] = v
            hs.append(z)
            h = z
        if ce:
            g, _ = softmax_ce_grad(h, labels)
        else:
            g = np.empty_like(h)
            sc = np.float32(2.0 / h.size)
            for i in range(h.shape[0]):
                for j in range(h.shape[1]):
                    g[i, j] = (h[i, j] - y[i, j]) * sc
        gW = [np.empty((1, 1), np.float32)] * L
        gb = [np.empty(1, np.float32)] * L
        for k in range(L - 1, -1, -1):
            gW[k] = np.dot(hs[k].T, g)
            colsum = np.zeros(g.shape[1], np.float32)
            for i in range(g.shape[0]):
                for j in range(g.shape[1]):
                    colsum[j] += g[i, j]
            gb[k] = colsum
            if k > 0 or E.shape[0] > 0:
                g = np.dot(g, Ws[k].T)
                if k > 0:
                    a = hs[k]
                    for i in range(g.shape[0]):
                        for j in range(g.shape[1]):
                            if relu:
                                g[i, j] = g[i, j] if a[i, j] > 0 else np.float32(0)
                            else:
                                g[i, j] = g[i, j] * (np.float32(1) - a[i, j] * a[i, j])
        grads = []
        if E.shape[0] > 0:
            gE = np.zeros_like(E)
            dim = E.shape[1]
            for i in range(n):
                for c in range(idx.shape[1]):
                    for k in range(dim):
                        gE[idx[i, c], k] += g[i, c * dim + k]
            grads.append(gE.ravel())
        for k in range(L):
            grads.append(gW[k].ravel())
            grads.append(gb[k])
        for q in range(len(flat)):
            p = flat[q]
            gq = grads[q]
            if adam:
                m, v = moments[2 * q], moments[2 * q + 1]
                c1 = 1.0 - 0.9 ** t
                c2 = 1.0 - 0.999 ** t
                for i in range(p.size):
                    m[i] = np.float32(0.9) * m[i] + np.float32(0.1) * gq[i]
                    v[i] = np.float32(0.999) * v[i] + np.float32(0.001) * gq[i] * gq[i]
                    p[i] -= np.float32(lr * (m[i] / c1) / (np.sqrt(v[i] / c2) + 1e-8))
            else:
                for i in range(p.size):
                    p[i] -= np.float32(lr) * gq[i]

    return small1, small2, dense


def hand_numba_step(name: str, spec: dict, data: dict):
    from numba.typed import List

    small1, _, dense = _hand_kernels()
    layers = [(w.copy(), b.copy()) for w, b in data["layers"]]
    lr = np.float32(spec["lr"])
    if name == "W1":
        args = (data["x"], data["y"], *layers[0], *layers[1], lr)
        return lambda: small1(*args), "fused per-sample loops, np.tanh"
    Ws, bs = List([w for w, _ in layers]), List([b for _, b in layers])
    E = data["E"].copy() if "E" in data else np.zeros((0, 1), np.float32)
    idx = data.get("idx", np.zeros((0, 1), np.int64))
    x = data.get("x", np.zeros((0, 1), np.float32))
    ce = spec["loss"] == "ce"
    y2 = np.zeros((0, 0), np.float32) if ce else data["y"]
    labels = data["y"] if ce else np.zeros(0, np.int64)
    sizes = ([E.size] if E.shape[0] else []) + [a.size for wb in layers for a in wb]
    moments = List([np.zeros(s, np.float32) for s in sizes for _ in range(2)])
    t = [0]
    ce = spec["loss"] == "ce"

    flat = List(([E.reshape(-1)] if E.shape[0] else [])
                + [a.reshape(-1) for wb in layers for a in wb])

    def step():
        t[0] += 1
        dense(x, y2, labels, Ws, bs, flat, float(lr), spec["act"] == "relu", ce, E, idx, moments,
              t[0], spec["opt"] == "adam")
    # (for W2 this batch-matrix form beats fused per-sample loops, small2: 62 vs 100 us)
    return step, "np.dot (BLAS) + loops" + (", np.tanh" if spec["act"] == "tanh" else "")


# ---------------------------------------------------------------------------------------
# PyTorch and JAX, each in its own process


def torch_rows(quick: bool) -> list[dict]:
    import torch

    from .harness import median_time

    torch.manual_seed(0)
    rows = []
    for name, spec in WORKLOADS.items():
        data = make_data(spec)
        params = []
        E = None
        if "E" in data:
            E = torch.tensor(data["E"], requires_grad=True)
            params.append(E)
            idx = torch.tensor(data["idx"])
        else:
            x = torch.tensor(data["x"])
        layers = []
        for w, b in data["layers"]:
            layers.append((torch.tensor(w, requires_grad=True),
                           torch.tensor(b, requires_grad=True)))
            params += list(layers[-1])
        y = torch.tensor(data["y"])
        opt = (torch.optim.Adam(params, lr=spec["lr"]) if spec["opt"] == "adam"
               else torch.optim.SGD(params, lr=spec["lr"]))
        act = torch.tanh if spec["act"] == "tanh" else torch.relu

        def step():
            opt.zero_grad(set_to_none=True)
            h = E[idx].reshape(spec["batch"], -1) if E is not None else x
            for k, (w, b) in enumerate(layers):
                h = h @ w + b
                if k < len(layers) - 1:
                    h = act(h)
            loss = (((h - y) ** 2).mean() if spec["loss"] == "mse"
                    else torch.nn.functional.cross_entropy(h, y))
            loss.backward()
            opt.step()
        value = median_time(step, repeat=repeats(name, quick), warmup=3)
        rows.append(dict(workload=name, peer="pytorch eager", value=value * 1e6,
                         note=f"torch {torch.__version__}, {torch.get_num_threads()} threads"))
    return rows


def jax_rows(quick: bool, one_core: bool = False) -> list[dict]:
    """JAX ``jax.jit`` steps. XLA runs a step's operations on its own thread pool over
    every core it may use, whatever ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` say
    (its flags for one thread no longer hold in this version), while TensorCode's plans
    and the other peers run on the calling thread. So each row's note gives the CPU time
    per step over the wall time (the cores it kept busy), and with ``one_core`` the
    process is pinned to one CPU before JAX starts: the like-for-like peer."""
    if one_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import jax
    import jax.numpy as jnp

    from .harness import median_time

    peer = "jax jit (1 core)" if one_core else "jax jit"
    rows = []
    for name, spec in WORKLOADS.items():
        data = make_data(spec)
        params = [jnp.asarray(a) for wb in data["layers"] for a in wb]
        if "E" in data:
            params = [jnp.asarray(data["E"])] + params
        act = jnp.tanh if spec["act"] == "tanh" else jax.nn.relu
        xs = jnp.asarray(data["idx"] if "E" in data else data["x"])
        y = jnp.asarray(data["y"])
        emb = "E" in data

        def loss_fn(ps, xs, y):
            if emb:
                h = ps[0][xs].reshape(spec["batch"], -1)
                ws = ps[1:]
            else:
                h, ws = xs, ps
            n = len(ws) // 2
            for k in range(n):
                h = h @ ws[2 * k] + ws[2 * k + 1]
                if k < n - 1:
                    h = act(h)
            if spec["loss"] == "mse":
                return ((h - y) ** 2).mean()
            logp = jax.nn.log_softmax(h)
            return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

        lr = spec["lr"]
        if spec["opt"] == "adam":
            @jax.jit
            def step_fn(ps, ms, vs, t, xs, y):
                g = jax.grad(loss_fn)(ps, xs, y)
                ms = [0.9 * m + 0.1 * gi for m, gi in zip(ms, g)]
                vs = [0.999 * v + 0.001 * gi * gi for v, gi in zip(vs, g)]
                ps = [p - lr * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
                      for p, m, v in zip(ps, ms, vs)]
                return ps, ms, vs
            state = {"p": params, "m": [jnp.zeros_like(p) for p in params],
                     "v": [jnp.zeros_like(p) for p in params], "t": 0}

            def step():
                state["t"] += 1
                state["p"], state["m"], state["v"] = step_fn(state["p"], state["m"], state["v"],
                                                             state["t"], xs, y)
                jax.block_until_ready(state["p"])
        else:
            @jax.jit
            def step_fn(ps, xs, y):
                g = jax.grad(loss_fn)(ps, xs, y)
                return [p - lr * gi for p, gi in zip(ps, g)]
            state = {"p": params}

            def step():
                state["p"] = step_fn(state["p"], xs, y)
                jax.block_until_ready(state["p"])
        cpu, wall = time.process_time(), time.perf_counter()
        value = median_time(step, repeat=repeats(name, quick), warmup=3)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        where = ("pinned to one CPU" if one_core else
                 f"XLA's thread pool; about {cpu / wall:.1f} CPUs busy per step")
        rows.append(dict(workload=name, peer=peer, value=value * 1e6,
                         note=f"jax {jax.__version__}, {where}"))
    return rows


def jax_fresh_process_script() -> str:
    """Code for a fresh process that imports JAX, builds W2, jits its step and takes the
    first one, printing the seconds that took and the wall-clock ``end`` as JSON."""
    return f"""
import time; t0 = time.perf_counter()
import json, sys
sys.path.insert(0, {str(__import__('pathlib').Path(__file__).resolve().parents[1])!r})
import jax, jax.numpy as jnp
from benchmarks.compiler_workloads import WORKLOADS, make_data
spec = WORKLOADS["W2"]; data = make_data(spec)
ps = [jnp.asarray(a) for wb in data["layers"] for a in wb]
x, y = jnp.asarray(data["x"]), jnp.asarray(data["y"])
def loss_fn(ps):
    h = x
    for k in range(3):
        h = h @ ps[2 * k] + ps[2 * k + 1]
        if k < 2: h = jnp.tanh(h)
    return ((h - y) ** 2).mean()
step = jax.jit(lambda ps: [p - 0.05 * g for p, g in zip(ps, jax.grad(loss_fn)(ps))])
jax.block_until_ready(step(ps))
t3 = time.perf_counter()
print(json.dumps({{"first_step": t3 - t0, "end": time.time()}}))
"""


def main(argv: list[str]) -> int:
    kind, quick = argv[0], len(argv) > 1 and argv[1] == "quick"
    rows = (torch_rows(quick) if kind == "torch" else
            jax_rows(quick, one_core=kind == "jax1"))
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

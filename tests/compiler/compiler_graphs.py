"""Graph builders shared by the compiler tests: random programs over every primitive,
and the small networks the guide and the benchmarks train."""

from __future__ import annotations

import numpy as np

import tensorcode as tc

TOLERANCE = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-11)}


def random_program(seed: int, dtype: str = "float32", steps: int = 12, parts: int = 1):
    """A random differentiable program: ``parts`` independent chains over parameters
    and inputs, each of ``steps`` random ops (broadcasting, reductions, matmuls,
    gathers, shape ops), summed into one scalar loss. Returns (network, loss, adjoints,
    twins) where ``twins`` are extra non-differentiated roots (comparisons, one_hot...)."""
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    params, values, extras = [], [], []

    def new_value(shape, kind="parameter"):
        data = rng.uniform(-1.5, 1.5, size=shape).astype(dtype)
        if kind == "parameter":
            p = tape.parameter(data, name=f"p{len(params)}")
            params.append(p)
            return p
        return tape.input(data, name=f"x{len(values)}")

    for _part in range(parts):
        n, m = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        pool = [new_value((n, m)), new_value((m,)), new_value((n, m), "input"),
                new_value((n, 1))]
        for _ in range(steps):
            choice = int(rng.integers(0, 17))
            a = pool[int(rng.integers(0, len(pool)))]
            b = pool[int(rng.integers(0, len(pool)))]
            try:
                out = _step(choice, a, b, rng, tape, dtype, extras, params)
            except tc.TensorCodeError:
                continue
            if out is not None:
                pool.append(out)
        # every value of the chain feeds the loss so nothing is dead
        total = None
        for v in pool[4:] or pool:
            term = v.astype(dtype).mean() if v.dtype == dtype else v.astype(dtype).sum()
            total = term if total is None else total + term
        values.append(total)
    loss = values[0]
    for v in values[1:]:
        loss = loss + v
    # a random chain can cut every path to the parameters (an integer cast, a compare):
    # its gradients are then zero, which the programs built here are meant to check too
    adjoints = tape.differentiate(loss, params, allow_disconnected=True)
    network = tape.into_network()
    return network, loss, adjoints, extras


def _step(choice, a, b, rng, tape, dtype, extras, params):
    if choice == 0:
        unary = [a.tanh, a.sin, a.cos, a.sigmoid, a.relu, a.abs, lambda: -a]
        return unary[int(rng.integers(0, 7))]()
    if choice == 1:
        return ((a.abs() + 1.0).log() if rng.integers(0, 2) else (a * a + 0.5).sqrt())
    if choice == 2:
        return (a * 0.5).exp()
    if choice == 3:
        op = int(rng.integers(0, 6))
        return [a + b, a - b, a * b, a / (b.abs() + 1.0), tc.maximum(a, b), tc.minimum(a, b)][op]
    if choice == 4:
        return (a.abs() + 0.5) ** (b * 0.5)
    if choice == 5:
        axis = int(rng.integers(0, max(a.ndim, 1))) if a.ndim else None
        keep = bool(rng.integers(0, 2))
        return [a.sum, a.mean, a.max, a.min][int(rng.integers(0, 4))](axis=axis, keepdims=keep)
    if choice == 6 and a.ndim == 2 and b.ndim >= 1 and a.shape[1] == b.shape[0]:
        return a @ b
    if choice == 6 and a.ndim == 2:
        w = tape.parameter(rng.uniform(-1, 1, (a.shape[1], 3)).astype(dtype),
                           name=f"p{len(params)}")
        params.append(w)
        return a @ w
    if choice == 7 and a.ndim >= 1:
        idx = tape.leaf(rng.integers(0, a.shape[0], size=(3,)).astype(np.int64))
        return a.take(idx, axis=0)
    if choice == 8 and a.ndim == 2:
        return a.T
    if choice == 9:
        return a.reshape(-1) if a.ndim else a.reshape(1)
    if choice == 10 and a.ndim >= 1:
        return a.broadcast_to((2,) + a.shape)
    if choice == 11 and a.ndim >= 1 and a.shape[-1] >= 2:
        return a.slice(1, None, axis=a.ndim - 1)
    if choice == 12 and a.ndim >= 1 and a.shape == b.shape:
        return tc.concat([a, b], axis=0)
    if choice == 13 and a.ndim >= 1:
        return tape.apply("pad", [a], {"axis": 0, "before": 1, "after": 2})
    if choice == 14:
        cond = a > b
        extras.append(cond)
        return tc.where(cond, a, b * 2.0)
    if choice == 15:
        return a.astype("float64" if dtype == "float32" else "float32").astype(dtype) * 1.0 + 0.0
    if choice == 16 and a.ndim >= 1:
        extras.append(tc.one_hot(tape.leaf(np.array([0, 1, 1], np.int64)), 3, dtype))
        return a.softmax(axis=-1) if a.ndim else a.exp()
    return None


def mlp_program(sizes, activation="tanh", batch=8, loss="mse", dtype="float32", seed=0,
                embedding=None):
    """An MLP training program: (network, loss, adjoints, symbols dict)."""
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    syms = {}
    if embedding is not None:
        vocab, dim, context = embedding
        idx = tape.input(rng.integers(0, vocab, size=(batch, context)), name="idx")
        emb = tc.nn.Embedding(tape, vocab, dim, init=tc.init.normal(seed, 1.0), dtype=dtype,
                              name="emb")
        x = emb(idx).reshape(batch, context * dim)
        syms["idx"] = idx
        modules = [emb]
    else:
        x = tape.input(rng.uniform(-1, 1, size=(batch, sizes[0])).astype(dtype), name="x")
        syms["x"] = x
        modules = []
    mlp = tc.nn.Mlp(tape, sizes, activation, init=tc.init.xavier(seed), dtype=dtype, name="mlp")
    modules.append(mlp)
    out = mlp(x)
    if loss == "mse":
        y = tape.input(rng.uniform(-1, 1, size=out.shape).astype(dtype), name="y")
        value = tc.mse(out, y)
    elif loss == "sum":
        y = tape.input(rng.uniform(-1, 1, size=out.shape).astype(dtype), name="y")
        value = ((out - y) * (out - y)).sum()
    else:
        y = tape.input(rng.integers(0, sizes[-1], size=(batch,)), name="y")
        value = tc.cross_entropy(out, y)
    syms["y"] = y
    syms["out"] = out
    wrt = [p for m in modules for p in m.parameters()]
    adjoints = tape.differentiate(value, wrt)
    network = tape.into_network()
    return network, value, adjoints, syms


def assert_close(a, b, dtype, what=""):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                               err_msg=what, **TOLERANCE.get(dtype, TOLERANCE["float64"]))

"""Workloads whose optimized graphs ``test_rewrite_rules.py`` pins: their text form
(``ir.describe``) after ``Entry.optimized`` must stay what it was when the passes were if/elif
chains (``data/optimized_graphs.json``, captured from that code)."""

from __future__ import annotations

import numpy as np
from compiler_graphs import mlp_program, random_program
from test_numba_backend import all_ops_program

import tensorcode as tc


def identities(dtype: str = "float32"):
    """One program that meets every rewrite of ``simplify`` at least once, and a few
    near misses (a constant that is not uniform, a type the rewrite would change)."""
    tape = tc.Tape()
    x = tape.input(np.linspace(-1, 1, 12).astype(dtype).reshape(3, 4), name="x")
    w = tape.parameter(np.linspace(0, 1, 4).astype(dtype), name="w")
    one = tape.leaf(np.ones((3, 4), dtype))
    zero = tape.leaf(np.zeros((3, 4), dtype))
    ones_row = tape.leaf(np.ones(4, dtype))
    mixed = tape.leaf(np.array([1, 2, 1, 1], dtype))
    negated = -x
    terms = [x * one, one * x, x / one, x + zero, zero + x, x - zero, -negated, x.detach(),
             x * 1.0, 1.0 * x, x + 0.0, x - 0.0, x / 1.0, 0.0 + x,
             w * ones_row, x * ones_row, x * mixed, ones_row * x,
             w + tape.leaf(np.zeros((3, 4), dtype)),
             x.reshape(12).reshape(4, 3).reshape(3, 4), x.reshape(3, 4),
             x.reshape(2, 6).reshape(12, 1).T.T.reshape(3, 4),
             x.T.T, x.T.transpose(1, 0).T.T, tape.apply("transpose", [x], {"axes": (0, 1)}),
             w.broadcast_to((3, 4)).broadcast_to((2, 3, 4)).sum(axis=0),
             x.broadcast_to((3, 4)), w.broadcast_to((3, 4)) + x, x * w.broadcast_to((3, 4)),
             tc.maximum(w.broadcast_to((3, 4)), x), (x * 2.0).exp().reshape(4, 3).T]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    loss = (total * total).sum()
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    return network, [loss, *adjoints.roots()[1:]]


def workloads():
    """``name -> (network, roots)``."""
    found = {}
    for dtype in ("float32", "float64"):
        network, loss, adjoints, extras = all_ops_program(dtype)
        found[f"all_ops_{dtype}"] = (network, list(adjoints.roots()) + list(extras))
        found[f"identities_{dtype}"] = identities(dtype)
    for name, kwargs in {
        "mlp_tanh_mse": {"sizes": [4, 8, 3]},
        "mlp_relu_ce": {"sizes": [5, 16, 16, 4], "activation": "relu", "loss": "ce"},
        "mlp_embedding": {"sizes": [12, 8, 5], "loss": "ce", "embedding": (10, 3, 4)},
        "mlp_float64_sum": {"sizes": [3, 6, 2], "loss": "sum", "dtype": "float64"},
    }.items():
        network, value, adjoints, syms = mlp_program(**kwargs)
        found[name] = (network, list(adjoints.roots()) + [syms["out"]])
    for seed in range(8):
        network, loss, adjoints, extras = random_program(seed)
        found[f"random_{seed}"] = (network, list(adjoints.roots()) + list(extras))
    return found


def optimized_text(network, roots) -> str:
    """The optimized graph of ``roots``, as text."""
    from tensorcode.compiler.core.ir import describe

    graph, _ = network.entry(roots).optimized()
    return describe(graph)

"""``record_backward``: a backward program of its own, recorded on a second tape, that
reads what the forward computed instead of computing it again."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import TrainingError
from ..core import registry as primitives
from .autodiff import gradients
from .expr import Expr
from .tape import Recorder


def record_backward(forward: Recorder, loss: Expr, inputs: Sequence[Expr], backward: Recorder
                    ) -> tuple[list[Expr], dict[int, Expr]]:
    """Record on the tape ``backward`` the gradients of the scalar ``loss`` (recorded on
    ``forward``) with respect to every parameter of ``forward`` and each of ``inputs``.

    This splits a training step into a forward program and a backward program that
    reads what the forward computed instead of computing it again. ``backward`` must
    already hold parameters like ``forward``'s (the same module recorded again: same
    shapes, dtypes and order), which stand for them; constants are recorded again;
    elementwise ops and views are recorded again over what they read (recomputing them
    costs less than writing and reading them back, and keeps what is saved to the
    results of contractions, reductions and gathers); every other forward value a rule
    reads becomes an input of ``backward`` named ``saved.<node>``. Returns the
    gradients (parameters in order, then ``inputs``) and, for each forward node the
    gradients read, the input standing for it."""
    nodes = forward.nodes()
    ours, theirs = forward.parameters(), backward.parameters()
    if [p.type for p in ours] != [q.type for q in theirs]:
        raise TrainingError("record_backward: the backward tape's parameters must match "
                            "the forward tape's (record the same module on it first)")
    stand: dict[int, Expr] = {p.index: q for p, q in zip(ours, theirs)}
    saved: dict[int, Expr] = {}

    def expr_of(i: int) -> Expr:
        if i not in stand:
            node = nodes[i]
            if node.op == "leaf":
                stand[i] = backward.leaf(node.value)
            elif primitives.is_elementwise(node.op) or primitives.is_view(node.op):
                stand[i] = backward.apply(node.op, [expr_of(j) for j in node.inputs],
                                          node.attr_dict)
            else:
                stand[i] = saved[i] = backward.input(
                    np.zeros(node.type.shape, node.type.dtype), name=f"saved.{i}")
        return stand[i]

    wrt = [p.index for p in ours] + [x.index for x in inputs]
    with backward.broadcasting("numpy"):  # the rules' broadcasts are their definition
        grads = gradients(nodes, loss.index, wrt, backward, expr_of)
    recorded = backward.nodes()
    reached: set[int] = set()
    stack = [g.index for g in grads]
    while stack:
        i = stack.pop()
        if i not in reached:
            reached.add(i)
            stack.extend(recorded[i].inputs)
    return grads, {i: e for i, e in saved.items() if e.index in reached}


__all__ = ["record_backward"]

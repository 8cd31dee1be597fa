"""Reverse-mode differentiation over the IR, emitting more IR.

``gradients`` walks the nodes backwards from the loss and calls each op's VJP rule on
whatever builder it is given: a ``Tape`` (the gradients become recorded nodes, so a
training step lowers to a forward-only plan) or the ``Eager`` builder (the runtime's
``run.backward``). ``record_backward`` records them on a second tape that reads the
forward values as inputs (a backward program of its own). Only nodes on a path from a
``wrt`` node to the loss get adjoints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ShapeError, TrainingError
from ..core import registry as primitives
from ..core.ir import SOURCE_OPS, Node

if TYPE_CHECKING:  # pragma: no cover
    from .tape import Expr, Tape


def needs_gradient(nodes: Sequence[Node], wrt: set[int], upto: int) -> list[bool]:
    """Which nodes depend on a ``wrt`` node through differentiable ops."""
    needs = [False] * (upto + 1)
    for i in range(upto + 1):
        node = nodes[i]
        if i in wrt:
            needs[i] = True
        elif node.op not in SOURCE_OPS and primitives.REGISTRY[node.op].differentiable:
            needs[i] = any(needs[j] for j in node.inputs)
    return needs


def gradients(nodes: Sequence[Node], loss: int, wrt: Sequence[int], builder: Any,
              expr_of: Callable[[int], Any]) -> list[Any]:
    """The gradient of node ``loss`` with respect to each node in ``wrt``, built with
    ``builder``; ``expr_of(i)`` gives node i's forward value as that builder's Expr."""
    loss_type = nodes[loss].type
    if loss_type.shape != ():
        raise ShapeError(f"differentiate: the loss must be a scalar but is {loss_type}; "
                         "reduce it with .sum() or .mean() first")
    if not loss_type.is_float:
        raise TrainingError(f"differentiate: the loss is {loss_type.dtype}, not a float; "
                            "an integer value has no gradient")
    for p in wrt:
        if not nodes[p].type.is_float:
            raise TrainingError(f"differentiate: %{p} ({nodes[p].type}) is not a float "
                                "tensor and has no gradient")
    needs = needs_gradient(nodes, set(wrt), loss)
    adjoint: dict[int, Any] = {loss: builder.constant(1, loss_type.dtype)}
    for i in range(loss, -1, -1):
        if i not in adjoint or not needs[i]:
            continue
        node = nodes[i]
        if node.op in SOURCE_OPS:
            continue
        wants = [needs[j] for j in node.inputs]
        rule = primitives.REGISTRY[node.op].vjp
        assert rule is not None  # needs[i] implies a differentiable op
        inputs = [expr_of(j) for j in node.inputs]
        grads = rule(adjoint[i], inputs, expr_of(i), node.attr_dict, wants)
        for j, want, g in zip(node.inputs, wants, grads):
            if not want or g is None:
                continue
            adjoint[j] = adjoint[j] + g if j in adjoint else g
    result = []
    for p in wrt:
        if p in adjoint and needs[p]:
            result.append(adjoint[p])
        else:
            t = nodes[p].type
            result.append(builder.constant(0, t.dtype).broadcast_to(t.shape))
    return result


def record_backward(forward: Tape, loss: Expr, inputs: Sequence[Expr], backward: Tape
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

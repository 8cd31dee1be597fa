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
from typing import Any

from ...errors import ShapeError, TrainingError
from ..core import registry as primitives
from ..core.ir import SOURCE_OPS, Node


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
              expr_of: Callable[[int], Any], reached: list[bool] | None = None) -> list[Any]:
    """The gradient of node ``loss`` with respect to each node in ``wrt``, built with
    ``builder``; ``expr_of(i)`` gives node i's forward value as that builder's Expr.
    ``reached``, when given, receives one flag per ``wrt``: whether the loss reaches it
    through ops with gradients (False: its gradient is the explicit zeros, PyTorch's
    ``grad is None``)."""
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
        if reached is not None:
            reached.append(bool(p in adjoint and needs[p]))
        if p in adjoint and needs[p]:
            result.append(adjoint[p])
        else:
            t = nodes[p].type
            result.append(builder.constant(0, t.dtype).broadcast_to(t.shape))
    return result

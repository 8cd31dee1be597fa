"""Lowering a recorded operation (or a training step) to a plan and running it.

The one place operations and the Trainer turn a network into something callable. The
backend is explicit: ``"llvm"`` (the default) or ``"numba"`` compiles a plan,
``"reference"`` runs the NumPy
interpreter through the same ``Plan`` interface. A backend that is not available is an
error, never a silent substitution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..compiler.backends import BACKENDS, DEFAULT_BACKEND, check_backend
from ..compiler.plans.tables import Gradients, Parameters, Table
from ..compiler.trace.expr import Expr
from ..errors import RandomError, TensorCodeError


def resolve_backend(backend: str | None) -> str:
    """``backend``, or ``DEFAULT_BACKEND`` when None (``BackendError`` if unknown)."""
    return check_backend(DEFAULT_BACKEND if backend is None else backend)


def lower(network: Any, roots: Sequence[Expr], backend: str | None, optimizer: Any = None
          ) -> Any:
    """A plan computing ``roots``: ``plan.forward(parameters, feeds) -> run``; with
    ``optimizer``, a step plan (``roots`` a loss and its gradients) that can also apply the
    optimizer's update in the same compiled call (``compiler/plans/step.py``)."""
    backend = resolve_backend(backend)
    if optimizer is not None:
        return network.entry(list(roots)).lower(backend=backend, optimizer=optimizer)
    return network.entry(list(roots)).lower(backend=backend)


def rewrap(table: Table, layout: Any, cls: type[Table] = Parameters) -> Any:
    """The same flat buffers viewed through another layout with identical slots (no
    copy). The trainer and each operation record their parameters in one fixed order,
    so every tape they build has the same slots and offsets."""
    if table.layout is layout:
        return table
    if len(table.layout.slots) != len(layout.slots) or any(
            a.shape != b.shape or a.dtype != b.dtype or a.offset != b.offset
            for a, b in zip(table.layout.slots, layout.slots)):
        raise TensorCodeError("internal: a parameter table does not match the recorded "
                              "layout slot for slot")
    result = cls.from_buffers(layout, table.buffers())
    if isinstance(result, Gradients) and isinstance(table, Gradients):
        result.mark_reached(table.reached)  # which slots the loss reached, kept
    return result


class Executor:
    """A lowered network with fixed input symbols and output roots."""

    def __init__(self, network: Any, inputs: Sequence[Expr], outputs: Sequence[Expr],
                 backend: str | None) -> None:
        self.network = network
        self.inputs = list(inputs)
        # (shape, dtype) per input, as objects: ``dtype.name`` is slow on a call path
        self._types = [(tuple(s.shape), np.dtype(s.dtype)) for s in self.inputs]
        self.outputs = list(outputs)
        self.backend = resolve_backend(backend)
        self.plan = lower(network, self.outputs, self.backend)
        self._last: tuple[Parameters, Parameters] | None = None
        self._bound: Any = None
        position = {id(symbol): k for k, symbol in enumerate(self.inputs)}
        # -1: the plan's random key (tape.random_key()), fed from a generator
        self._order = [position.get(id(symbol), -1) for symbol in self.plan.inputs()]

    def forward(self, parameters: Parameters, arrays: Sequence[np.ndarray],
                generator: Any = None) -> Any:
        last = self._last  # tables are immutable: the same table rewraps the same way
        if last is not None and last[0] is parameters:
            table = last[1]
        else:
            table = rewrap(parameters, self.network.layout)
            self._last = (parameters, table)
        feeds = {s: a for s, a in zip(self.inputs, arrays) if self.plan.reads(s)}
        return self.plan.forward(table, feeds, generator=generator)

    def run(self, parameters: Parameters, arrays: Sequence[np.ndarray],
            generator: Any = None) -> np.ndarray:
        """The first output, through the plan's bound low-overhead call. The arrays must
        have exactly the input types this executor was lowered for (operations key
        their executors by those types); they are checked here, because a bound call
        does not check them. A plan that draws random numbers reads ``generator``
        (``RandomError`` without one) and advances it."""
        if len(arrays) != len(self.inputs):
            raise TensorCodeError(f"expected {len(self.inputs)} inputs, got {len(arrays)}")
        for symbol, array, (shape, dtype) in zip(self.inputs, arrays, self._types):
            if array.shape != shape or array.dtype != dtype:
                raise TensorCodeError(f"internal: input {array.dtype.name}"
                                      f"{list(array.shape)} does not match the lowered "
                                      f"{symbol.type}")
        last = self._bound  # tables are immutable: one binding per table
        if last is not None and last[0] is parameters:
            bound = last[1]
        else:
            bound = self.plan.bind(rewrap(parameters, self.network.layout))
            self._bound = (parameters, bound)
        random = self.plan.takes_randomness
        if random and generator is None:
            raise RandomError("this operation draws random numbers (dropout in training "
                              "mode): set op.generator = tc.random.Generator(seed), or "
                              "call op.eval()")
        outs = bound(*[np.ascontiguousarray(arrays[k]) if k >= 0 else generator.key_state()
                       for k in self._order])
        if random:
            generator.advance(self.plan.random_blocks)
        return outs[0]


__all__ = ["DEFAULT_BACKEND", "BACKENDS", "resolve_backend", "lower", "rewrap", "Executor"]

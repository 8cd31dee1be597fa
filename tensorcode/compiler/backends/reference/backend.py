"""The reference ``Backend``: a ``Program`` run by the NumPy interpreter.

``prepare(program)`` generates nothing: the handle it returns, ``Interpreted``, offers the
entry points a generated module would (``run`` returning one flat output arena per dtype,
``batch()``, ``scalars()``), taking the same arguments in the same order, and evaluates
the program's graph with ``evaluate`` at every call. A plan calls it exactly as it calls
compiled code. It has no fused update: a step plan on it runs the optimizer's own update
after the call (``fuses_updates`` is False). ``update(rule, dtype)`` is that eager update,
the optimizer's IR (``lower/update.py``) interpreted by ``update.evaluate``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....errors import FeedError, TensorCodeError
from ...lower import update as update_rule
from ...lower.program import Program, Refused, Status, check_inputs
from ...lower.update import UpdateRule
from ..calls import PlainCalls
from .interpreter import Prepared, evaluate


class Interpreted(PlainCalls):
    """The entry points of ``program``, interpreted (see the module doc)."""

    key = ""
    fuses_updates = False

    def __init__(self, program: Program) -> None:
        self.program = program
        p = program
        self._arena = {a.dtype: k for k, a in enumerate(p.outputs)}
        self._roots = [(self._arena[r.dtype], r.offset, r.offset + math.prod(r.shape))
                       for r in p.roots]
        self._first_input = len(p.parameters) + len(p.constants)

    @property
    def source(self) -> str:
        raise TensorCodeError("the reference backend generates no source")

    def _check(self, inputs: tuple[np.ndarray, ...], batch: bool) -> None:
        """The compiled entry points' checks (``lower.program.check_inputs``): a
        ``Refused`` for the first input no compiled signature would take."""
        refused = check_inputs(self.program, inputs, 0 if batch else None)
        if refused is not None:
            raise refused

    def run(self, *args: np.ndarray) -> tuple[np.ndarray, ...]:
        """``run(P.., C.., X..)``: the output arenas, one per dtype."""
        self._check(args[self._first_input:], False)
        return self._evaluate(args)

    def _evaluate(self, args: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        p = self.program
        inputs = args[self._first_input:]
        g = p.graph
        buffers = dict(zip((a.dtype for a in p.parameters), args))
        values: dict[int, np.ndarray] = {}
        for i, dtype, offset in p.parameter_nodes:
            t = g.nodes[i].type
            values[i] = buffers[dtype][offset:offset + t.size].reshape(t.shape)
        for i, value in zip(p.input_nodes, inputs):
            values[i] = value
        try:
            evaluate(g, values, g.outputs)
        except FeedError as error:  # the registry's check of an index take, scatter or
            raise Refused(Status.RANGE, -1, str(error)) from None  # one_hot reads
        outs = [np.empty(a.size, a.dtype) for a in p.outputs]
        for r, (k, start, stop) in zip(g.outputs, self._roots):
            outs[k][start:stop] = np.asarray(values[r]).reshape(-1)
        return tuple(outs)

    def batch(self) -> Callable[..., tuple[np.ndarray, ...]]:
        """``run_batch``: N cases, each input with a leading axis of N or 1."""
        return self._batch

    def _batch(self, *args: np.ndarray) -> tuple[np.ndarray, ...]:
        head, inputs = args[:self._first_input], args[self._first_input:]
        self._check(inputs, True)
        n = max((x.shape[0] for x in inputs if x.shape[0] != 1), default=1)
        outs = [np.empty((n, a.size), a.dtype) for a in self.program.outputs]
        for c in range(n):
            case = tuple(np.asarray(x[c if x.shape[0] != 1 else 0]) for x in inputs)
            for k, out in enumerate(self._evaluate(head + case)):
                outs[k][c] = out
        return tuple(outs)

    def scalars(self) -> Callable[..., tuple[Any, ...]]:
        """``run_scalars``: the roots as numbers (only when every root is a scalar)."""
        if self.program.run_scalars is None:
            raise TypeError("only a plan whose every root is a scalar has run_scalars")
        roots = self._roots

        def numbers(*args: np.ndarray) -> tuple[Any, ...]:
            outs = self.run(*args)
            return tuple(outs[k][start].item() for k, start, _ in roots)
        return numbers

    def step(self) -> Any:
        raise TypeError("the reference backend fuses no update: the step plan applies the "
                        "optimizer's own")

    steps = step


class ReferenceBackend:
    """The ``Backend`` of the NumPy interpreter: nothing to generate or compile."""

    name = "reference"
    approximates = False
    evaluate = staticmethod(evaluate)
    prepared = Prepared

    def prepare(self, program: Program, approximate: bool) -> Interpreted:
        """The interpreted entry points of ``program``."""
        return Interpreted(program)

    def update(self, rule: UpdateRule, dtype: str) -> Callable[..., None]:
        """An optimizer's eager update for ``dtype``, interpreted: the calling convention
        of ``numba.update.eager`` (``P, G, U, S.., K, PS, N, GS, steps, present, lr``),
        computed by ``update.evaluate`` over the listed slots' elements."""
        count = len(rule.state_keys)

        def run(P: np.ndarray, G: np.ndarray, U: np.ndarray, *rest: Any) -> None:
            states = rest[:count]
            K, PS, N, GS, steps, present, lr = rest[count:]
            if K.shape[0] == 0:
                return
            elements = _spans(PS, N)
            new = update_rule.evaluate(
                rule, dtype, P[elements], G[_spans(GS, N)], [s[elements] for s in states],
                float(lr), N, steps[K] + 1.0, (present[K] == 0).astype(np.float64))
            U[elements] = new[0]
            for buffer, value in zip(states, new[1:]):
                buffer[elements] = value
            steps[K] += 1.0
            if rule.keeps_state:
                present[K] = 1
        return run


def _spans(starts: np.ndarray, sizes: np.ndarray) -> Any:
    """The element indices of the slots ``starts``/``sizes`` (a slice when they lie end
    to end, as they do unless a slot is skipped)."""
    if starts.shape[0] == 1 or bool(np.all(starts[1:] == starts[:-1] + sizes[:-1])):
        return slice(int(starts[0]), int(starts[-1] + sizes[-1]))
    return np.concatenate([np.arange(a, a + n) for a, n in zip(starts, sizes)])


BACKEND = ReferenceBackend()

__all__ = ["Interpreted", "ReferenceBackend", "BACKEND"]

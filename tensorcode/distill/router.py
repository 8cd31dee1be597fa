"""Serving with a fallback: the program answers what it claims, the fallback the rest.

A ``Router`` is shared by every thread of a server: the counters and the escalation log
are guarded by one lock, and the program and the fallback run outside it, so concurrent
calls proceed in parallel and every escalated case is recorded exactly once.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import TensorCodeError
from .cases import COVERED

Program = Callable[[Mapping[str, Any]], Mapping[str, Any]]
Fallback = Callable[[Mapping[str, Any]], Mapping[str, Any]]


class Router:
    """``router(inputs)``: the program's answer when it claims the input, otherwise the
    fallback's, with ``answer["escalated"]`` saying which path answered.

    ``program`` returns a dict holding ``outputs`` and ``covered``; it abstains when
    ``covered`` is 0 and fails when it raises or produces a non-finite value: both go to
    the fallback and are recorded. ``record`` turns inputs into the stored copy of the
    case (by default a shallow dict copy). A fallback that raises propagates its error;
    the call is then neither counted nor recorded. ``validate``, when given, checks the
    inputs first and returns the case the program sees; what it refuses raises to the
    caller and is neither counted nor recorded (a bad request is not an escalation).
    """

    def __init__(self, program: Program, fallback: Fallback, outputs: Sequence[str],
                 record: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
                 validate: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
                 ) -> None:
        if not callable(fallback):
            raise TensorCodeError(f"the fallback must be callable from inputs to an answer "
                                  f"dict, got {type(fallback).__name__}")
        self._program = program
        self._fallback = fallback
        self.outputs = tuple(outputs)
        self._record = record or (lambda inputs: dict(inputs))
        self._validate = validate
        self._lock = threading.Lock()
        self._calls = 0
        self._escalated: list[tuple[dict[str, Any], dict[str, Any], str]] = []

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if self._validate is not None:
            inputs = self._validate(inputs)
        decision = decide(self._program, self.outputs, inputs)
        if decision[1] is None:  # claimed: the program's answer
            answer = decision[0]
            answer["escalated"] = False
            with self._lock:
                self._calls += 1
            return answer
        reason = decision[1]
        fallback_answer = self._fallback(inputs)
        if not isinstance(fallback_answer, Mapping):
            raise TensorCodeError(f"the fallback returned {type(fallback_answer).__name__}; it "
                                  "must return a dict of the program's outputs")
        stored = dict(fallback_answer)
        case = self._record(inputs)
        with self._lock:
            self._calls += 1
            self._escalated.append((case, stored, reason))
        answer = dict(stored)
        answer["escalated"] = True
        return answer

    @property
    def calls(self) -> int:
        """Calls answered so far, by the program or the fallback."""
        with self._lock:
            return self._calls

    @property
    def escalations(self) -> int:
        """Calls the fallback answered so far."""
        with self._lock:
            return len(self._escalated)

    def rate(self) -> float:
        """The share of answered calls that went to the fallback (0.0 before any call)."""
        with self._lock:
            return len(self._escalated) / self._calls if self._calls else 0.0

    def cases(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(cases, targets)``: every escalated input with the fallback's answer, in the
        order they were recorded, ready for ``repair``."""
        with self._lock:
            log = list(self._escalated)
        return [dict(c) for c, _, _ in log], [dict(t) for _, t, _ in log]

    def reasons(self) -> list[str]:
        """Why each recorded case escalated: ``abstained`` or ``error: ...``."""
        with self._lock:
            return [r for _, _, r in self._escalated]


def decide(program: Program, outputs: Sequence[str], inputs: Mapping[str, Any]
           ) -> tuple[dict[str, Any], None] | tuple[None, str]:
    """``(answer, None)`` when the program claims ``inputs`` with finite outputs, else
    ``(None, reason)``: ``abstained`` or ``error: ...``."""
    try:
        produced = program(inputs)
        covered = _scalar(produced.get(COVERED, 1.0))
        if not math.isfinite(covered):
            return None, "error: 'covered' is not finite"
        if covered == 0.0:
            return None, "abstained"
        answer = {name: produced[name] for name in outputs}
    except Exception as error:  # a failing program escalates; the fallback answers
        return None, f"error: {type(error).__name__}: {error}"
    for value in answer.values():
        if not _finite(value):
            return None, "error: a non-finite output while covered"
    return answer, None


def _finite(value: Any) -> bool:
    if isinstance(value, float) or getattr(value, "ndim", None) == 0:
        return math.isfinite(value)
    return bool(np.isfinite(np.asarray(value, dtype=np.float64)).all())


def _scalar(value: Any) -> float:
    if isinstance(value, float) or getattr(value, "ndim", None) == 0:
        return float(value)
    array = np.asarray(value, dtype=np.float64)
    if array.size != 1:
        return math.nan
    return float(array.reshape(()))

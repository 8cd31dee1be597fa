"""Serving with a fallback: the program answers what it claims, the fallback the rest.

A ``Router`` is shared by every thread of a server: the counters and the escalation log
are guarded by one lock, and the program and the fallback run outside it, so concurrent
calls proceed in parallel and every escalated case is recorded exactly once.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import FeedError, TensorCodeError
from .cases import COVERED, claims
from .inputs import InputError, check_case, check_values

Program = Callable[[Mapping[str, Any]], Mapping[str, Any]]
Fallback = Callable[[Mapping[str, Any]], Mapping[str, Any]]


class Router:
    """``router(inputs)``: the program's answer when it claims the input, otherwise the
    fallback's, with ``answer["escalated"]`` saying which path answered.

    ``program`` returns a dict holding ``outputs`` and ``covered``; it claims the input
    when ``covered`` is above 0.5 (``cases.claims``) and fails when it raises or produces
    a non-finite value: both go to the fallback and are recorded. ``record`` turns inputs
    into the stored copy of the case (by default a shallow dict copy).

    Every request is validated before anything runs, by ``distill.inputs``: ``validate``
    when given, else the program's own ``check_inputs`` (a ``Distillation``), else its
    ``inputs`` contract (an ``Algorithm``: the case is converted once to read-only float64
    arrays, the compiled fast path), else the contract-free rules (a mapping of names to
    finite numbers, lists of numbers or numeric arrays). A refused request raises
    ``InputError`` (a ``FeedError``) to the caller, runs neither the program nor the
    fallback and is counted in ``refused``, never in ``calls``, ``rate()`` or ``cases()``;
    so is a request the program itself refuses with a ``FeedError``.

    The fallback's answer must be a mapping of exactly the program's outputs, each a
    finite number or numeric array (of the output's shape when the program declares
    one); anything else raises ``TensorCodeError`` and is neither counted nor recorded,
    as is a fallback that raises.
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
        self._validate = validate or _validator_of(program)
        self._check_answer = _answer_checker(program, self.outputs)
        self._lock = threading.Lock()
        self._calls = 0
        self._refused = 0
        self._escalated: list[tuple[dict[str, Any], dict[str, Any], str]] = []

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        try:
            inputs = self._validate(inputs)
        except FeedError:
            self._count_refusal()
            raise
        try:
            decision = decide(self._program, self.outputs, inputs, refuse=FeedError)
        except FeedError:  # the program refused the request itself: not an escalation
            self._count_refusal()
            raise
        if decision[1] is None:  # claimed: the program's answer
            answer = decision[0]
            answer["escalated"] = False
            with self._lock:
                self._calls += 1
            return answer
        reason = decision[1]
        stored = self._check_answer(self._fallback(inputs))
        case = self._record(inputs)
        with self._lock:
            self._calls += 1
            self._escalated.append((case, stored, reason))
        answer = dict(stored)
        answer["escalated"] = True
        return answer

    def _count_refusal(self) -> None:
        with self._lock:
            self._refused += 1

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

    @property
    def refused(self) -> int:
        """Requests refused as malformed so far (never answered, never escalations)."""
        with self._lock:
            return self._refused

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


def _validator_of(program: Any) -> Callable[[Any], Mapping[str, Any]]:
    """The request check for ``program``: its ``check_inputs``, its ``inputs`` contract,
    or the contract-free rules (see ``Router``)."""
    own = getattr(program, "check_inputs", None)
    if callable(own):
        return own
    contract = _contract(getattr(program, "inputs", None))
    if contract is not None:
        return functools.partial(check_case, contract=contract)
    return check_values


def _answer_checker(program: Any, outputs: tuple[str, ...]
                    ) -> Callable[[Any], dict[str, Any]]:
    """Checks a fallback answer: exactly ``outputs``, numeric and finite, of the
    program's declared output shapes when it declares them."""
    contract = _contract(getattr(program, "outputs", None))
    shapes = None if contract is None else {name: contract[name] for name in outputs
                                            if name in contract}

    def check(answer: Any) -> dict[str, Any]:
        if not isinstance(answer, Mapping):
            raise TensorCodeError(f"the fallback returned {type(answer).__name__}; it must "
                                  f"return a dict of the program's outputs {list(outputs)}")
        try:
            if shapes is not None and len(shapes) == len(outputs):
                check_case(answer, shapes, "fallback answer: ")
            else:
                check_values(answer, outputs, "fallback answer: ")
        except InputError as error:
            raise TensorCodeError(f"{error}; the fallback must return exactly the program's "
                                  f"outputs {list(outputs)} as finite numbers") from None
        return dict(answer)
    return check


def _contract(value: Any) -> dict[str, tuple[int, ...]] | None:
    """``value`` when it is a contract (names to shape tuples), else ``None``."""
    if not isinstance(value, Mapping) or not value:
        return None
    if all(isinstance(k, str) and isinstance(s, tuple) and all(type(d) is int for d in s)
           for k, s in value.items()):
        return dict(value)
    return None


def decide(program: Program, outputs: Sequence[str], inputs: Mapping[str, Any],
           refuse: type[BaseException] | tuple[type[BaseException], ...] = ()
           ) -> tuple[dict[str, Any], None] | tuple[None, str]:
    """``(answer, None)`` when the program claims ``inputs`` with finite outputs, else
    ``(None, reason)``: ``abstained`` or ``error: ...``. An exception of a ``refuse``
    type propagates instead (a malformed request, which is not an escalation)."""
    try:
        produced = program(inputs)
        covered = _scalar(produced.get(COVERED, 1.0))
        if not math.isfinite(covered):
            return None, "error: 'covered' is not finite"
        if not claims(covered):
            return None, "abstained"
        answer = {name: produced[name] for name in outputs}
    except refuse:
        raise
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

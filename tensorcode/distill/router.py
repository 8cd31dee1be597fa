"""Serving with a fallback: the program answers what it claims, the fallback the rest.

A ``Router`` is shared by every thread of a server: the counters and the escalation
buffer are guarded by one lock, and the program and the fallback run outside it, so
concurrent calls proceed in parallel and every escalated case is counted exactly once.

Every answer names the path that produced it (``PATHS``): the program, the fallback
after the program abstained, the fallback after it failed at run time; a refused input
is the fourth path, counted but never answered. The same names label the HTTP service's
metrics and its answers.

A covered call over a compiled ``Algorithm`` (or a ``Distillation``) takes a fast path
built once per router: the case is checked against the input contract without copying
(the caller's float64 arrays or flat lists of numbers, every value finite), the compiled
plan is called without re-checking, and the answer is read out; anything the fast path
does not recognise goes through the full validator, which says what is wrong.
"""

from __future__ import annotations

import math
import operator
import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import FeedError, TensorCodeError
from .cases import CLAIM_THRESHOLD, COVERED, claims
from .inputs import InputError, check_case, check_values

Program = Callable[[Mapping[str, Any]], Mapping[str, Any]]
Fallback = Callable[[Mapping[str, Any]], Mapping[str, Any]]

#: the paths a request can take, in the answer's ``path`` and the metrics' ``path`` label
PROGRAM = "program"
FALLBACK_ABSTAINED = "fallback_abstained"
FALLBACK_ERROR = "fallback_error"
REFUSED = "refused"
PATHS = (PROGRAM, FALLBACK_ABSTAINED, FALLBACK_ERROR, REFUSED)

#: escalated cases a router keeps for ``cases()`` unless told otherwise
DEFAULT_MAX_RECORDED = 10_000

_FLOAT64 = np.dtype(np.float64)
_NUMBER_TYPES = frozenset({int, float})
_INF = math.inf


def path_of(reason: str | None) -> str:
    """The path of an answer from its escalation reason (``None``: the program's)."""
    if reason is None:
        return PROGRAM
    return FALLBACK_ABSTAINED if reason == "abstained" else FALLBACK_ERROR


class _ThreadCells(threading.local):
    """One counting cell per thread: only its own thread writes a cell, so counting a
    covered call needs no lock (a lock costs a fifth of the compiled call)."""

    def __init__(self, adopt: Callable[[list[int]], None]) -> None:
        self.cell = [0]
        adopt(self.cell)


class Router:
    """``router(inputs)``: the program's answer when it claims the input, otherwise the
    fallback's; ``answer["escalated"]`` is ``True`` when the fallback answered and
    ``answer["path"]`` names the path (``program``, ``fallback_abstained``,
    ``fallback_error``).

    ``program`` returns a dict holding ``outputs`` and ``covered``; it claims the input
    when ``covered`` is above 0.5 (``cases.claims``) and fails when it raises or produces
    a non-finite value: both go to the fallback and are recorded. ``record`` turns inputs
    into the stored copy of the case (by default a shallow dict copy).

    Escalated cases are kept in a bounded buffer of the last ``max_recorded`` (default
    10,000; 0 keeps none): ``cases()`` and ``reasons()`` read it, ``dropped`` counts the
    cases pushed out of it (oldest first), ``escalations`` counts them all.

    Every request is validated before anything runs, by ``distill.inputs``: ``validate``
    when given, else the program's own ``check_inputs`` (a ``Distillation``), else its
    ``inputs`` contract (an ``Algorithm``: the case is converted once to read-only float64
    arrays, the compiled fast path), else the contract-free rules (a mapping of names to
    finite numbers, lists of numbers or numeric arrays). A refused request raises
    ``InputError`` (a ``FeedError``) to the caller, runs neither the program nor the
    fallback and is counted in ``refused`` (the ``refused`` path), never in ``calls``,
    ``rate()`` or ``cases()``; so is a request the program itself refuses with a
    ``FeedError``.

    The fallback's answer must be a mapping of exactly the program's outputs, each a
    finite number or numeric array (of the output's shape when the program declares
    one); anything else raises ``TensorCodeError`` and is neither counted nor recorded,
    as is a fallback that raises.
    """

    def __init__(self, program: Program, fallback: Fallback, outputs: Sequence[str],
                 record: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
                 validate: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                 *, max_recorded: int = DEFAULT_MAX_RECORDED) -> None:
        if not callable(fallback):
            raise TensorCodeError(f"the fallback must be callable from inputs to an answer "
                                  f"dict, got {type(fallback).__name__}")
        if type(max_recorded) is not int or max_recorded < 0:
            raise TensorCodeError(f"max_recorded must be a non-negative integer (the escalated "
                                  f"cases kept for cases()), got {max_recorded!r}")
        self._program = program
        self._fallback = fallback
        self.outputs = tuple(outputs)
        self.max_recorded = max_recorded
        self._record = record or (lambda inputs: dict(inputs))
        self._validate = validate or _validator_of(program)
        self._check_answer = _answer_checker(program, self.outputs)
        self._lock = threading.Lock()
        self._paths = dict.fromkeys(PATHS, 0)
        self._recorded: deque[tuple[dict[str, Any], dict[str, Any], str]] = deque(
            maxlen=max_recorded)
        self._dropped = 0
        self._cells: list[tuple[weakref.ref[threading.Thread], list[int]]] = []
        self._retired = 0  # covered calls counted by threads that have ended
        self._program_calls = _ThreadCells(self._adopt)
        fast = None if validate is not None else _fast_path(
            program, self.outputs, self._program_calls, self._answer,
            lambda inputs, reason: self._escalate(self._validate(inputs), reason))
        self._entry: Callable[[Any], dict[str, Any]] = fast or self._answer

    if TYPE_CHECKING:
        def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]: ...
    else:
        #: ``router(inputs)`` runs ``_entry``: the program's fast path when it has one,
        #: else ``_answer``. A property with a C getter hands it over without the Python
        #: frame a ``__call__`` method would add, a tenth of a small compiled call.
        __call__ = property(operator.attrgetter("_entry"))

    def _answer(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The full path: validate, decide, escalate (what the fast path falls back to)."""
        try:
            inputs = self._validate(inputs)
        except FeedError:
            self._count(REFUSED)
            raise
        try:
            decision = decide(self._program, self.outputs, inputs, refuse=FeedError)
        except FeedError:  # the program refused the request itself: not an escalation
            self._count(REFUSED)
            raise
        if decision[1] is None:  # claimed: the program's answer
            answer = decision[0]
            answer["escalated"] = False
            answer["path"] = PROGRAM
            self._program_calls.cell[0] += 1
            return answer
        return self._escalate(inputs, decision[1])

    def _escalate(self, inputs: Mapping[str, Any], reason: str) -> dict[str, Any]:
        stored = self._check_answer(self._fallback(inputs))
        path = path_of(reason)
        case = self._record(inputs) if self.max_recorded else {}
        with self._lock:
            self._paths[path] += 1
            if self.max_recorded:
                if len(self._recorded) == self.max_recorded:
                    self._dropped += 1
                self._recorded.append((case, stored, reason))
            else:
                self._dropped += 1
        answer = dict(stored)
        answer["escalated"] = True
        answer["path"] = path
        return answer

    def _count(self, path: str) -> None:
        with self._lock:
            self._paths[path] += 1

    def _adopt(self, cell: list[int]) -> None:
        """Register a new thread's cell; fold the cells of ended threads into
        ``_retired`` so a server that starts a thread per request keeps few cells."""
        with self._lock:
            live = []
            for thread, old in self._cells:
                owner = thread()
                if owner is None or not owner.is_alive():
                    self._retired += old[0]
                else:
                    live.append((thread, old))
            live.append((weakref.ref(threading.current_thread()), cell))
            self._cells = live

    def _counts(self) -> dict[str, int]:
        """Every path's count (call with the lock held)."""
        counts = dict(self._paths)
        counts[PROGRAM] = self._retired + sum(cell[0] for _, cell in self._cells)
        return counts

    @property
    def calls(self) -> int:
        """Calls answered so far, by the program or the fallback."""
        with self._lock:
            counts = self._counts()
        return sum(counts.values()) - counts[REFUSED]

    @property
    def escalations(self) -> int:
        """Calls the fallback answered so far (recorded or dropped)."""
        with self._lock:
            return self._paths[FALLBACK_ABSTAINED] + self._paths[FALLBACK_ERROR]

    @property
    def refused(self) -> int:
        """Requests refused as malformed so far (never answered, never escalations)."""
        with self._lock:
            return self._paths[REFUSED]

    @property
    def dropped(self) -> int:
        """Escalated cases no longer in the buffer (pushed out by newer ones, or never
        kept with ``max_recorded=0``)."""
        with self._lock:
            return self._dropped

    def paths(self) -> dict[str, int]:
        """How many requests took each path: ``{"program", "fallback_abstained",
        "fallback_error", "refused"}`` (the metrics of an in-process router)."""
        with self._lock:
            return self._counts()

    def rate(self) -> float:
        """The share of answered calls that went to the fallback (0.0 before any call)."""
        with self._lock:
            paths = self._counts()
            escalated = paths[FALLBACK_ABSTAINED] + paths[FALLBACK_ERROR]
            answered = escalated + paths[PROGRAM]
            return escalated / answered if answered else 0.0

    def cases(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """``(cases, targets)``: the buffered escalated inputs with the fallback's
        answers, oldest first, ready for ``repair``."""
        with self._lock:
            log = list(self._recorded)
        return [dict(c) for c, _, _ in log], [dict(t) for _, t, _ in log]

    def reasons(self) -> list[str]:
        """Why each buffered case escalated: ``abstained`` or ``error: ...``."""
        with self._lock:
            return [r for _, _, r in self._recorded]


def _validator_of(program: Any) -> Callable[[Any], Mapping[str, Any]]:
    """The request check for ``program``: its ``check_inputs``, its ``inputs`` contract,
    or the contract-free rules (see ``Router``)."""
    own = getattr(program, "check_inputs", None)
    if callable(own):
        return own
    contract = _contract(getattr(program, "inputs", None))
    if contract is not None:
        return lambda case: check_case(case, contract)
    return check_values


def _fast_path(program: Any, outputs: tuple[str, ...], counter: _ThreadCells,
               full: Callable[[Any], dict[str, Any]],
               escalate: Callable[[Any, str], dict[str, Any]]
               ) -> Callable[[Any], dict[str, Any]] | None:
    """The router's call for a program with a compiled unchecked call and an input
    contract (``Algorithm.validated_call``, also reached through a ``Distillation``), or
    ``None``. It answers a covered case itself (counting it in ``counter``), hands an
    escalation to ``escalate(inputs, reason)`` and anything it does not recognise to
    ``full``, the router's full path, which validates (and refuses or converts) and runs
    the program: the fast path accepts only what that validator accepts, unchanged."""
    algorithm = getattr(program, "algorithm", program)
    unchecked = getattr(algorithm, "validated_call", None)
    call = unchecked() if callable(unchecked) else None
    contract = _contract(getattr(algorithm, "inputs", None))
    declared = _contract(getattr(algorithm, "outputs", None))
    if (call is None or contract is None or declared is None
            or _contract(getattr(program, "inputs", None)) != contract
            or not set(outputs) <= set(declared)):
        return None
    scalar_outputs = all(declared[name] == () for name in outputs)
    has_covered = COVERED in declared and declared[COVERED] == ()
    specs = tuple((name, shape, shape[0] if len(shape) == 1 else -1)
                  for name, shape in contract.items())
    count = len(specs)
    only = outputs[0] if len(outputs) == 1 and scalar_outputs else None
    threshold = CLAIM_THRESHOLD
    isfinite, fsum = math.isfinite, math.fsum
    ndarray, float64, numbers = np.ndarray, _FLOAT64, _NUMBER_TYPES

    def feed(value: Any, shape: tuple[int, ...], length: int) -> np.ndarray | None:
        """``value`` as a plan feed when it passes the contract's rules, else ``None``
        (a NaN sums to NaN, an infinity to an infinity or NaN)."""
        kind = type(value)
        if kind is ndarray:
            if (value.dtype is not float64 or value.shape != shape
                    or not value.flags.c_contiguous):
                return None
            flat = value.tolist() if length >= 0 else value.ravel().tolist()
        elif kind is list and length >= 0:
            if len(value) != length or not numbers.issuperset(map(type, value)):
                return None
            flat, value = value, np.array(value, dtype=float64)
        elif (kind is float or kind is int) and shape == ():
            flat, value = [value], np.array(value, dtype=float64)
        else:
            return None
        return value if isfinite(fsum(flat)) else None

    def answer_of(produced: Mapping[str, Any]) -> dict[str, Any] | str:
        """The program's answer, or the escalation reason."""
        if has_covered:
            covered = produced[COVERED]
            if not threshold < covered < _INF:
                return "abstained" if isfinite(covered) else "error: 'covered' is not finite"
        answer = {name: produced[name] for name in outputs}
        if not all(isfinite(value) if scalar_outputs else _finite(value)
                   for value in answer.values()):
            return "error: a non-finite output while covered"
        answer["escalated"] = False
        answer["path"] = PROGRAM
        return answer

    def fast(inputs: Any) -> dict[str, Any]:
        if type(inputs) is not dict or len(inputs) != count:
            return full(inputs)
        feeds = {}
        try:
            for name, shape, length in specs:
                value = feed(inputs.get(name), shape, length)
                if value is None:
                    return full(inputs)
                feeds[name] = value
        except (OverflowError, ValueError, TypeError):  # fsum's overflow, a huge int
            return full(inputs)
        try:
            produced = call(feeds)
        except FeedError:  # refused by the program: the full path says why
            return full(inputs)
        except Exception as error:  # a failing program escalates
            return escalate(inputs, f"error: {type(error).__name__}: {error}")
        outcome = answer_of(produced)
        if isinstance(outcome, str):
            return escalate(inputs, outcome)
        counter.cell[0] += 1
        return outcome

    scalars = getattr(algorithm, "validated_scalars", None)
    direct = scalars() if callable(scalars) and count == 1 and only is not None else None
    if direct is None or specs[0][2] < 0:
        return fast
    run, produced_names = direct
    at_output = produced_names.index(only)
    at_covered = produced_names.index(COVERED) if has_covered else -1
    (name, shape, length), = specs
    scalar = np.float64
    output: str = outputs[0]

    def fast_one(inputs: Any) -> dict[str, Any]:
        """``fast`` unrolled for the common router: one flat input (a float64 array or a
        list of numbers) and scalar outputs read as Python floats from the plan; every
        step of ``fast`` costs a visible share of the compiled call."""
        value: Any = inputs.get(name) if type(inputs) is dict else None
        kind = type(value)
        if (kind is ndarray and len(inputs) == 1 and value.dtype is float64
                and value.shape == shape and value.flags.c_contiguous):
            flat = value.tolist()
        elif (kind is list and len(inputs) == 1 and len(value) == length
              and numbers.issuperset(map(type, value))):
            flat = value
        else:
            return fast(inputs)
        try:
            finite = isfinite(fsum(flat))  # NaN, an infinity, or a number past float64
        except (OverflowError, ValueError):
            finite = False
        if not finite:
            return full(inputs)
        try:
            produced = run(value if flat is not value else np.array(value, dtype=float64))
        except FeedError:
            return full(inputs)
        except Exception as error:  # a failing program escalates
            return escalate(inputs, f"error: {type(error).__name__}: {error}")
        if at_covered >= 0:
            covered = produced[at_covered]
            if not threshold < covered < _INF:
                return escalate(inputs, "abstained" if isfinite(covered)
                                else "error: 'covered' is not finite")
        result = produced[at_output]
        if not isfinite(result):
            return escalate(inputs, "error: a non-finite output while covered")
        counter.cell[0] += 1
        return {output: scalar(result), "escalated": False, "path": PROGRAM}

    return fast_one


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

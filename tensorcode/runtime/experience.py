"""Tracing: which operation produced which value, supervised explicitly, saved portably.

``trace()`` opens a session. ``session.run(fn)`` captures every operation call made
inside ``fn`` (also across ``await``: the active session lives in a ``ContextVar``, so
each task sees its own). A call's inputs are either *references* to an earlier call's
output, recognized by identity (never by value: equal outputs of independent calls stay
distinct), or *external roots*: values that reached the call through plain Python, which
are snapshotted and are never gradient paths. Captured outputs are frozen (backed by
immutable memory), so an in-place write to one fails at once.

Supervision is explicit: ``session.supervise(output, target, loss=..., source=...)``
stores a snapshot of the target with a required provenance string; nothing is inferred
from predictions. ``session.save`` writes a versioned JSON experience atomically;
``load_experience`` validates all of it (format, version, bindings, fingerprints, DAG
references, codec tags) before it builds anything, and binds the calls to operations the
caller already constructed: a file never names a class to construct or code to run.
"""

from __future__ import annotations

import contextvars
import hashlib
import inspect
import json
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArtifactError, TensorCodeError
from ..files import atomic_write_bytes, read_json
from ..files.strict_json import JsonLimits
from . import experience_codecs as codecs_module
from .experience_schema import FORMAT, MAX_FILE_BYTES, VERSION, validate_document

BOUNDARIES = ("error", "recorded")

_CURRENT: contextvars.ContextVar[Trace | None] = contextvars.ContextVar(
    "tensorcode_trace", default=None)


def current_trace() -> Trace | None:
    """The session capturing operation calls in this context, if any."""
    return _CURRENT.get()


def trace() -> Trace:
    """Open a tracing session; capture with ``session.run(fn)``."""
    return Trace()


# -- references -----------------------------------------------------------------------------

# ``InputRef`` and ``OutputRef`` are the reference types for explicit dependencies (the
# training guide's "Capture and supervision"; both are exported from ``tensorcode``).

@dataclass(frozen=True)
class OutputRef:
    """The output of call ``call`` of the trace ``trace_id``."""

    trace_id: str
    call: int


@dataclass(frozen=True, eq=False)
class InputRef:
    """An external root: an input that reached call ``call`` (argument ``position``)
    through plain Python, a snapshotted constant and never a gradient path."""

    call: int
    position: int
    value: Any

    @property
    def key(self) -> tuple[int, int]:
        return (self.call, self.position)


#: the name the tracing code grew up with; ``InputRef`` is the guide's
ExternalRoot = InputRef


@dataclass(frozen=True, eq=False)
class Call:
    """One captured operation call: its operation, its inputs (``OutputRef`` or
    ``InputRef`` per argument) and its frozen result ``value``.

    ``output`` is the handle the guide names outputs by: the result itself when identity
    can tell it apart (arrays, containers), and for a scalar, string or ``None`` result,
    which Python shares between equal values, this call's ``OutputRef``. Either is
    accepted wherever a trace takes an output (``ref``, ``example``, ``supervise``,
    ``replay``)."""

    index: int
    operation: Any
    inputs: tuple
    value: Any
    trace_id: str

    @property
    def output(self) -> Any:
        if _tracked(self.value):
            return self.value
        return OutputRef(self.trace_id, self.index)


@dataclass(frozen=True)
class Supervision:
    """Explicit feedback on one output: a snapshotted target, a loss name, a source."""

    ref: OutputRef
    target: Any
    loss: str
    source: str


@dataclass(frozen=True)
class Example:
    """The dependency closure of one output: the calls it needs (ascending) and the
    external roots those calls read."""

    target: OutputRef
    calls: tuple[int, ...]
    roots: tuple[InputRef, ...]


# -- freezing and stamps --------------------------------------------------------------------

def freeze(array: np.ndarray) -> np.ndarray:
    """A copy backed by immutable bytes: its WRITEABLE flag can never be set again."""
    array = np.ascontiguousarray(array)
    if array.size == 0:
        frozen = np.empty(array.shape, array.dtype)
        frozen.flags.writeable = False
        return frozen
    return np.frombuffer(array.tobytes(), dtype=array.dtype).reshape(array.shape)


def snapshot(value: Any) -> Any:
    """A copy of ``value`` the caller can no longer change (arrays frozen, containers
    copied); other objects are kept as they are (records are expected to be frozen)."""
    if isinstance(value, np.ndarray):
        return freeze(value)
    if isinstance(value, list):
        return [snapshot(v) for v in value]
    if isinstance(value, tuple):
        return tuple(snapshot(v) for v in value)
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def stamp(value: Any) -> str:
    """A structural digest: changes when an array's bytes or a container's structure do."""
    digest = hashlib.blake2b(digest_size=16)

    def visit(v: Any) -> None:
        if isinstance(v, np.ndarray):
            digest.update(f"a{v.dtype.str}{v.shape}".encode())
            digest.update(np.ascontiguousarray(v).tobytes())
        elif isinstance(v, (list, tuple)):
            digest.update(f"{type(v).__name__}{len(v)}[".encode())
            for item in v:
                visit(item)
            digest.update(b"]")
        elif isinstance(v, dict):
            digest.update(f"d{len(v)}{{".encode())
            for k, item in v.items():
                digest.update(repr(k).encode())
                visit(item)
            digest.update(b"}")
        elif isinstance(v, (str, bytes, int, float, bool, type(None), np.generic)):
            digest.update(f"{type(v).__name__}:{v!r}".encode())
        else:
            digest.update(f"o{type(v).__qualname__}:{id(v)}".encode())
    visit(value)
    return digest.hexdigest()


def _tracked(value: Any) -> bool:
    """Whether identity can tell this value apart: Python shares equal scalars, strings
    and ``None`` between unrelated places, so those are never matched by identity."""
    return not isinstance(value, (int, float, complex, str, bytes, bool, type(None),
                                  np.generic))


# -- the session ----------------------------------------------------------------------------

class Trace:
    """A tracing session (also what ``load_experience`` returns, bound to operations)."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        self._calls: list[Call] = []
        self._stamps: list[str] = []
        self._by_id: dict[int, int] = {}
        self._supervisions: list[Supervision] = []
        self._lock = threading.RLock()
        self._released = False

    # -- capture ------------------------------------------------------------------------
    def run(self, fn: Callable[[], Any]) -> Any:
        """Call ``fn()`` capturing every operation call it makes. When ``fn`` is async,
        return an awaitable that keeps capturing across its awaits."""
        self._check_live("run")
        token = _CURRENT.set(self)
        try:
            result = fn()
        finally:
            _CURRENT.reset(token)
        if inspect.isawaitable(result):
            return self._run_async(result)
        return result

    async def _run_async(self, awaitable: Any) -> Any:
        token = _CURRENT.set(self)
        try:
            return await awaitable
        finally:
            _CURRENT.reset(token)

    def capture(self, operation: Any, args: Sequence[Any]) -> Any:
        """Run ``operation`` on ``args`` and record the call in this trace (what an
        operation called inside ``trace()`` does); returns the call's output."""
        with self._lock:
            self._check_live("capture a call")
            index = len(self._calls)
            inputs: list[Any] = []
            values: list[Any] = []
            for position, arg in enumerate(args):
                found = self._by_id.get(id(arg)) if _tracked(arg) else None
                if found is not None and self._calls[found].value is arg:
                    self._check_intact(found, "reused")
                    inputs.append(OutputRef(self.id, found))
                    values.append(arg)
                else:
                    frozen = snapshot(arg)
                    inputs.append(InputRef(index, position, frozen))
                    values.append(frozen)
        token = _CURRENT.set(None)  # what the operation does inside is not a new call
        try:
            output = operation.apply(values)
        finally:
            _CURRENT.reset(token)
        output = snapshot(output)
        with self._lock:
            index = len(self._calls)
            inputs = [InputRef(index, r.position, r.value) if isinstance(r, InputRef)
                      else r for r in inputs]
            self._calls.append(Call(index, operation, tuple(inputs), output, self.id))
            self._stamps.append(stamp(output))
            if _tracked(output):
                self._by_id[id(output)] = index
        return output

    # -- reading ------------------------------------------------------------------------
    @property
    def calls(self) -> tuple[Call, ...]:
        """Every captured call in order (``calls[i].value`` is call i's result and
        ``calls[i].output`` its handle: the result, or an ``OutputRef`` for a scalar)."""
        return tuple(self._calls)

    @property
    def supervisions(self) -> tuple[Supervision, ...]:
        return tuple(self._supervisions)

    @property
    def released(self) -> bool:
        return self._released

    def ref(self, output: Any) -> OutputRef:
        """The reference of a captured output, found by identity (never by value), or
        of a ``Call`` of this trace (the handle for scalar outputs, which Python shares
        between equal values and so cannot be told apart by identity)."""
        if isinstance(output, OutputRef):
            return self._check_ref(output)
        if isinstance(output, Call):
            return self._call_ref(output)
        self._check_live("make a reference")
        if not _tracked(output):
            raise TensorCodeError(
                f"a {type(output).__name__} output cannot be told apart from equal values by "
                "identity; pass its handle instead: session.ref(session.calls[index].output)")
        found = self._by_id.get(id(output))
        if found is None or self._calls[found].value is not output:
            raise TensorCodeError(
                "this value is not an output captured by this trace (outputs are matched by "
                "identity, so a copy or an equal value is not one); pass the object an "
                "operation returned inside session.run, or session.calls[i].output")
        self._check_intact(found, "referenced")
        return OutputRef(self.id, found)

    def _check_ref(self, ref: OutputRef) -> OutputRef:
        if ref.trace_id != self.id:
            raise TensorCodeError("this OutputRef belongs to another trace")
        if not 0 <= ref.call < len(self._calls):
            raise TensorCodeError(f"OutputRef names call {ref.call}, but this trace has "
                                  f"{len(self._calls)} calls")
        return ref

    def _call_ref(self, call: Call) -> OutputRef:
        if not (0 <= call.index < len(self._calls) and self._calls[call.index] is call):
            raise TensorCodeError("this Call belongs to another trace")
        return OutputRef(self.id, call.index)

    def _resolve(self, target: Any) -> OutputRef:
        if isinstance(target, OutputRef):
            return self._check_ref(target)
        if isinstance(target, Call):
            return self._call_ref(target)
        if self._released:
            raise TensorCodeError("this trace was released; name outputs with OutputRef "
                                  "(session.ref(...) before release) instead of the value")
        return self.ref(target)

    def example(self, target: Any) -> Example:
        """The calls ``target`` depends on and the external roots they read."""
        ref = self._resolve(target)
        needed: set[int] = set()
        stack = [ref.call]
        while stack:
            k = stack.pop()
            if k in needed:
                continue
            needed.add(k)
            stack.extend(i.call for i in self._calls[k].inputs if isinstance(i, OutputRef))
        calls = tuple(sorted(needed))
        roots = tuple(i for k in calls for i in self._calls[k].inputs
                      if isinstance(i, InputRef))
        return Example(ref, calls, roots)

    # -- supervision --------------------------------------------------------------------
    def supervise(self, output: Any, target: Any, loss: str = "cross_entropy", *,
                  source: str) -> Supervision:
        """Record explicit feedback on ``output`` (a captured output or an ``OutputRef``):
        ``target`` is snapshotted; ``source`` is a required nonempty provenance string."""
        if not isinstance(source, str) or not source.strip():
            raise TensorCodeError("supervise needs source=..., a nonempty string saying where "
                                  "the target came from (for example 'human:review-42')")
        if not isinstance(loss, str) or not loss:
            raise TensorCodeError(f"loss must be a loss name such as 'cross_entropy' or "
                                  f"'mse', got {loss!r}")
        with self._lock:
            ref = self._resolve(output)
            found = self._by_id.get(id(target)) if _tracked(target) else None
            if found is not None and self._calls[found].value is target:
                raise TensorCodeError("a target must be feedback, not a captured prediction; "
                                      "pass the label or value the source supplied")
            record = Supervision(ref, snapshot(target), loss, source)
            self._supervisions.append(record)
        return record

    # -- integrity ----------------------------------------------------------------------
    def _check_live(self, action: str) -> None:
        if self._released:
            raise TensorCodeError(f"cannot {action}: this trace was released; start a new "
                                  "one with trace()")

    def _check_intact(self, index: int, action: str) -> None:
        if stamp(self._calls[index].value) != self._stamps[index]:
            raise TensorCodeError(f"the output of call {index} was mutated after it was "
                                  f"captured and cannot be {action}; captured values must not "
                                  "change (copy it first, then change the copy)")

    def validate(self) -> None:
        """Check every captured output is unchanged since capture."""
        for index in range(len(self._calls)):
            self._check_intact(index, "saved or released")

    def release(self) -> None:
        """Validate the whole session, then drop the identity map of live results. Calls,
        supervision, ``save`` and ``replay`` by ``OutputRef`` keep working."""
        with self._lock:
            self.validate()
            self._by_id.clear()
            self._released = True

    # -- replay -------------------------------------------------------------------------
    def replay(self, target: Any, inputs: Any = None, boundary: str = "error") -> Any:
        """Recompute ``target`` from its external roots with the operations' current
        parameters. ``inputs`` replaces roots (``{(call, position): value}``, keyed by
        ``InputRef.key``, or a list aligned with ``example(target).roots``). Calls of
        external operations are rejected unless ``boundary="recorded"``, which reuses
        their captured results as constants."""
        if boundary not in BOUNDARIES:
            raise TensorCodeError(f"boundary must be one of {list(BOUNDARIES)}, got "
                                  f"{boundary!r}")
        example = self.example(target)
        overrides = _root_overrides(example, inputs)
        values: dict[int, Any] = {}
        for k in example.calls:
            call = self._calls[k]
            if getattr(call.operation, "replay", "pure") != "pure":
                if boundary == "error":
                    raise TensorCodeError(
                        f"call {k} ({type(call.operation).__name__}) has an external effect "
                        "and is not recomputed; pass boundary='recorded' to reuse its "
                        "captured result")
                values[k] = call.value
                continue
            args = [values[i.call] if isinstance(i, OutputRef) else overrides.get(i.key, i.value)
                    for i in call.inputs]
            values[k] = call.operation.apply(args)
        return values[example.target.call]

    # -- saving -------------------------------------------------------------------------
    def save(self, path: Any, operations: Mapping[str, Any], codecs: Mapping[str, Any] | None
             = None, release: bool = False) -> None:
        """Write the session as a versioned JSON experience, atomically. ``operations``
        binds a stable name to each operation instance the calls used."""
        allow = codecs_module.check_codecs(codecs)
        with self._lock:
            self.validate()
            document = self._document(operations, allow)
            text = json.dumps(document, ensure_ascii=False, allow_nan=False,
                              separators=(",", ":"))
            atomic_write_bytes(path, text.encode("utf-8"))
            if release:
                self.release()

    def _document(self, operations: Mapping[str, Any], allow: dict) -> dict:
        names: dict[int, str] = {}
        for name, op in operations.items():
            if not isinstance(name, str) or not name:
                raise TensorCodeError(f"operation names must be nonempty strings, got {name!r}")
            if id(op) in names:
                raise TensorCodeError(f"one operation is bound twice ({names[id(op)]!r} and "
                                      f"{name!r}); bind each instance to one name")
            names[id(op)] = name
        used: dict[str, Any] = {}
        calls = []
        for call in self._calls:
            bound = names.get(id(call.operation))
            if bound is None:
                raise TensorCodeError(
                    f"call {call.index} used a {type(call.operation).__name__} that "
                    "operations= does not bind; pass every operation the trace called, by "
                    "name")
            used[bound] = call.operation
            encoded_inputs: list[dict[str, Any]] = []
            for i in call.inputs:
                if isinstance(i, OutputRef):
                    encoded_inputs.append({"ref": i.call})
                else:
                    encoded_inputs.append({"value": _encode(i.value, allow,
                                                            f"call {call.index} input")})
            calls.append({"operation": bound, "inputs": encoded_inputs,
                          "output": _encode(call.value, allow, f"call {call.index} output")})
        supervision = [{"call": s.ref.call, "loss": s.loss, "source": s.source,
                        "target": _encode(s.target, allow, "supervision target")}
                       for s in self._supervisions]
        bindings = {name: {"qualified_name": op.qualified_name, "replay": op.replay,
                           "fingerprint": op.fingerprint()} for name, op in used.items()}
        return {"format": FORMAT, "version": VERSION, "operations": bindings, "calls": calls,
                "supervision": supervision}


def _encode(value: Any, allow: dict, what: str) -> dict:
    try:
        return codecs_module.encode(value, allow)
    except TensorCodeError as error:
        raise TensorCodeError(f"{what}: {error}") from None


def _root_overrides(example: Example, inputs: Any) -> dict[tuple[int, int], Any]:
    if inputs is None:
        return {}
    keys = {root.key for root in example.roots}
    if isinstance(inputs, Mapping):
        overrides = {}
        for key, value in inputs.items():
            key = key.key if isinstance(key, InputRef) else tuple(key)
            if key not in keys:
                raise TensorCodeError(f"replay inputs name {key}, which is not an external "
                                      f"root of this example (roots: {sorted(keys)})")
            overrides[key] = value
        return overrides
    inputs = list(inputs)
    if len(inputs) != len(example.roots):
        raise TensorCodeError(f"replay inputs: expected {len(example.roots)} values (one per "
                              f"external root), got {len(inputs)}")
    return {root.key: value for root, value in zip(example.roots, inputs)}


# -- files ----------------------------------------------------------------------------------

#: experience values nest up to the codecs' depth, two JSON levels per value level; the
#: integers are Python ints the trace captured, so their range is wide but still bounded
_FILE_LIMITS = JsonLimits(max_bytes=MAX_FILE_BYTES, max_depth=2 * codecs_module.MAX_DEPTH + 16,
                          min_integer=-(2 ** 256), max_integer=2 ** 256)


def load_experience(path: Any, operations: Mapping[str, Any],
                    codecs: Mapping[str, Any] | None = None) -> Trace:
    """Read an experience file and bind it to ``operations`` (already built).

    Everything is validated before anything is built: the format and version, that
    every operation the file names is bound here with the same qualified name, replay
    capability and fingerprint, that every reference points to an earlier call, and
    every codec tag (records only through the ``codecs`` allowlist). Any failure raises
    ``ArtifactError`` naming the file and field.
    """
    if not isinstance(operations, Mapping):
        raise TypeError(f"operations must map names to operations, got "
                        f"{type(operations).__name__}")
    allow = codecs_module.check_codecs(codecs)
    document = read_json(path, what="experience file", limits=_FILE_LIMITS)
    validate_document(document, operations, allow, path)
    return _build(document, operations, allow, path)


def _check_signature(operation: Any, k: int, name: str, args: list, path: Any) -> None:
    """A loaded call's recorded inputs must fit its operation's signature (the arrays its
    ``convert`` accepts), so ``replay`` and the Trainer never hand an operation inputs
    that raise its own ``TypeError``; refused with ``ArtifactError`` naming the call."""
    if getattr(operation, "replay", "pure") != "pure":
        return  # an external call is never recomputed: its inputs are only a record
    convert = getattr(operation, "convert", None)
    if convert is None:
        return
    try:
        convert(args)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError,
            TensorCodeError) as error:
        raise ArtifactError(f"call {k} ({name}, a {type(operation).__name__}) records "
                            f"inputs its operation does not take: {error}", path=path,
                            field=f"calls[{k}].inputs") from None


def _build(document: dict, operations: Mapping[str, Any], allow: dict, path: Any) -> Trace:
    session = Trace()
    for k, call in enumerate(document["calls"]):
        inputs: list[OutputRef | InputRef] = []
        for p, item in enumerate(call["inputs"]):
            if "ref" in item:
                inputs.append(OutputRef(session.id, item["ref"]))
            else:
                value = codecs_module.decode(item["value"], allow, path,
                                             f"calls[{k}].inputs[{p}]")
                inputs.append(InputRef(k, p, snapshot(value)))
        output = snapshot(codecs_module.decode(call["output"], allow, path,
                                               f"calls[{k}].output"))
        operation = operations[call["operation"]]
        _check_signature(operation, k, call["operation"],
                         [session._calls[i.call].value if isinstance(i, OutputRef) else i.value
                          for i in inputs], path)
        session._calls.append(Call(k, operation, tuple(inputs), output, session.id))
        session._stamps.append(stamp(output))
        if _tracked(output):
            session._by_id[id(output)] = k
    for s, record in enumerate(document["supervision"]):
        target = codecs_module.decode(record["target"], allow, path, f"supervision[{s}].target")
        session._supervisions.append(Supervision(OutputRef(session.id, record["call"]),
                                                 snapshot(target), record["loss"],
                                                 record["source"]))
    return session


__all__ = ["trace", "Trace", "OutputRef", "InputRef", "ExternalRoot", "Call", "Supervision",
           "Example", "load_experience", "current_trace", "FORMAT", "VERSION"]

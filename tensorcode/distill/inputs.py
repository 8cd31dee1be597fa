"""Router inputs from the outside world: one strict reader and one validator.

``Router``, ``tensorcode route`` and the HTTP service all take cases from callers they do
not control, so they share this module: a case is refused here, before the program runs,
with an ``InputError`` naming the field, and a refused case is never an escalation. The
rules are stricter than ``normalize_case`` (which also reads saved records): a value
must be a number, a nested list of numbers or a numeric NumPy array; a string, a boolean
or ``null`` where a number belongs is refused rather than converted.

JSON text is read with duplicate keys, ``NaN``/``Infinity``, deep nesting and oversized
documents refused, because a lenient parser would silently pick one of two values or let
a non-finite number reach the program. An integer is read as the number it writes, past
int64 too (``10**30`` means what ``1e30`` means, as it does for a Python caller); one
past float64's range reaches the validator as an infinity and is refused there
(``not_finite``, naming the field), like ``1e400``.

Two readers, one set of rules: orjson (the ``serve`` extra), which parses in C, takes a
document only when its result is provably what the strict reader would return (no
escape sequences, so keys and strings are their raw text; at most ``max_depth``
brackets; as many colons in the text as object members plus colons inside strings, so
no key was repeated); anything else, and every error, goes to the package's strict
reader (``files.strict_json``), whose message the caller gets.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import FeedError
from ..extras import installed
from ..files.strict_json import JsonLimits, decode

#: the declared inputs (or outputs): ``{name: shape}``
Contract = dict[str, tuple[int, ...]]
#: one case: ``{name: float64 array of the declared shape}``
Case = dict[str, np.ndarray]

#: documents larger than this are refused before they are parsed
MAX_DOCUMENT_BYTES = 1 << 20
#: the deepest nesting a document may have (the strict reader's default)
MAX_DEPTH = 64

_NUMERIC_KINDS = frozenset("iuf")


class InputError(FeedError):
    """A case or document the caller sent cannot be served. ``field`` names the input
    (``features``, ``[3].features`` in a batch) or is ``None`` for the whole document;
    ``kind`` is a short stable word for metrics and clients (``json``, ``too_large``,
    ``not_object``, ``missing``, ``unexpected``, ``type``, ``shape``, ``not_finite``)."""

    def __init__(self, message: str, field: str | None = None, kind: str = "invalid") -> None:
        self.field = field
        self.kind = kind
        super().__init__(message)


def read_document(text: str | bytes, limit: int = MAX_DOCUMENT_BYTES) -> Any:
    """Parse one JSON document under the module's rules: at most ``limit`` bytes,
    UTF-8, no duplicate keys, no ``NaN``/``Infinity`` literals, at most ``MAX_DEPTH``
    levels of nesting (``InputError`` otherwise); integers past int64 become floats."""
    check_size(text, limit)
    document = _fast_document(text)
    if document is not _NOT_FAST:
        return document
    return _strict_document(text, limit)


def _strict_document(text: str | bytes, limit: int) -> Any:
    try:
        return decode(text, JsonLimits(max_bytes=limit, max_depth=MAX_DEPTH,
                                       integers_past_range_as_floats=True))
    except ValueError as error:  # JSONDecodeError is a ValueError, as are the bounds'
        raise InputError(f"not JSON ({error}); send one object such as "
                         '{"features": [0, 1, 0]}', None, "json") from None


def _fast_document(text: str | bytes) -> Any:
    """The document as orjson reads it when that is provably the strict reader's result
    (see the module's docstring), else ``_NOT_FAST``."""
    loads = _fast_loads()
    if loads is None:
        return _NOT_FAST
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if b"\\" in raw or raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        return _NOT_FAST
    try:
        document = loads(raw)
    except ValueError:  # orjson's JSONDecodeError: the strict reader words the error
        return _NOT_FAST
    if raw.count(b":") != _colons(document):  # a repeated key was dropped
        return _NOT_FAST
    return document


def _colons(value: Any) -> int:
    """How many colons the JSON text of ``value`` holds when written without escapes:
    one per object member, plus those inside keys and strings."""
    kind = type(value)
    if kind is dict:
        return sum(1 + key.count(":") + _colons(item) for key, item in value.items())
    if kind is list:
        if _NUMBER_TYPES.issuperset(map(type, value)):
            return 0
        return sum(_colons(item) for item in value)
    return value.count(":") if kind is str else 0


def _fast_loads() -> Any:
    """``orjson.loads`` when the ``serve`` extra is installed, else ``None`` (the strict
    reader alone gives the same results, more slowly); looked up once."""
    global _ORJSON_LOADS
    if _ORJSON_LOADS is _UNRESOLVED:
        orjson = installed("orjson")
        _ORJSON_LOADS = None if orjson is None else orjson.loads
    return _ORJSON_LOADS


_UNRESOLVED: Any = object()
_ORJSON_LOADS: Any = _UNRESOLVED
_NOT_FAST: Any = object()


def check_case(case: Any, contract: Contract, what: str = "") -> Case:
    """One case as read-only float64 arrays of the contract's shapes.

    ``what`` prefixes the field names in messages (``[3].`` for the fourth case of a
    batch). Every name of the contract must be present and no other; each value must be
    numeric (see the module's rules), of the declared shape (a size-1 value fills a
    size-1 shape) and finite.
    """
    if type(case) is not dict and not isinstance(case, Mapping):
        raise InputError(f"{what or 'the case'} must be a JSON object mapping input names "
                         f"to values, got {_json_type(case)}", what.rstrip(".") or None,
                         "not_object")
    check_names(case, contract, what)
    return {name: _field(case[name], shape, f"{what}{name}") for name, shape in contract.items()}


def check_names(case: Mapping[str, Any], contract: Contract, what: str = "") -> None:
    """Every name of the contract present in ``case`` and no other (``missing`` or
    ``unexpected``, naming the first such field, prefixed by ``what``)."""
    for name in contract:
        if name not in case:
            raise InputError(f"{what}{name}: missing; expected exactly {list(contract)}",
                             f"{what}{name}", "missing")
    if len(case) != len(contract):
        extra = [str(name) for name in case if name not in contract]
        raise InputError(f"{what}{extra[0]}: unexpected input; expected exactly "
                         f"{list(contract)}", f"{what}{extra[0]}", "unexpected")


def check_size(body: str | bytes, limit: int) -> None:
    """A body of at most ``limit`` bytes (``too_large`` otherwise)."""
    if len(body) > limit:
        raise InputError(f"the document has {len(body)} bytes, more than the limit of "
                         f"{limit}", None, "too_large")


def check_count(count: int, max_cases: int | None) -> None:
    """A batch of at most ``max_cases`` cases (``too_many`` otherwise; ``None``: any)."""
    if max_cases is not None and count > max_cases:
        raise InputError(f"the batch has {count} cases, more than the limit of "
                         f"{max_cases}", None, "too_many")


def check_value(value: Any, shape: tuple[int, ...] | None, field: str) -> np.ndarray:
    """One value under the module's rules, as a read-only float64 array of ``shape``
    (any shape when ``shape`` is ``None``); ``InputError`` names ``field`` otherwise."""
    return _field(value, shape, field)


def check_values(case: Any, names: Any = None, what: str = "") -> dict[str, Any]:
    """A case whose shapes no contract declares (a router over a plain callable): a
    mapping from text names to values that each pass the module's rules, exactly the
    ``names`` when given. The values are returned as given, in a new dict, so the
    program sees what the caller sent; only their kind and finiteness are checked."""
    if not isinstance(case, Mapping):
        raise InputError(f"{what or 'the case'} must be a JSON object mapping input names "
                         f"to values, got {_json_type(case)}", what.rstrip(".") or None,
                         "not_object")
    if names is not None:
        expected = list(names)
        for name in expected:
            if name not in case:
                raise InputError(f"{what}{name}: missing; expected exactly {expected}",
                                 f"{what}{name}", "missing")
        if len(case) != len(expected):
            extra = [str(name) for name in case if name not in expected]
            raise InputError(f"{what}{extra[0]}: unexpected; expected exactly {expected}",
                             f"{what}{extra[0]}", "unexpected")
    for name, value in case.items():
        if not isinstance(name, str):
            raise InputError(f"{what}{name!r}: names must be text", f"{what}{name!r}",
                             "type")
        _field(value, None, f"{what}{name}")
    return dict(case)


def check_batch(cases: Any, contract: Contract, *, may_hold_booleans: bool = True
                ) -> dict[str, np.ndarray]:
    """A list of cases as ``{name: float64 array [N, *shape]}``, under the same rules as
    ``check_case``; an error names the case (``[3].features``).

    The whole batch is converted with one NumPy call per input; only when that fails is
    each case checked on its own, to say which one is wrong. ``may_hold_booleans=False``
    is the caller's promise that the source text holds no ``true``/``false`` literal
    (JSON text where neither token occurs), which skips the walk that refuses a boolean
    mixed into a list of numbers (NumPy would quietly read it as 0 or 1).
    """
    if not isinstance(cases, list):
        raise InputError(f"a batch must be a JSON array of case objects, got "
                         f"{_json_type(cases)}", None, "not_object")
    names = list(contract)
    expected = set(names)
    count = len(cases)
    try:
        for case in cases:
            if type(case) is not dict or case.keys() != expected:
                raise _Slow
        stacked = {}
        for name in names:
            column = [case[name] for case in cases]
            if may_hold_booleans and _holds_bool(column):
                raise _Slow
            array = np.array(column)
            shape = contract[name]
            if array.dtype.kind not in _NUMERIC_KINDS or array.shape != (count, *shape):
                raise _Slow
            array = np.ascontiguousarray(array, dtype=np.float64)
            if not np.isfinite(array).all():
                raise _Slow
            stacked[name] = array
        return stacked
    except (_Slow, ValueError, TypeError, OverflowError):
        pass
    checked = [check_case(case, contract, f"[{i}].") for i, case in enumerate(cases)]
    if not checked:
        return {name: np.empty((0, *contract[name])) for name in names}
    return {name: np.stack([case[name] for case in checked]) for name in names}


def read_batch(text: bytes, contract: Contract, limit: int = MAX_DOCUMENT_BYTES,
               max_cases: int | None = None) -> dict[str, np.ndarray]:
    """A JSON array of case objects as ``{name: float64 array [N, *shape]}``: what
    ``check_batch(read_document(text, limit), contract)`` returns, with the same errors
    (``too_many`` past ``max_cases``), but read in a few C passes when the text allows.

    The fast read takes a body only when orjson parses it, it has no escape sequence, no
    ``true``/``false``, no string but the keys (two quotes per member), exactly one colon
    per member (no repeated key), every case is an object of exactly the contract's
    names and every value converts to the declared shape with finite numbers (``null``
    reads as NaN): then the strict reader would have returned the same numbers. Anything
    else takes the strict path, which says what is wrong.
    """
    check_size(text, limit)
    stacked = _fast_batch(text, contract, max_cases)
    if stacked is not None:
        return stacked
    documents = _strict_document(text, limit)
    if isinstance(documents, list):
        check_count(len(documents), max_cases)
    return check_batch(documents, contract, may_hold_booleans=(
        b"true" in text or b"false" in text))


def _fast_batch(text: bytes, contract: Contract, max_cases: int | None
                ) -> dict[str, np.ndarray] | None:
    loads = _fast_loads()
    names = list(contract)
    if (loads is None or type(text) is not bytes or b"\\" in text or b"true" in text
            or b"false" in text or 2 + max(map(len, contract.values())) > MAX_DEPTH):
        return None
    try:
        cases = loads(text)
    except ValueError:
        return None
    count = len(cases) if type(cases) is list else -1
    if count <= 0 or (max_cases is not None and count > max_cases):
        return None
    if set(map(type, cases)) != {dict} or set(map(len, cases)) != {len(names)}:
        return None
    colons = count * sum(1 + name.count(":") for name in names)
    quotes = count * 2 * len(names)
    if text.count(b":") != colons or text.count(b'"') != quotes:
        return None  # a repeated key, an object or a string among the values
    stacked = {}
    try:
        for name in names:
            rows: Any = list(map(operator.itemgetter(name), cases))  # KeyError: another name
            shape = contract[name]
            for level, size in enumerate(shape):  # each level: lists of the declared length
                if set(map(type, rows)) != {list} or set(map(len, rows)) != {size}:
                    return None
                rows = itertools.chain.from_iterable(rows)
                if level < len(shape) - 1:
                    rows = list(rows)
            total = count * math.prod(shape)
            array = np.fromiter(rows, dtype=np.float64, count=total)
            if not np.isfinite(array).all():
                return None
            stacked[name] = array.reshape(count, *shape)
    except (KeyError, OverflowError, TypeError, ValueError):
        return None
    return stacked


class _Slow(Exception):
    """The batch needs the case-by-case check (which finds the message)."""


def _field(value: Any, shape: tuple[int, ...] | None, field: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _NUMERIC_KINDS:
            raise InputError(f"{field}: expected numbers, got an array of {value.dtype}",
                             field, "type")
        array = np.array(value, dtype=np.float64)
        finite = bool(np.isfinite(array).all())
    else:
        if not _numeric(value):
            raise InputError(f"{field}: not numeric; expected a number or a list of "
                             f"numbers, got {_describe(value)}", field, "type")
        try:
            array = np.array(value, dtype=np.float64)
        except OverflowError:  # an integer past float64
            raise InputError(f"{field}: holds a number too large for float64; values must "
                             "be finite", field, "not_finite") from None
        except ValueError:  # ragged nesting
            raise InputError(f"{field}: the nested lists are not rectangular", field,
                             "shape") from None
        try:  # a flat list or a number: summed without a temporary array
            finite = math.isfinite(math.fsum(value) if type(value) in (list, tuple)
                                   else value)
        except (TypeError, OverflowError, ValueError):
            # nested; finite numbers whose sum overflows; or infinities of both signs,
            # which fsum refuses (``-inf + inf``) rather than sums to NaN
            finite = bool(np.isfinite(array).all())
    if shape is not None and array.shape != shape:
        if array.size == 1 and math.prod(shape) == 1:
            array = array.reshape(shape)
        else:
            raise InputError(f"{field}: has shape {list(array.shape)}, the contract says "
                             f"{list(shape)}", field, "shape")
    if not finite:
        raise InputError(f"{field}: holds a NaN or infinity (or a number too large for "
                         "float64); values must be finite", field, "not_finite")
    array.flags.writeable = False
    return array


def _numeric(value: Any) -> bool:
    """A number (never a bool) or a list nesting only numbers."""
    kind = type(value)
    if kind is float or kind is int:
        return True
    if kind is list or kind is tuple:  # a tuple only from Python callers; JSON has none
        if _NUMBER_TYPES.issuperset(map(type, value)):  # flat: the common case, in C
            return True
        return all(_numeric(item) for item in value)
    return isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))


def _holds_bool(column: Sequence[Any]) -> bool:
    return any(type(item) is bool or (type(item) in (list, tuple) and _holds_bool(item))
               for item in column)


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        for item in value:
            if not _numeric(item):
                return f"a list holding {_describe(item)}"
    return f"{_json_type(value)} {value!r:.60}"


def _json_type(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", type(None): "null", dict: "an object",
             list: "an array"}
    return names.get(type(value), type(value).__name__)


_NUMBER_TYPES = frozenset({int, float})

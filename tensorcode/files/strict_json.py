"""Strict, bounded JSON: the one parser every artifact, manifest and record goes through.

Python's ``json`` accepts more than JSON and has no bounds: ``NaN`` and ``Infinity``
literals, a repeated key silently keeps the last value (so two readers of one file can
disagree), a deep ``[[[[...`` exhausts the stack, a huge file is read whole and an
integer of thousands of digits is built digit by digit. Here each of those is refused
before it can matter: the size is checked before the bytes are read, the nesting depth is
counted before the parser runs, integers are range-checked as they are parsed, and a
duplicate key or a non-finite constant stops the parse. ``decode`` raises ``ValueError``
(``json.JSONDecodeError`` for syntax, with its position) for callers that report errors
their own way; ``parse_json`` and ``read_json`` raise ``ArtifactError`` naming the file.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from dataclasses import dataclass
from typing import Any

from ..errors import ArtifactError

#: JSON artifacts larger than this are refused before they are parsed
MAX_JSON_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class JsonLimits:
    """Bounds on a JSON document: bytes, nesting depth, and the integer range (inclusive;
    the default spans int64 and uint64, the widest integers a tensor can hold)."""

    max_bytes: int = MAX_JSON_BYTES
    max_depth: int = 64
    min_integer: int = -(2 ** 63)
    max_integer: int = 2 ** 64 - 1
    #: read an integer outside the range as the nearest float64 (an infinity past
    #: float64's range) instead of refusing it: for readers whose numbers all become
    #: float64, so ``10**30`` written as an integer means what ``1e30`` means
    integers_past_range_as_floats: bool = False


DEFAULT_LIMITS = JsonLimits()

# a string (skipped whole, escapes included) or one bracket; numbers and words never match,
# so the scan visits only the structure of the document
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]', re.DOTALL)


def _check_depth(text: str, limit: int) -> None:
    if text.count("[") + text.count("{") <= limit:
        return  # cannot nest deeper than it has brackets
    depth = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                raise ValueError(f"the document nests deeper than {limit} levels")
        elif token in "]}":
            depth -= 1


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (JSON numbers are finite)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def decode(text: str | bytes, limits: JsonLimits = DEFAULT_LIMITS) -> Any:
    """The JSON value in ``text`` (bytes must be UTF-8). Raises ``ValueError`` naming
    what broke a bound or a rule; syntax errors are ``json.JSONDecodeError``."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        if len(text) > limits.max_bytes:
            raise ValueError(f"the document is {len(text)} bytes, more than the "
                             f"{limits.max_bytes} allowed")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("the file is not UTF-8 text") from None
    elif len(text) > limits.max_bytes:  # characters: at most as many as bytes
        raise ValueError(f"the document is over {limits.max_bytes} bytes")
    _check_depth(text, limits.max_depth)
    low, high = limits.min_integer, limits.max_integer
    digits = max(len(str(low)), len(str(high)))

    as_float = limits.integers_past_range_as_floats

    def integer(token: str) -> int | float:
        if len(token) > digits:
            if as_float:  # float() of a decimal string is correctly rounded, inf past range
                return float(token)
            raise ValueError(f"the integer {token[:20]}... is outside {low}..{high}")
        value = int(token)
        if not low <= value <= high:
            if as_float:
                return float(token)
            raise ValueError(f"the integer {token} is outside {low}..{high}")
        return value

    # an integer of fewer digits than either bound's magnitude is always in range: only a
    # document with a long digit run pays for checking every integer in Python
    safe_digits = max(min(len(str(abs(low))), len(str(abs(high)))) - 1, 1)
    if re.search(rf"\d{{{safe_digits}}}", text) is None:
        decoder = _FAST_DECODER
    else:
        decoder = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=integer,
                                   object_pairs_hook=_unique_keys)
    try:
        return decoder.decode(text)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError("the document nests too deeply") from None


def parse_json(data: str | bytes, path: Any = None, limits: JsonLimits = DEFAULT_LIMITS
               ) -> Any:
    """``decode`` with every failure an ``ArtifactError`` naming ``path``."""
    try:
        return decode(data, limits)
    except ValueError as error:
        raise ArtifactError(f"not valid JSON: {error}", path) from None


def read_json(path: str | os.PathLike, limit: int = MAX_JSON_BYTES, what: str = "file",
              limits: JsonLimits | None = None) -> Any:
    """A JSON document from ``path``, refusing files over ``limit`` bytes (checked before
    reading), non-UTF-8 text, NaN/infinity, duplicate keys, deep nesting and integers out
    of range; every failure is an ``ArtifactError`` naming the file."""
    path = pathlib.Path(path)
    if limits is None:
        limits = JsonLimits(max_bytes=limit)
    else:
        limit = limits.max_bytes
    try:
        size = path.stat().st_size
        if size > limit:
            raise ArtifactError(f"the {what} is {size} bytes, more than the {limit} allowed",
                                path)
        raw = path.read_bytes()
    except OSError as error:
        raise ArtifactError(f"cannot read the {what}: {error.strerror or error}", path) from None
    return parse_json(raw, path, limits)


def dumps(document: Any, indent: int | None = 1, sort_keys: bool = False) -> bytes:
    """Strict JSON (finite numbers only; floats round-trip exactly), newline-terminated
    UTF-8: what ``decode`` reads back."""
    return (json.dumps(document, indent=indent, sort_keys=sort_keys, allow_nan=False)
            + "\n").encode("utf-8")


#: the largest integer every JSON reader holds exactly (JavaScript's Number.MAX_SAFE_INTEGER)
MAX_SAFE_INTEGER = 2 ** 53 - 1


def safe_int(value: int) -> int | str:
    """``value`` as JSON that a JavaScript reader restores exactly: itself within
    +-``MAX_SAFE_INTEGER``, else a lowercase hex string (``"0x1f"``, ``"-0x1f"``)."""
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return value
    return f"-0x{-value:x}" if value < 0 else f"0x{value:x}"


def read_safe_int(value: Any, max_hex_digits: int = 64) -> int | None:
    """The integer ``safe_int`` wrote (a JSON integer, or a lowercase ``"0x..."`` /
    ``"-0x..."`` string of at most ``max_hex_digits`` digits); ``None`` for anything
    else, so the caller names the field in its own error."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    digits = value[3:] if value.startswith("-0x") else value[2:] if value.startswith("0x") \
        else ""
    if not digits or len(digits) > max_hex_digits or any(
            c not in "0123456789abcdef" for c in digits):
        return None
    number = int(digits, 16)
    return -number if value.startswith("-") else number


__all__ = ["JsonLimits", "DEFAULT_LIMITS", "MAX_JSON_BYTES", "MAX_SAFE_INTEGER", "decode",
           "parse_json", "read_json", "dumps", "safe_int", "read_safe_int"]


#: the decoder for documents whose integers are all short (built once: building one per
#: call costs more than parsing a small request)
_FAST_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)

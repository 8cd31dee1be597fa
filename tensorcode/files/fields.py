"""The one validating reader: fields read by path with an expected type and range.

Every artifact loader checks a parsed JSON document field by field before it builds
anything, and every complaint must let the user find the spot: the file, the field's path
(``graph.nodes[3].shape``) and what was expected against what was found. ``Fields`` holds
the file's path and turns each check into that ``ArtifactError``; ``at`` builds the paths.
"""

from __future__ import annotations

import builtins
import math
import re
from collections.abc import Collection, Iterable
from typing import Any

from ..errors import ArtifactError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def at(field: str, *steps: str | int) -> str:
    """The path of a field below ``field``: ``at("a", "b", 3, "c") == "a.b[3].c"``."""
    for step in steps:
        if isinstance(step, int):
            field = f"{field}[{step}]"
        else:
            field = f"{field}.{step}" if field else step
    return field


def describe(value: Any) -> str:
    """A short, safe description of a JSON value for a message (never the whole value)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return {"list": "a list", "dict": "an object"}.get(type(value).__name__,
                                                       type(value).__name__)


def is_int(value: Any) -> bool:
    """A JSON integer (``True`` and ``False`` are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


class Fields:
    """Checks on the values of one file; each failure is an ``ArtifactError`` that names
    the file and the field path.

    Methods take the value and its field path and return the value (converted where the
    name says so), so a loader reads as a list of expectations.
    """

    def __init__(self, path: Any = None) -> None:
        self.path = path

    def fail(self, field: str, message: str) -> ArtifactError:
        """The error for ``field`` (the caller raises it)."""
        return ArtifactError(message, path=self.path, field=field)

    def expected(self, field: str, what: str, found: Any) -> ArtifactError:
        """``expected <what>, found <description of found>`` for ``field``."""
        return self.fail(field, f"expected {what}, found {describe(found)}")

    # -- containers ---------------------------------------------------------------------
    def object(self, value: Any, field: str, what: str = "an object") -> dict:
        if not isinstance(value, dict):
            raise self.expected(field, what, value)
        return value

    def list(self, value: Any, field: str, min_length: int = 0,
             max_length: int | None = None) -> list:
        if not isinstance(value, list):
            raise self.expected(field, "a list", value)
        if len(value) < min_length or (max_length is not None and len(value) > max_length):
            upper = "any number of" if max_length is None else f"at most {max_length}"
            raise self.fail(field, f"expected at least {min_length} and {upper} entries, "
                            f"found {len(value)}")
        return value

    def keys(self, value: dict, field: str, required: Collection[str],
             optional: Collection[str] = (), exact: bool = True) -> dict:
        """Every ``required`` key is present and (when ``exact``) nothing beyond
        ``required`` and ``optional``; a complaint names the object's field."""
        known = set(required) | set(optional)
        missing = sorted(set(required) - set(value))
        if missing:
            raise self.fail(field, f"missing fields {missing}")
        extra = sorted(set(value) - known) if exact else []
        if extra:
            raise self.fail(field, f"unexpected fields {extra}; this reader knows "
                            f"{sorted(known)}")
        return value

    def get(self, value: dict, key: str, field: str | None = None) -> Any:
        """``value[key]``; missing is an error naming ``field`` (default ``key``)."""
        if not isinstance(value, dict) or key not in value:
            raise self.fail(field or key, "is missing")
        return value[key]

    # -- scalars ------------------------------------------------------------------------
    def string(self, value: Any, field: str, pattern: re.Pattern | None = None,
               max_length: int | None = None, what: str = "text") -> str:
        if not isinstance(value, str) or (max_length is not None and len(value) > max_length) \
                or (pattern is not None and not pattern.match(value)):
            raise self.expected(field, what, value)
        return value

    def sha256(self, value: Any, field: str) -> str:
        return self.string(value, field, _SHA256, what="64 lowercase hex digits")

    def choice(self, value: Any, field: str, options: Iterable[Any]) -> Any:
        options = list(options)
        if isinstance(value, bool) or value not in options:
            raise self.expected(field, f"one of {options}", value)
        return value

    def integer(self, value: Any, field: str, low: int | None = None,
                high: int | None = None) -> int:
        if not is_int(value):
            raise self.expected(field, "an integer", value)
        if (low is not None and value < low) or (high is not None and value > high):
            lower = "-inf" if low is None else low
            upper = "inf" if high is None else high
            raise self.fail(field, f"expected an integer in {lower}..{upper}, found {value}")
        return value

    def number(self, value: Any, field: str, finite: bool = True) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.expected(field, "a number", value)
        if finite and isinstance(value, float) and not math.isfinite(value):
            raise self.expected(field, "a finite number", value)
        return float(value)

    def integers(self, value: Any, field: str, low: int | None = 0,
                 max_length: int | None = None) -> builtins.list[int]:  # bare `list` is the method
        """A list of integers, each at least ``low``."""
        items = self.list(value, field, max_length=max_length)
        for k, item in enumerate(items):
            self.integer(item, at(field, k), low)
        return items


__all__ = ["Fields", "at", "describe", "is_int"]

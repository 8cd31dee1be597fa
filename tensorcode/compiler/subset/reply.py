"""What an author program is given: its input and output contracts, its json
parameters, and the program and json block picked out of a model's reply.

Nothing here evaluates text: the json block is read with the strict JSON reader (NaN,
Infinity and duplicate keys refused) and validated as names to numbers or nested lists.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import CompileError
from ...files.strict_json import decode
from .language import (
    IDENTIFIER,
    MAX_PARAMETER_ELEMENTS,
    MAX_RANK,
    MAX_TENSOR_ELEMENTS,
    RESERVED_NAMES,
)

# ---------------------------------------------------------------------------------------
# contracts and parameters (the caller's and the json block's side)


def normalize_contract(contract: Any, what: str) -> dict[str, tuple[int, ...]]:
    """``{"features": (12,)}`` validated: identifier names, shapes of positive ints."""
    if not isinstance(contract, Mapping) or not contract:
        raise CompileError(f"{what} must be a non-empty mapping from names to shapes, e.g. "
                           "{'features': (12,)}")
    result = {}
    for name, shape in contract.items():
        if not isinstance(name, str) or not IDENTIFIER.match(name) or name in RESERVED_NAMES:
            raise CompileError(f"{what}: {name!r} is not a usable name; use a Python "
                               "identifier that is not a built-in function name")
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (int(shape),)
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0
                for d in shape):
            raise CompileError(f"{what}: the shape of {name!r} must be a tuple of positive "
                               f"ints such as (12,) or () for a scalar, got {shape!r}")
        shape = tuple(int(d) for d in shape)
        if len(shape) > MAX_RANK or math.prod(shape) > MAX_TENSOR_ELEMENTS:
            raise CompileError(f"{what}: the shape {list(shape)} of {name!r} is larger than "
                               f"the limit (rank {MAX_RANK}, {MAX_TENSOR_ELEMENTS} elements)")
        result[name] = shape
    return result


def _numeric_tree(value: Any, name: str, depth: int = 0) -> None:
    if depth > MAX_RANK:
        raise CompileError(f"parameter {name!r} nests deeper than rank {MAX_RANK}")
    if isinstance(value, (list, tuple)):
        for item in value:
            _numeric_tree(item, name, depth + 1)
    elif isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                          np.floating, np.ndarray)):
        raise CompileError(f"parameter {name!r} must hold numbers (a number or nested "
                           f"lists of numbers), found {type(value).__name__}")


def normalize_parameters(parameters: Any, reserved: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The json block's parameters as read-only float64 arrays, validated."""
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping):
        raise CompileError("parameters must be a mapping from names to numbers or nested "
                           "lists, e.g. {\"threshold\": 0.5}")
    result: dict[str, np.ndarray] = {}
    total = 0
    for name, value in parameters.items():
        if not isinstance(name, str) or not IDENTIFIER.match(name) or name in RESERVED_NAMES:
            raise CompileError(f"parameter name {name!r} is not usable; use a Python "
                               "identifier that is not a built-in function name")
        if name in reserved:
            raise CompileError(f"parameter {name!r} has the same name as an input; rename it")
        if not isinstance(value, np.ndarray):
            _numeric_tree(value, name)
        try:
            array = np.array(value, dtype=np.float64)
        except (ValueError, TypeError, OverflowError):
            raise CompileError(f"parameter {name!r} is not a rectangular array of numbers; "
                               "every row must have the same length") from None
        if array.ndim > MAX_RANK or array.size == 0:
            raise CompileError(f"parameter {name!r} has shape {list(array.shape)}; it needs "
                               f"at least one element and rank at most {MAX_RANK}")
        if not np.all(np.isfinite(array)):
            raise CompileError(f"parameter {name!r} holds a non-finite number; use finite "
                               "values")
        total += array.size
        if total > MAX_PARAMETER_ELEMENTS:
            raise CompileError(f"the parameters hold more than {MAX_PARAMETER_ELEMENTS} "
                               "numbers; use fewer")
        array.flags.writeable = False
        result[name] = array
    return result


# ---------------------------------------------------------------------------------------
# parse_reply: the program and json block out of a model's reply

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def parse_reply(text: str) -> tuple[str, dict[str, Any]]:
    """Extract ``(source, parameters)`` from a model's reply.

    The program is the first fenced ``python`` block (or the first fenced block that is
    not json), or the whole text when there is no fence; the parameters come from the
    first fenced ``json`` block (``{}`` when there is none). Nothing is evaluated: the
    json block is read with the strict JSON reader and validated as names to numbers or
    nested lists of numbers.
    """
    if not isinstance(text, str):
        raise CompileError(f"the reply must be text (str), got {type(text).__name__}")
    blocks = [(m.group(1).lower(), m.group(2), m.start(2)) for m in _FENCE.finditer(text)]
    code = [b for b in blocks if b[0] in ("python", "py", "python3")]
    code = code or [b for b in blocks if b[0] not in ("json",)]
    source = code[0][1] if code else (text if not blocks else "")
    if blocks and not code:
        raise CompileError("the reply has a json block but no program; put the function in "
                           "a ```python block", 1, 1)
    parameters: dict[str, Any] = {}
    for language, body, start in blocks:
        if language != "json":
            continue
        first_line = text.count("\n", 0, start) + 1
        try:
            parsed = decode(body)
        except json.JSONDecodeError as exc:
            line = first_line + exc.lineno - 1
            raise CompileError(f"the json block is not valid JSON ({exc.msg}); write an "
                               "object such as {\"threshold\": 0.5}", line, exc.colno,
                               _reply_excerpt(text, line, exc.colno)) from None
        except (ValueError, RecursionError) as exc:
            raise CompileError(f"the json block cannot be read ({exc}); write an object of "
                               "numbers and lists of numbers", first_line, 1) from None
        if not isinstance(parsed, dict):
            raise CompileError("the json block must be an object mapping parameter names to "
                               "numbers or nested lists, e.g. {\"threshold\": 0.5}",
                               first_line, 1)
        try:
            normalize_parameters(parsed)
        except CompileError as exc:
            raise CompileError(f"in the json block: {exc.message}", first_line, 1,
                               _reply_excerpt(text, first_line, 1)) from None
        parameters = parsed
        break
    return source, parameters


def _reply_excerpt(text: str, line: int, column: int) -> str | None:
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    return f"    {lines[line - 1]}\n    {' ' * max(0, column - 1)}^"


__all__ = ["normalize_contract", "normalize_parameters", "parse_reply"]

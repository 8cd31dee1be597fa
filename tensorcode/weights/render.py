"""Weights as text a language model can read: integers times one scale per tensor.

``render`` writes each floating tensor as integers times a power-of-ten scale chosen so
its largest entry keeps ``digits`` significant digits, and returns the rounded tensors
that the text shows. The text is itself valid edit statements: run with the returned
``scales`` it rebuilds ``rounded`` bit for bit, which is why edits written against the
text apply to ``rounded``, the network as shown. Rendering is lossy by design; small
entries of a tensor with a large one round to zero.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PatchError
from .tensors import numpy_mapping

_BARE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\/\-]*$")


@dataclass(frozen=True)
class Rendering:
    """``text`` to show, the ``rounded`` tensors it shows exactly, and each tensor's
    ``scales[name]`` (value = integer x scale, computed in float64, cast to the dtype)."""

    text: str
    rounded: dict[str, np.ndarray]
    scales: dict[str, float]


def statement_name(name: str) -> str:
    """``name`` as written in an edit statement: bare when the grammar allows, else a
    JSON string."""
    return name if _BARE_NAME.match(name) else json.dumps(name)


def choose_scale(array: np.ndarray, digits: int) -> float:
    """The power of ten that leaves the largest magnitude with ``digits`` digits."""
    largest = float(np.max(np.abs(array.astype(np.float64)))) if array.size else 0.0
    if largest == 0.0:
        return 1.0
    exponent = math.floor(math.log10(largest)) - digits + 1
    # log10 can land one off near powers of ten; settle on the exact count of digits.
    for _ in range(3):
        scale = float(f"1e{exponent}")
        leading = round(largest / scale)
        if leading >= 10 ** digits:
            exponent += 1
        elif leading < 10 ** (digits - 1):
            exponent -= 1
        else:
            break
    return float(f"1e{exponent}")


def _integers(array: np.ndarray, scale: float) -> np.ndarray:
    # + 0.0 turns -0.0 into 0.0: the text shows "0", which reads back as +0.0.
    return np.rint(array.astype(np.float64) / scale) + 0.0


def _format_row(values: np.ndarray) -> str:
    return "[" + ", ".join(str(int(v)) for v in values.tolist()) + "]"


def _tensor_lines(name: str, array: np.ndarray, integers: np.ndarray, scale: float
                  ) -> list[str]:
    shown = statement_name(name)
    shape = ", ".join(str(n) for n in array.shape)
    if array.dtype.kind == "f":
        header = f"# {shown}: {array.dtype.name}[{shape}] = integers x {scale!r}"
    else:
        header = f"# {shown}: {array.dtype.name}[{shape}] exact integers (scale 1.0)"
    lines = [header]
    if array.size == 0:
        lines.append(f"# ({shown} is empty)")
        return lines
    if array.ndim == 0:
        lines.append(f"{shown} = {int(integers)}")
    elif array.ndim == 1:
        lines.append(f"{shown} = {_format_row(integers)}")
    else:
        for leading in np.ndindex(*array.shape[:-1]):
            index = ", ".join(str(k) for k in leading)
            lines.append(f"{shown}[{index}] = {_format_row(integers[leading])}")
    return lines


def render(mapping: Mapping[str, Any], digits: int = 3) -> Rendering:
    """Render ``{name: tensor}`` (NumPy or PyTorch) as integers times one scale each.

    Floating tensors keep ``digits`` significant digits of their largest entry; integer
    and bool tensors are written exactly with scale 1. Non-finite entries cannot be
    rendered and raise ``PatchError``.
    """
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 15:
        raise PatchError(f"digits must be an integer from 1 to 15, got {digits!r}")
    arrays = numpy_mapping(mapping)
    lines = [f"# weights: each tensor is integers x its scale ({digits} significant digits "
             "of its largest entry); edit with statements such as w[0, 1] = 12 or b[2] += -3 "
             "in the same integer units"]
    rounded: dict[str, np.ndarray] = {}
    scales: dict[str, float] = {}
    for name, array in arrays.items():
        if array.dtype.kind == "f":
            if not np.all(np.isfinite(array)):
                raise PatchError(f"tensor {name!r} has non-finite entries, which cannot be "
                                 "rendered as integers; replace them first")
            scale = choose_scale(array, digits)
            integers = _integers(array, scale)
            with np.errstate(over="ignore"):
                shown = (integers * scale).astype(array.dtype)
            if not np.all(np.isfinite(shown)):
                raise PatchError(f"tensor {name!r} rounds beyond the range of "
                                 f"{array.dtype.name}; render it with fewer digits")
        else:
            scale = 1.0
            integers = array.astype(np.int64) if array.dtype != np.uint64 else array
            shown = np.array(array, copy=True)
        rounded[name] = shown
        scales[name] = scale
        lines.extend(_tensor_lines(name, array, integers, scale))
    return Rendering("\n".join(lines) + "\n", rounded, scales)


__all__ = ["Rendering", "render", "choose_scale", "statement_name"]

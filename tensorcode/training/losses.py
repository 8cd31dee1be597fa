"""Losses the Trainer records on a replay tape, by name.

A supervision names its loss; the Trainer looks the name up here (``cross_entropy``,
``mse``) or among the in-process callables it was given (``losses={name: fn}``, never
serialized). Targets become tape inputs, so one compiled plan serves every experience
of the same structure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..compiler.core.dtypes import FLOAT_DTYPES
from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import DISTRIBUTION_TOLERANCE, cross_entropy, mse
from ..compiler.trace.expr import Expr
from ..errors import ShapeError, TrainingError

#: ``fn(output, target) -> scalar Expr``: ``output`` is the supervised Expr, ``target``
#: the target as an Expr (numeric targets) or the raw value (anything else).
LossFn = Callable[[Expr, Any], Expr]
BUILTIN = ("cross_entropy", "mse")
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def check_distribution(values: Any, classes: int, what: str = "the distribution") -> np.ndarray:
    """``values`` as float32 when it is a distribution over ``classes``: a flat list of
    ``classes`` finite, nonnegative numbers summing to one within
    ``DISTRIBUTION_TOLERANCE``; otherwise ``TrainingError`` naming the offending values."""
    _require_numbers(values, what)
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise TrainingError(f"{what} must be a list of numbers, got {values!r:.200}") from None
    if array.ndim != 1 or array.shape[0] != classes:
        raise TrainingError(f"{what} needs {classes} entries, got shape {list(array.shape)}")
    bad = [(k, float(v)) for k, v in enumerate(array) if not math.isfinite(v) or v < 0]
    if bad:
        shown = ", ".join(f"[{k}] = {v}" for k, v in bad[:5])
        raise TrainingError(f"{what} must be finite and nonnegative; offending entries: "
                            f"{shown}")
    total = float(array.sum())
    if abs(total - 1.0) > DISTRIBUTION_TOLERANCE:
        raise TrainingError(f"{what} sums to {total!r}, not 1 (tolerance "
                            f"{DISTRIBUTION_TOLERANCE}): {array.tolist()[:8]}")
    return array.astype(np.float32)


def _require_numbers(values: Any, what: str) -> None:
    """Refuse entries that NumPy would coerce to numbers but are not numbers: strings
    (``'0.2'``) and booleans (``True``) are a mistake in a probability target, not 0.2 and
    1.0."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "fiu":
            raise TrainingError(f"{what} must hold numbers, got an array of {values.dtype}; "
                                "pass floats such as [0.2, 0.3, 0.5]")
        return
    if not isinstance(values, (list, tuple)):
        raise TrainingError(f"{what} must be a list of numbers, got "
                            f"{type(values).__name__}")
    for k, value in enumerate(values):
        if isinstance(value, (list, tuple, np.ndarray)):
            _require_numbers(value, f"{what} (row {k})")
            continue
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise TrainingError(f"{what} must hold numbers, but entry [{k}] is {value!r:.80} "
                                f"({type(value).__name__}); pass floats such as "
                                "[0.2, 0.3, 0.5]")


def soft_cross_entropy(logits: Expr, distribution: Expr) -> Expr:
    """Mean over the batch of ``-sum(distribution * log softmax(logits))``; both
    ``[batch, classes]``. Its gradient is ``softmax(logits) - distribution``. The one
    definition is ``tc.cross_entropy`` with a probability target; this name stays for
    the losses table."""
    return cross_entropy(logits, distribution)


def class_indices(target: Any, operation: Any, rows: int | None) -> np.ndarray:
    """Integer class indices from indices or label strings (names resolved through the
    supervised operation's ``label_index``)."""
    single = rows is None
    values = [target] if single else target
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        raise TrainingError(f"a batch of {rows} logits needs a list of {rows} targets, got "
                            f"{type(target).__name__}")
    indices = []
    for value in values:
        if isinstance(value, str):
            lookup = getattr(operation, "label_index", None)
            if lookup is None:
                raise TrainingError(f"target {value!r} is a label, but "
                                    f"{type(operation).__name__} has no label names; pass "
                                    "an integer class index")
            try:
                indices.append(lookup(value))
            except KeyError as error:
                raise TrainingError(str(error.args[0])) from None
        elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if not _INT64_MIN <= int(value) <= _INT64_MAX:
                raise TrainingError(f"cross_entropy: class index {int(value):.3g} is out of "
                                    "range; a class index lies in [0, classes)")
            indices.append(int(value))
        else:
            raise TrainingError(f"cross_entropy targets are class indices or label strings, "
                                f"got {value!r}")
    if not single and len(indices) != rows:
        raise ShapeError(f"cross_entropy: {rows} rows of logits but {len(indices)} targets")
    return np.asarray(indices, dtype=np.int64)


def _is_distribution(target: Any, shape: tuple[int, ...] | None) -> bool:
    """A float target with the logits' shape (any shape when None) is a distribution
    over the classes."""
    if isinstance(target, (str, int, np.integer)):
        return False
    try:
        array = np.asarray(target)
    except (TypeError, ValueError):
        return False
    return array.dtype.kind == "f" and array.ndim > 0 and (
        shape is None or array.shape == tuple(shape))


def record_loss(name: str, tape: Tape, output: Expr, target: Any, operation: Any,
                custom: Mapping[str, LossFn]) -> tuple[Expr, list[tuple[Expr, np.ndarray]]]:
    """The scalar loss of one supervision on ``tape`` and the ``(input, array)`` feeds
    that carry its target."""
    if name in custom:
        feeds = []
        try:
            array = np.asarray(target)
            numeric = array.dtype.kind in "fiub"
        except Exception:  # ragged or exotic targets go to the callable as they are
            numeric = False
        if numeric:
            if array.dtype.kind == "f":
                array = array.astype(output.dtype)
            elif array.dtype.kind in "iub":
                array = array.astype(np.int64)
            symbol = tape.input(array)
            feeds.append((symbol, array))
            target = symbol
        loss = custom[name](output, target)
        if not isinstance(loss, Expr) or loss.builder is not tape:
            raise TrainingError(f"loss {name!r} must return an Expr recorded from its "
                                f"arguments, got {type(loss).__name__}")
        if loss.shape != ():
            raise TrainingError(f"loss {name!r} must return a scalar, got shape "
                                f"{list(loss.shape)}; reduce it with .mean() or .sum()")
        return loss, feeds
    if output.dtype not in FLOAT_DTYPES:
        raise TrainingError(f"the supervised output is {output.dtype}: an integer value is "
                            "not differentiable")
    kind, array = builtin_target(name, output.shape, output.dtype, target, operation)
    symbol = tape.input(array)
    if kind == "distribution":
        logits = output if output.ndim == 2 else output.reshape((1,) + output.shape)
        return soft_cross_entropy(logits, symbol), [(symbol, array)]
    if kind == "indices":
        logits = output if output.ndim == 2 else output.reshape((1,) + output.shape)
        return cross_entropy(logits, symbol), [(symbol, array)]
    return mse(output, symbol), [(symbol, array)]


def builtin_target(name: str, shape: tuple[int, ...], dtype: str, target: Any, operation: Any
                   ) -> tuple[str, np.ndarray]:
    """``(kind, array)``: the checked feed a built-in loss takes for ``target`` against an
    output of ``shape`` and ``dtype`` (``"distribution"``, ``"indices"`` or ``"mse"``).
    The one place targets are checked, whether a loss is being recorded or an already
    lowered step only needs the arrays."""
    if name == "cross_entropy":
        if len(shape) in (1, 2) and _is_distribution(target, shape):
            _require_numbers(target, "the distribution target")
            rows = np.asarray(target).reshape((-1, shape[-1]))
            checked = np.stack([check_distribution(row, shape[-1],
                                                   f"the distribution target of row {k}")
                                for k, row in enumerate(rows)])
            return "distribution", checked
        if _is_distribution(target, None):
            raise TrainingError(f"a distribution target must have the logits' shape "
                                f"{list(shape)}, got {list(np.shape(target))}")
        if len(shape) == 1:
            indices = class_indices(target, operation, None)
        elif len(shape) == 2:
            indices = class_indices(target, operation, shape[0])
        else:
            raise ShapeError(f"cross_entropy needs logits [classes] or [batch, classes], got "
                             f"{list(shape)}")
        classes = shape[-1]
        if indices.size and (indices.min() < 0 or indices.max() >= classes):
            raise TrainingError(f"cross_entropy: class index out of range for {classes} "
                                f"classes: {indices.tolist()}")
        return "indices", indices
    if name == "mse":
        try:
            array = np.asarray(target, dtype=dtype)
        except (TypeError, ValueError):
            raise TrainingError(f"mse targets are numbers, got "
                                f"{type(target).__name__}") from None
        if array.shape != tuple(shape):
            raise ShapeError(f"mse needs a target of exactly the output's shape "
                             f"{list(shape)}, got {list(array.shape)}")
        if not np.all(np.isfinite(array)):
            raise TrainingError("mse target holds NaN or infinity")
        return "mse", array
    raise TrainingError(f"unknown loss {name!r}; use one of {list(BUILTIN)} or register it "
                        f"with losses={{{name!r}: fn}}")


__all__ = ["record_loss", "builtin_target", "class_indices", "check_distribution",
           "soft_cross_entropy", "BUILTIN", "LossFn", "DISTRIBUTION_TOLERANCE"]

"""The functional surface (``tc.where``, ``tc.concat``, ...) and the composites.

Composites are built from registry primitives, so they need no rules of their own:
their gradients, lowerings and reference behaviour all come from the primitives. Their
internal broadcasts (a max kept over an axis, subtracted back) are part of their
definition, so they record under NumPy broadcasting even on a
``Tape(broadcast="explicit")``; what the caller combines (``where``, ``maximum``,
``mse``'s two operands) is checked as the tape says.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import DTypeError, ShapeError, TrainingError
from ..core import registry as primitives
from ..core.dtypes import FLOAT_DTYPES
from ..core.ir import canonical_dtype
from .expr import Expr, as_array


def _first_expr(*values: Any) -> Expr:
    for v in values:
        if isinstance(v, Expr):
            return v
    raise TypeError("at least one operand must be an Expr recorded on a tape")


def where(condition: Any, a: Any, b: Any) -> Expr:
    """``a`` where ``condition`` is nonzero, else ``b`` (broadcast like NumPy)."""
    anchor = _first_expr(a, b, condition)
    builder = anchor.builder
    like = a if isinstance(a, Expr) else b if isinstance(b, Expr) else anchor
    x, y = builder.lift(a, like), builder.lift(b, like)
    cond = builder.lift(condition, x)
    return builder.apply("where", [cond, x, y])


def maximum(a: Any, b: Any) -> Expr:
    x = _first_expr(a, b)
    return x.builder.apply("maximum", [x.builder.lift(a, x), x.builder.lift(b, x)])


def minimum(a: Any, b: Any) -> Expr:
    x = _first_expr(a, b)
    return x.builder.apply("minimum", [x.builder.lift(a, x), x.builder.lift(b, x)])


def concat(exprs: Sequence[Any], axis: int = 0) -> Expr:
    """Join tensors along ``axis``."""
    exprs = list(exprs)
    anchor = _first_expr(*exprs)
    lifted = [anchor.builder.lift(x, anchor) for x in exprs]
    axis = primitives.normalize_axis("concat", axis, anchor.ndim)
    return anchor.builder.apply("concat", lifted, {"axis": axis})


def one_hot(indices: Expr, n: int, dtype: Any = "float32") -> Expr:
    """``indices.shape + (n,)`` rows of 0/1 with a 1 at each index."""
    if not isinstance(indices, Expr):
        raise TypeError("one_hot: indices must be an Expr; record them with tape.leaf(...) "
                        "or tape.input(...)")
    return indices.builder.apply("one_hot", [indices],
                                 {"n": int(n), "dtype": canonical_dtype(dtype)})


def stop_gradient(x: Expr) -> Expr:
    """``x`` with a zero gradient (JAX's ``stop_gradient``)."""
    return x.detach()


def logsumexp(x: Expr, axis: Any = None, keepdims: bool = False) -> Expr:
    """``log(sum(exp(x)))`` over ``axis``, shifted by the (detached) max for stability."""
    axes = primitives.normalize_axes("logsumexp", axis, x.ndim)
    with x.builder.broadcasting("numpy"):
        shift = x.max(axis=axes, keepdims=True).detach()
        result = (x - shift).exp().sum(axis=axes, keepdims=True).log() + shift
    if not keepdims:
        result = result.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))
    return result


def log_softmax(x: Expr, axis: int = -1) -> Expr:
    with x.builder.broadcasting("numpy"):
        return x - logsumexp(x, axis=axis, keepdims=True)


def softmax(x: Expr, axis: int = -1) -> Expr:
    with x.builder.broadcasting("numpy"):
        shifted = (x - x.max(axis=axis, keepdims=True).detach()).exp()
        return shifted / shifted.sum(axis=axis, keepdims=True)


#: how far (absolute, summed in float64) a probability target's row may be from one
DISTRIBUTION_TOLERANCE = 1e-6


def cross_entropy(logits: Expr, labels: Any) -> Expr:
    """Mean over the batch of the cross-entropy of ``logits`` (``[batch, classes]``)
    against ``labels``, as ``torch.nn.functional.cross_entropy``: integer class indices
    ``[batch]`` give ``-log softmax(logits)[label]``; a float probability target of the
    logits' shape gives ``-sum(target * log softmax(logits))`` per row. A target given
    as values (an array, a list, ``tape.leaf``) is checked: finite, nonnegative, each
    row summing to one within ``DISTRIBUTION_TOLERANCE``; a fed ``tape.input`` target is
    a run-time value, which the op cannot see at record time."""
    if logits.ndim != 2:
        raise ShapeError(f"cross_entropy: logits must be [batch, classes], got "
                         f"{list(logits.shape)}")
    if not isinstance(labels, Expr):
        if np.asarray(labels).dtype.kind == "b":
            raise DTypeError("cross_entropy: a bool target is neither class indices nor "
                             "probabilities; pass integer indices or float rows summing to 1")
        array = as_array(labels)
        if array.dtype.kind == "f":
            _check_probabilities(array, logits.shape)
            array = array.astype(logits.dtype)
        labels = logits.builder.constant(array)
    if labels.dtype in FLOAT_DTYPES:
        return _soft_cross_entropy(logits, labels)
    if labels.dtype not in ("int32", "int64"):
        raise DTypeError(f"cross_entropy: labels must be integer class indices or a float "
                         f"probability target of the logits' shape, got {labels.dtype}")
    if labels.shape != logits.shape[:1]:
        hint = (" (a probability target of the logits' shape must be float)"
                if labels.shape == logits.shape else "")
        raise ShapeError(f"cross_entropy: {labels.dtype} labels are class indices of shape "
                         f"[{logits.shape[0]}] for logits {list(logits.shape)}, got "
                         f"{list(labels.shape)}{hint}")
    picked = log_softmax(logits, axis=-1) * one_hot(labels, logits.shape[1], logits.dtype)
    with logits.builder.broadcasting("numpy"):
        return -picked.sum() / logits.shape[0]


def _soft_cross_entropy(logits: Expr, target: Expr) -> Expr:
    if target.shape != logits.shape:
        raise ShapeError(f"cross_entropy: a probability target must have the logits' shape "
                         f"{list(logits.shape)}, got {list(target.shape)} (class indices "
                         f"are integers of shape [{logits.shape[0]}])")
    if target.dtype != logits.dtype:
        raise DTypeError(f"cross_entropy: the probability target is {target.dtype} but the "
                         f"logits are {logits.dtype}; cast with .astype({logits.dtype!r})")
    constant = _recorded_constant(target)
    if constant is not None:  # a recorded constant: its values are known, so check them
        _check_probabilities(constant, logits.shape)
    with logits.builder.broadcasting("numpy"):
        return -(log_softmax(logits, axis=-1) * target).sum() / logits.shape[0]


def _recorded_constant(x: Expr) -> np.ndarray | None:
    """The value of ``x`` when it is a constant recorded on a tape (``tape.leaf``), else
    None (an input, a computed value, or an eager builder's value)."""
    nodes = getattr(x.builder, "_nodes", None)
    if nodes is None:
        return None
    node = nodes[x.index]
    return np.asarray(node.value) if node.op == "leaf" and node.value is not None else None


def _check_probabilities(array: np.ndarray, shape: tuple[int, ...]) -> None:
    """``TrainingError`` unless ``array`` is rows of probabilities of ``shape``."""
    if array.shape != tuple(shape):
        raise ShapeError(f"cross_entropy: a probability target must have the logits' shape "
                         f"{list(shape)}, got {list(array.shape)}")
    values = np.asarray(array, dtype=np.float64)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        raise TrainingError(f"cross_entropy: the probability target must be finite and "
                            f"nonnegative; row {row}, class {column} is "
                            f"{values[row, column]!r}")
    sums = values.sum(axis=1)
    off = np.abs(sums - 1.0) > DISTRIBUTION_TOLERANCE
    if off.any():
        row = int(np.argmax(off))
        raise TrainingError(f"cross_entropy: each row of a probability target must sum to "
                            f"one (within {DISTRIBUTION_TOLERANCE}); row {row} sums to "
                            f"{float(sums[row])!r}")


def layer_norm(x: Expr, eps: float = 1e-5) -> Expr:
    """Normalize over the last axis to zero mean and unit variance (no affine part)."""
    with x.builder.broadcasting("numpy"):
        centered = x - x.mean(axis=-1, keepdims=True)
        variance = (centered * centered).mean(axis=-1, keepdims=True)
        return centered / (variance + eps).sqrt()


def gelu(x: Expr) -> Expr:
    """GELU, the tanh approximation."""
    inner = (x + 0.044715 * x * x * x) * math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1 + inner.tanh())


def mse(predicted: Expr, target: Any) -> Expr:
    """Mean squared error over every element."""
    error = predicted - target
    return (error * error).mean()


__all__ = ["DISTRIBUTION_TOLERANCE", "where", "maximum", "minimum", "concat", "one_hot",
           "stop_gradient", "logsumexp", "log_softmax", "softmax", "cross_entropy", "layer_norm",
           "gelu", "mse"]


def _add_composite_methods() -> None:
    """Give ``Expr`` the composites a value is usually the subject of (``x.softmax()``,
    ``logits.cross_entropy(labels)``), as ``expr.py`` gives it the registry's methods."""
    for function in (softmax, log_softmax, logsumexp, layer_norm, gelu, cross_entropy):
        if function.__name__ in vars(Expr):
            raise TypeError(f"Expr already has an attribute {function.__name__!r}")
        setattr(Expr, function.__name__, function)


_add_composite_methods()

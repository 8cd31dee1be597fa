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

from ...errors import DTypeError, ShapeError
from ..core import registry as primitives
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


def cross_entropy(logits: Expr, labels: Any) -> Expr:
    """Mean over the batch of ``-log softmax(logits)[label]``; ``logits`` is
    ``[batch, classes]`` and ``labels`` integer class indices ``[batch]``."""
    if logits.ndim != 2:
        raise ShapeError(f"cross_entropy: logits must be [batch, classes], got "
                         f"{list(logits.shape)}")
    if not isinstance(labels, Expr):
        labels = logits.builder.constant(as_array(labels))
    if labels.dtype not in ("int32", "int64"):
        raise DTypeError(f"cross_entropy: labels must be integer class indices, got "
                         f"{labels.dtype}; cast with .astype('int64')")
    if labels.shape != logits.shape[:1]:
        raise ShapeError(f"cross_entropy: labels {list(labels.shape)} do not match logits "
                         f"{list(logits.shape)}; expected [{logits.shape[0]}]")
    picked = log_softmax(logits, axis=-1) * one_hot(labels, logits.shape[1], logits.dtype)
    with logits.builder.broadcasting("numpy"):
        return -picked.sum() / logits.shape[0]


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


__all__ = ["where", "maximum", "minimum", "concat", "one_hot", "stop_gradient", "logsumexp",
           "log_softmax", "softmax", "cross_entropy", "layer_norm", "gelu", "mse"]


def _add_composite_methods() -> None:
    """Give ``Expr`` the composites a value is usually the subject of (``x.softmax()``,
    ``logits.cross_entropy(labels)``), as ``expr.py`` gives it the registry's methods."""
    for function in (softmax, log_softmax, logsumexp, layer_norm, gelu, cross_entropy):
        if function.__name__ in vars(Expr):
            raise TypeError(f"Expr already has an attribute {function.__name__!r}")
        setattr(Expr, function.__name__, function)


_add_composite_methods()

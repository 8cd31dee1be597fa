"""Recording random draws: uniform, normal, Bernoulli, categorical, and dropout.

Each function records one random primitive (``core/registry.py``, kind ``random``) keyed by
``tape.random_key()``; the tape gives the node its own range of counter blocks, so two
draws never share numbers. Arguments are checked here, before anything is recorded:
a bad ``p``, temperature, ``top_k`` or ``top_p`` raises ``RandomError`` naming it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from ...errors import RandomError, TensorCodeError
from ..core import registry as primitives
from ..core.ir import Type, canonical_dtype
from .expr import Expr
from .tape import Recorder


def _tape_of(key: Any) -> Recorder:
    if not isinstance(key, Expr) or not isinstance(key.builder, Recorder):
        raise TensorCodeError(f"a random draw needs the recording's key from "
                              f"tape.random_key(), got {key!r}")
    return key.builder


def _draw(op: str, key: Expr, inputs: Sequence[Expr], out: Type, attrs: dict[str, Any]
          ) -> Expr:
    tape = _tape_of(key)
    primitives.REGISTRY[op].infer([key.type, *(x.type for x in inputs)],
                                  {**attrs, "shape": out.shape, "dtype": out.dtype})
    offset = tape.reserve_draws(primitives.random_blocks(op, out))
    return tape.apply(op, [key, *inputs], {**attrs, "offset": offset})


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    result = tuple(int(d) for d in shape)
    if any(d < 0 for d in result):
        raise RandomError(f"a draw's shape must have non-negative sizes, got {list(result)}")
    return result


def random_uniform(key: Expr, shape: Any, dtype: Any = "float32") -> Expr:
    """Uniform draws in [0, 1) (float32: 24 random bits, float64: 53)."""
    out = Type(_shape(shape), canonical_dtype(dtype))
    return _draw("random_uniform", key, [], out, {"shape": out.shape, "dtype": out.dtype})


def random_normal(key: Expr, shape: Any, dtype: Any = "float32") -> Expr:
    """Standard normal draws (Box-Muller in float64, rounded to ``dtype``)."""
    out = Type(_shape(shape), canonical_dtype(dtype))
    return _draw("random_normal", key, [], out, {"shape": out.shape, "dtype": out.dtype})


def check_probability(name: str, p: Any, upper_open: bool) -> float:
    """``p`` as a float in [0, 1) (``upper_open``) or [0, 1], else ``RandomError``."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not math.isfinite(float(p)):
        raise RandomError(f"{name} must be a finite number, got {p!r}")
    value = float(p)
    if value < 0 or value > 1 or (upper_open and value == 1):
        raise RandomError(f"{name} must be in [0, {'1)' if upper_open else '1]'}, got {value!r}")
    return value


def bernoulli(key: Expr, p: Any, shape: Any, dtype: Any = "float32") -> Expr:
    """1 with probability ``p`` in [0, 1], else 0 (a 32-bit word below ``p * 2**32``)."""
    value = check_probability("bernoulli p", p, upper_open=False)
    out = Type(_shape(shape), canonical_dtype(dtype))
    return _draw("bernoulli", key, [], out, {"shape": out.shape, "dtype": out.dtype,
                                             "p": value})


def check_sampling(temperature: Any, top_k: Any, top_p: Any) -> tuple[float, int, float]:
    """The sampling options as ``(temperature, top_k or 0, top_p)``; ``RandomError``
    names the first that is out of range."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or \
            not math.isfinite(float(temperature)) or float(temperature) <= 0:
        raise RandomError(f"temperature must be a finite number > 0, got {temperature!r}")
    k = 0
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1:
            raise RandomError(f"top_k must be an integer >= 1 (or None), got {top_k!r}")
        k = int(top_k)
    p = 1.0
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or \
                not 0 < float(top_p) <= 1:
            raise RandomError(f"top_p must be in (0, 1] (or None), got {top_p!r}")
        p = float(top_p)
    return float(temperature), k, p


def categorical(key: Expr, logits: Expr, temperature: Any = 1.0, top_k: Any = None,
                top_p: Any = None) -> Expr:
    """One int64 index per row of ``logits`` (its last axis the classes), drawn with
    probabilities ``softmax(logits / temperature)`` restricted to the ``top_k`` most
    likely classes and to the smallest set of them whose probability reaches ``top_p``."""
    t, k, p = check_sampling(temperature, top_k, top_p)
    if not isinstance(logits, Expr) or logits.builder is not key.builder:
        raise TensorCodeError("categorical: logits must be recorded on the key's tape")
    out = primitives.REGISTRY["categorical"].infer([key.type, logits.type],
                                                   {"temperature": t})
    return _draw("categorical", key, [logits], out,
                 {"temperature": t, "top_k": k, "top_p": p})


def dropout(x: Expr, p: Any, key: Expr | None = None, training: bool = True) -> Expr:
    """Zero each element of ``x`` with probability ``p`` in [0, 1) and scale the kept
    ones by ``1 / (1 - p)``; the identity (no draw) when not ``training`` or ``p == 0``.
    ``key`` defaults to the recording's ``random_key()``. The gradient flows through
    the kept elements only (the mask multiplies, and carries no gradient itself)."""
    value = check_probability("dropout p", p, upper_open=True)
    if not isinstance(x, Expr) or not isinstance(x.builder, Recorder):
        raise TensorCodeError(f"dropout records on a tape; got {x!r}")
    if not training or value == 0.0:
        return x
    if not x.type.is_float:
        raise RandomError(f"dropout needs a float tensor, got {x.dtype}")
    key = x.builder.random_key() if key is None else key
    keep = bernoulli(key, 1.0 - value, x.shape, x.dtype)
    return x * (keep * (1.0 / (1.0 - value)))


__all__ = ["random_uniform", "random_normal", "bernoulli", "categorical", "dropout",
           "check_probability", "check_sampling"]

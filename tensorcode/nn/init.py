"""Initializers: callables from a shape to an array, deterministic for a seed.

Each initializer owns a ``Generator`` and draws from it on every call, so a module
that initializes several tensors from one initializer gets different (but reproducible)
values for each.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..runtime.random import Generator

Initializer = Callable[..., np.ndarray]


def uniform(seed: int, scale: float = 1.0) -> Initializer:
    """Uniform on ``[-scale, scale)``."""
    generator = Generator(seed)

    def draw(shape: Sequence[int], dtype: Any = "float32") -> np.ndarray:
        return generator.uniform(-scale, scale, shape, dtype)
    return draw


def normal(seed: int, std: float = 1.0) -> Initializer:
    """Normal with mean 0 and standard deviation ``std``."""
    generator = Generator(seed)

    def draw(shape: Sequence[int], dtype: Any = "float32") -> np.ndarray:
        return generator.normal(0.0, std, shape, dtype)
    return draw


def xavier(seed: int) -> Initializer:
    """Glorot/Xavier uniform: limit ``sqrt(6 / (fan_in + fan_out))`` with fan_in the
    first and fan_out the last axis (weights are ``[in, out]``)."""
    generator = Generator(seed)

    def draw(shape: Sequence[int], dtype: Any = "float32") -> np.ndarray:
        shape = tuple(shape)
        fan_in = shape[0] if shape else 1
        fan_out = shape[-1] if shape else 1
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return generator.uniform(-limit, limit, shape, dtype)
    return draw


def zeros() -> Initializer:
    """An initializer that fills with zeros (biases, by convention). The result is one
    zero broadcast to ``shape`` (read-only): a model recorded with it before its values
    are loaded costs no memory for them."""
    def draw(shape: Sequence[int], dtype: Any = "float32") -> np.ndarray:
        return np.broadcast_to(np.zeros((), dtype=dtype), tuple(shape))
    return draw


def ones() -> Initializer:
    """An initializer that fills with ones (scales, by convention)."""
    def draw(shape: Sequence[int], dtype: Any = "float32") -> np.ndarray:
        return np.ones(tuple(shape), dtype=dtype)
    return draw


__all__ = ["uniform", "normal", "xavier", "zeros", "ones", "Initializer"]

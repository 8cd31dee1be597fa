"""The four ways a patch stores one tensor's change, and how each rebuilds the tensor.

``Sparse`` and ``Dense`` store edited values; ``LowRank`` and ``Projection`` store a
structured change (W + a @ b, or removing a direction) that is far smaller than the
tensor it touches. Every rebuild is bit-reproducible on any IEEE-754 machine: the
structured forms compute in float64 with a fixed order of elementwise operations (no
BLAS call whose summation order depends on the library), then cast to the tensor's
dtype, so the edited hash recorded when the patch was made is the hash on apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import PatchError


def _float_matrix(name: str, value: Any, what: str) -> np.ndarray:
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise PatchError(f"{what} of {name} must be numbers, got {type(value).__name__}") from None
    if not np.all(np.isfinite(array)):
        raise PatchError(f"{what} of {name} contains non-finite numbers")
    return array


def _require_matrix(form: str, shape: tuple[int, ...], dtype: np.dtype, name: str) -> None:
    if len(shape) != 2:
        raise PatchError(f"the {form} form needs a rank-2 tensor, but {name!r} has shape "
                         f"{list(shape)}; use diff() or a sparse/dense edit instead")
    if dtype.kind != "f":
        raise PatchError(f"the {form} form needs a floating tensor, but {name!r} is "
                         f"{dtype.name}")


def _cast_finite(result: np.ndarray, base: np.ndarray, form: str, name: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        cast = result.astype(base.dtype)
    if np.any(~np.isfinite(cast) & np.isfinite(base)):
        raise PatchError(f"the {form} change makes tensor {name!r} overflow {base.dtype.name}; "
                         "use smaller factors")
    return cast


@dataclass(frozen=True, eq=False)
class Sparse:
    """Changed flat (C-order) indices, ascending and unique, and their new values."""

    indices: np.ndarray
    values: np.ndarray
    kind: ClassVar[str] = "sparse"

    def __post_init__(self) -> None:
        indices = np.asarray(self.indices)
        if indices.size and indices.dtype.kind not in "iu":
            raise PatchError(f"sparse indices must be integers, got {indices.dtype}")
        object.__setattr__(self, "indices", indices.astype(np.int64).reshape(-1))
        object.__setattr__(self, "values", np.asarray(self.values).reshape(-1))

    def check(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Raise ``PatchError`` unless this change fits tensor ``name``."""
        size = int(np.prod(shape, dtype=np.int64))
        if self.indices.ndim != 1 or self.values.shape != self.indices.shape:
            raise PatchError(f"sparse change of {name!r}: {self.indices.size} indices but "
                             f"{self.values.size} values")
        if self.indices.size and (self.indices[0] < 0 or self.indices[-1] >= size
                                  or np.any(np.diff(self.indices) <= 0)):
            raise PatchError(f"sparse change of {name!r}: indices must be ascending, unique "
                             f"and within 0..{size - 1}")

    def rebuild(self, base: np.ndarray, name: str) -> np.ndarray:
        """The edited tensor: ``base`` with the listed elements replaced."""
        self.check(name, base.shape, base.dtype)
        result = np.array(base, copy=True).reshape(-1)
        result[self.indices] = self.values.astype(base.dtype)
        return result.reshape(base.shape)

    def stored_numbers(self) -> int:
        """How many numbers the patch file stores for this change."""
        return int(self.indices.size + self.values.size)


@dataclass(frozen=True, eq=False)
class Dense:
    """The whole edited tensor."""

    values: np.ndarray
    kind: ClassVar[str] = "dense"

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", np.asarray(self.values))

    def check(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Raise ``PatchError`` unless this change fits tensor ``name``."""
        if self.values.shape != tuple(shape):
            raise PatchError(f"dense change of {name!r} has shape {list(self.values.shape)}, "
                             f"but the tensor has shape {list(shape)}")

    def rebuild(self, base: np.ndarray, name: str) -> np.ndarray:
        """The edited tensor: the stored values."""
        self.check(name, base.shape, base.dtype)
        return np.array(self.values, dtype=base.dtype, copy=True)

    def stored_numbers(self) -> int:
        """How many numbers the patch file stores for this change."""
        return int(self.values.size)


@dataclass(frozen=True, eq=False)
class LowRank:
    """W + a @ b, with ``a`` rows x r and ``b`` r x cols (stored in float64).

    The product is summed as rank-one terms in the order k = 0 .. r-1 (each an exact
    elementwise outer product added in float64), so every machine rebuilds the same bits.
    """

    a: np.ndarray
    b: np.ndarray
    kind: ClassVar[str] = "lowrank"

    def __post_init__(self) -> None:
        a = _float_matrix("a low-rank change", self.a, "factor a")
        b = _float_matrix("a low-rank change", self.b, "factor b")
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise PatchError(f"low-rank factors must be a (rows x r) and b (r x cols); got a "
                             f"{list(a.shape)} and b {list(b.shape)}")
        if a.shape[1] < 1:
            raise PatchError("low-rank factors need rank r >= 1")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    @property
    def rank(self) -> int:
        """The number of columns of ``a`` (rows of ``b``)."""
        return int(self.a.shape[1])

    def check(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Raise ``PatchError`` unless this change fits tensor ``name``."""
        _require_matrix("lowrank", shape, dtype, name)
        if self.a.shape[0] != shape[0] or self.b.shape[1] != shape[1]:
            raise PatchError(f"low-rank factors a {list(self.a.shape)} and b "
                             f"{list(self.b.shape)} do not fit tensor {name!r} of shape "
                             f"{list(shape)}: a needs {shape[0]} rows and b {shape[1]} columns")

    def rebuild(self, base: np.ndarray, name: str) -> np.ndarray:
        """The edited tensor: ``base + a @ b``."""
        self.check(name, base.shape, base.dtype)
        result = base.astype(np.float64)
        for k in range(self.rank):
            result += np.multiply.outer(self.a[:, k], self.b[k, :])
        return _cast_finite(result, base, "lowrank", name)

    def stored_numbers(self) -> int:
        """How many numbers the patch file stores for this change."""
        return int(self.a.size + self.b.size)


@dataclass(frozen=True, eq=False)
class Projection:
    """W - strength * u (u^T W) along ``axis``, restricted to ``span`` of the other axis.

    ``u`` is ``direction`` normalized (its norm taken with an exactly rounded sum). With
    ``axis=0`` the direction has one entry per row and every column in ``span`` loses
    ``strength`` times its component along ``u``; with ``axis=1`` the roles of rows and
    columns swap. ``strength=1`` removes the direction; ``span=None`` means all of the
    other axis. The dot products run in a fixed order (one row or column at a time).
    """

    direction: np.ndarray
    strength: float = 1.0
    axis: int = 0
    span: tuple[int, int] | None = field(default=None)
    kind: ClassVar[str] = "projection"

    def __post_init__(self) -> None:
        direction = _float_matrix("a projection", self.direction, "the direction")
        if direction.ndim != 1 or direction.size == 0:
            raise PatchError(f"a projection direction must be a non-empty vector, got shape "
                             f"{list(direction.shape)}")
        if not math.fsum(float(d) * float(d) for d in direction) > 0:
            raise PatchError("a projection direction must not be all zeros")
        if isinstance(self.strength, bool) or not isinstance(self.strength, (int, float,
                                                                             np.floating,
                                                                             np.integer)):
            raise PatchError(f"projection strength must be a number, got {self.strength!r}")
        strength = float(self.strength)
        if not math.isfinite(strength):
            raise PatchError(f"projection strength must be finite, got {strength}")
        if self.axis not in (0, 1) or isinstance(self.axis, bool):
            raise PatchError(f"projection axis must be 0 or 1, got {self.axis!r}")
        span = self.span
        if span is not None:
            parts = list(span) if isinstance(span, (tuple, list)) else []
            if (len(parts) != 2 or not all(isinstance(v, (int, np.integer))
                                           and not isinstance(v, bool) for v in parts)
                    or not 0 <= parts[0] < parts[1]):
                raise PatchError(f"projection span must be (start, stop) integers with "
                                 f"0 <= start < stop, got {span!r}")
            span = (int(parts[0]), int(parts[1]))
        object.__setattr__(self, "direction", direction)
        object.__setattr__(self, "strength", strength)
        object.__setattr__(self, "axis", int(self.axis))
        object.__setattr__(self, "span", span)

    def unit(self) -> np.ndarray:
        """The normalized direction ``u``."""
        norm = math.sqrt(math.fsum(float(d) * float(d) for d in self.direction))
        return self.direction / norm

    def check(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Raise ``PatchError`` unless this change fits tensor ``name``."""
        _require_matrix("projection", shape, dtype, name)
        if self.direction.size != shape[self.axis]:
            raise PatchError(f"projection direction has {self.direction.size} entries but axis "
                             f"{self.axis} of tensor {name!r} (shape {list(shape)}) has size "
                             f"{shape[self.axis]}")
        other = shape[1 - self.axis]
        if self.span is not None and self.span[1] > other:
            raise PatchError(f"projection span {list(self.span)} reaches past axis "
                             f"{1 - self.axis} of tensor {name!r}, which has size {other}")

    def rebuild(self, base: np.ndarray, name: str) -> np.ndarray:
        """The edited tensor, with the projection applied to ``base``."""
        self.check(name, base.shape, base.dtype)
        u = self.unit()
        result = base.astype(np.float64)
        other = base.shape[1 - self.axis]
        start, stop = self.span if self.span is not None else (0, other)
        if self.axis == 0:
            block = result[:, start:stop]
            coefficients = np.zeros(stop - start)
            for i in range(block.shape[0]):
                coefficients += u[i] * block[i, :]
            block -= np.multiply.outer(self.strength * u, coefficients)
        else:
            block = result[start:stop, :]
            coefficients = np.zeros(stop - start)
            for j in range(block.shape[1]):
                coefficients += block[:, j] * u[j]
            block -= np.multiply.outer(coefficients, self.strength * u)
        return _cast_finite(result, base, "projection", name)

    def stored_numbers(self) -> int:
        """How many numbers the patch file stores for this change."""
        return int(self.direction.size + 2 + (2 if self.span is not None else 0))


Form = Sparse | Dense | LowRank | Projection
FORMS = {"sparse": Sparse, "dense": Dense, "lowrank": LowRank, "projection": Projection}

@dataclass(frozen=True, eq=False)
class TensorChange:
    """One tensor's entry: what it must be before, what it becomes, and how."""

    shape: tuple[int, ...]
    dtype: str
    base_sha256: str
    edited_sha256: str
    changed: int
    form: Form

    @property
    def size(self) -> int:
        """The number of elements of the changed tensor."""
        return int(np.prod(self.shape, dtype=np.int64))


__all__ = ["Sparse", "Dense", "LowRank", "Projection", "Form", "FORMS", "TensorChange"]

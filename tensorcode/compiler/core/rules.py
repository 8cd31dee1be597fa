"""The rules primitives share: broadcasting, dtype checks, axis normalization, and the
gradient helper that sums a broadcast gradient back to its operand's shape.

They live apart from the registry (``core/registry.py``) so each entry there reads as the
facts of one op; ``primitives`` re-exports them for callers that normalize an axis or
broadcast shapes the way the type rules do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import DTypeError, ShapeError
from .dtypes import FLOAT_DTYPES, INT_DTYPES
from .ir import Type

# ---------------------------------------------------------------------------------------
# type-rule helpers


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcasting rule, with an error that names the op and the shapes."""
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            listed = " and ".join(str(list(s)) for s in shapes)
            raise ShapeError(f"{op}: shapes {listed} do not broadcast "
                             f"(axis {axis - rank} has sizes {sorted(dims)}); "
                             "reshape or broadcast_to one operand")
        result.append(dims.pop() if dims else 1)
    return tuple(result)


def same_dtype(op: str, types: Sequence[Type]) -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        raise DTypeError(f"{op}: operands have dtypes {' and '.join(t.dtype for t in types)}; "
                         "tensor dtypes never mix silently, cast one with .astype(...)")
    return types[0].dtype


def require_float(op: str, t: Type) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise DTypeError(f"{op}: needs a float operand but got {t.dtype}; "
                         "cast with .astype('float32') or .astype('float64')")


def require_int(op: str, what: str, t: Type) -> None:
    if t.dtype not in INT_DTYPES:
        raise DTypeError(f"{op}: {what} must be an integer tensor but got {t.dtype}; "
                         "cast with .astype('int64')")


def normalize_axis(op: str, axis: int, rank: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise ShapeError(f"{op}: axis must be an int, got {axis!r}")
    if rank == 0:
        raise ShapeError(f"{op}: axis {axis} does not exist on a scalar (rank 0); a scalar "
                         "has no axis to name, so drop the axis argument")
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: axis {axis} is out of range for rank {rank}")
    return int(axis) % rank


def normalize_axes(op: str, axis: Any, rank: int) -> tuple[int, ...]:
    """``None`` means every axis; an int or a sequence of ints otherwise."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    axes = tuple(sorted({normalize_axis(op, a, rank) for a in axis}))
    if len(axes) != len(tuple(axis)):
        raise ShapeError(f"{op}: axis {tuple(axis)} names an axis twice")
    return axes


# ---------------------------------------------------------------------------------------
# gradient helpers (work on any builder's Expr)


def unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast gradient back to an operand's ``shape``."""
    if g.shape == shape:
        return g
    lead = len(g.shape) - len(shape)
    axes = list(range(lead))
    axes += [lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1]
    if axes:
        g = g.sum(axis=tuple(axes))
    return g.reshape(shape) if g.shape != shape else g


def keepdims_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


__all__ = ["broadcast_shapes", "same_dtype", "require_float", "require_int", "normalize_axis",
           "normalize_axes", "unbroadcast", "keepdims_shape"]

"""Numba intrinsics the generated plan code imports (only when it uses them)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, types
from numba.core.extending import intrinsic


@intrinsic
def bitcast(typingctx, x, to):
    """The bits of scalar ``x`` read as the NumPy scalar type ``to`` of the same width
    (the registry's ``bitcast``): one LLVM ``bitcast``, which vectorizes."""
    if not isinstance(to, types.NumberClass) or to.instance_type.bitwidth != x.bitwidth:
        return None
    target = to.instance_type
    sig = target(x, to)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(target))
    return sig, codegen


@njit(nogil=True, fastmath={"reassoc"})
def row_sum(row: np.ndarray) -> float:
    """The sum of a float row, accumulated in float64 in whatever order LLVM's
    vectorizer picks: the only function compiled with reassociation allowed, so it
    applies to this one loop of adds and to nothing else of a plan (a plan's float32
    approximations rely on the order of their operations). Float32 terms are widened to
    float64, so the order changes the result by far less than the float32 rounding
    that follows."""
    total = 0.0
    for k in range(row.shape[0]):
        total += row[k]
    return total


@njit(nogil=True)
def _has_nan(row: np.ndarray) -> bool:
    found = False
    for k in range(row.shape[0]):
        found |= row[k] != row[k]
    return found


@njit(nogil=True, fastmath={"nnan", "nsz"})
def _max_of_numbers(row: np.ndarray) -> Any:
    best = row[0]
    for k in range(1, row.shape[0]):
        best = row[k] if row[k] > best else best
    return best


@njit(nogil=True, fastmath={"nnan", "nsz"})
def _min_of_numbers(row: np.ndarray) -> Any:
    best = row[0]
    for k in range(1, row.shape[0]):
        best = row[k] if row[k] < best else best
    return best


@njit(nogil=True)
def row_max(row: np.ndarray) -> Any:
    """``np.max`` of a non-empty float row (NaN if any term is NaN), vectorized: the
    scan for NaN and the maximum of a row known to hold none are separate loops, the
    second compiled as free of NaN (it is) and blind to the sign of zero."""
    if _has_nan(row):
        return row.dtype.type(np.nan)
    return _max_of_numbers(row)


@njit(nogil=True)
def row_min(row: np.ndarray) -> Any:
    """``np.min`` of a non-empty float row, as ``row_max``."""
    if _has_nan(row):
        return row.dtype.type(np.nan)
    return _min_of_numbers(row)


__all__ = ["bitcast", "row_max", "row_min", "row_sum"]


#: ``loops.MATVEC_LANES``, the partial sums of a ``dot`` matrix-vector product
_LANES = 16


@intrinsic
def tile_product(typingctx, a, a_at, a_i, a_k, b, b_at, b_k, b_j, out, out_at, ldc, m, k,
                 n):
    """A ``loops.Gemm`` of method ``"tiles"``: the register-tiled product of
    ``backends/tiles.py`` (the llvm backend's own function, emitted into the module Numba
    compiles), over float32 arrays from the given starts, so both backends run the same
    loop and give the same bits."""
    arrays = (a, b, out)
    if not all(isinstance(x, types.Array) and x.dtype == types.float32 for x in arrays):
        return None
    sig = types.void(a, a_at, a_i, a_k, b, b_at, b_k, b_j, out, out_at, ldc, m, k, n)

    def codegen(context, builder, signature, args):
        from ..tiles import TileProducts

        def start(index: int, at: int) -> Any:
            data = context.make_array(signature.args[index])(context, builder,
                                                             args[index]).data
            offset = context.cast(builder, args[at], signature.args[at], types.int64)
            return builder.gep(data, [offset], inbounds=True)

        sizes = [context.cast(builder, args[i], signature.args[i], types.int64)
                 for i in range(len(args)) if i not in (0, 1, 4, 5, 8, 9)]
        a_i, a_k, b_k, b_j, ldc, m, k, n = sizes
        tiles = TileProducts(builder.module)
        operands = (start(0, 1), a_i, a_k, start(4, 5), b_k, b_j, start(8, 9), ldc, m, k, n)
        rows = builder.icmp_signed("==", b_j, context.get_constant(types.int64, 1))
        with builder.if_else(rows) as (contiguous, across):
            with contiguous:
                tiles.call(builder, "float32", *operands, packed=False)
            with across:
                tiles.call(builder, "float32", *operands, packed=True)
        return context.get_dummy_value()
    return sig, codegen


@njit(nogil=True)
def matvec_dot(matrix: np.ndarray, matrix_at: int, ld: int, vector: np.ndarray,
               vector_at: int, out: np.ndarray, out_at: int, k: int, n: int) -> None:
    """A ``loops.MatVec`` of form ``dot``: each output the dot product of a matrix row
    and the vector, summed in 16 lanes (term ``q`` into lane ``q % 16``, in order), then
    the lanes halved 8, 4, 2, 1: the order the llvm backend's vector code computes, so
    both give the same bits. (Rows and the vector as slices: indexing them from 0 lets
    LLVM drop the negative-index checks and vectorize.)"""
    acc = np.empty(_LANES, out.dtype)
    full = k // _LANES * _LANES
    v = vector[vector_at:vector_at + k]
    for j in range(n):
        row = matrix[matrix_at + j * ld:matrix_at + j * ld + k]
        acc[:] = 0
        for q in range(0, full, _LANES):
            w, x = row[q:q + _LANES], v[q:q + _LANES]
            for lane in range(_LANES):
                acc[lane] = acc[lane] + w[lane] * x[lane]
        for q in range(full, k):
            acc[q - full] = acc[q - full] + row[q] * v[q]
        width = _LANES // 2
        while width >= 1:
            for lane in range(width):
                acc[lane] = acc[lane] + acc[lane + width]
            width //= 2
        out[out_at + j] = acc[0]


@njit(nogil=True)
def matvec_axpy(matrix: np.ndarray, matrix_at: int, ld: int, vector: np.ndarray,
                vector_at: int, out: np.ndarray, out_at: int, k: int, n: int) -> None:
    """A ``loops.MatVec`` of form ``axpy``: each output a column of the matrix times the
    vector, its terms added in row order onto zero (over slices, as ``matvec_dot``)."""
    result = out[out_at:out_at + n]
    result[:] = 0
    for q in range(k):
        x = vector[vector_at + q]
        row = matrix[matrix_at + q * ld:matrix_at + q * ld + n]
        for j in range(n):
            result[j] = result[j] + x * row[j]

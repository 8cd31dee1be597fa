"""The LLVM types and small IR idioms every part of the generator shares.

``TYPES`` maps a TensorCode dtype to its LLVM type; ``constant`` makes a constant of a
dtype from a checked number (rounded to the dtype as NumPy rounds it, so a float32
literal here is the same bits as the Numba backend's ``np.float32(...)`` global);
``loop`` opens a counted loop. Every name the generator gives a block, a value or a
function is built here from fixed words and integers: nothing from a node's name, a
file or the user reaches the IR.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from llvmlite import ir

from ...core.dtypes import FLOAT_DTYPES

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()

#: the signature of every entry point: (pointers, extents, learning rate) -> status
ENTRY_TYPE = ir.FunctionType(I32, [PTR, PTR, F64])

TYPES: dict[str, ir.Type] = {"float32": F32, "float64": F64, "int32": I32, "int64": I64}


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def constant(value: Any, dtype: str) -> ir.Constant:
    """``value`` as a constant of ``dtype`` (a float rounded once to the dtype, an
    integer wrapped to its width as NumPy's cast does)."""
    if is_float(dtype):
        return ir.Constant(TYPES[dtype], float(np.dtype(dtype).type(float(value))))
    return ir.Constant(TYPES[dtype], int(np.array(int(value)).astype(dtype)))


def i64(value: int) -> ir.Constant:
    return ir.Constant(I64, int(value))


def i32(value: int) -> ir.Constant:
    return ir.Constant(I32, int(value))


@contextlib.contextmanager
def loop(b: ir.IRBuilder, n: Any, name: str = "i") -> Iterator[ir.Value]:
    """``for i in range(n)`` (``n`` an i64 value or int): yields the induction
    variable with the builder positioned in the body; the builder is left after the
    loop."""
    count = i64(n) if isinstance(n, int) else n
    before = b.block
    head = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    end = b.append_basic_block(f"{name}.end")
    b.branch(head)
    b.position_at_end(head)
    index = b.phi(I64, name=name)
    index.add_incoming(i64(0), before)
    b.cbranch(b.icmp_signed("<", index, count), body, end)
    b.position_at_end(body)
    yield index
    step = b.add(index, i64(1), flags=["nuw", "nsw"])
    index.add_incoming(step, b.block)
    b.branch(head)
    b.position_at_end(end)


def offset(b: ir.IRBuilder, base: int, terms: list[tuple[int, ir.Value]]) -> ir.Value:
    """``base + sum(stride * index)`` as i64 (zero strides dropped)."""
    value: ir.Value = i64(base)
    for stride, index in terms:
        if stride == 0:
            continue
        term = index if stride == 1 else b.mul(index, i64(stride), flags=["nsw"])
        value = term if isinstance(value, ir.Constant) and value.constant == 0 else \
            b.add(value, term, flags=["nsw"])
    return value


def element(b: ir.IRBuilder, array: ir.Value, dtype: str, index: ir.Value) -> ir.Value:
    """The address of element ``index`` of ``array`` (a pointer to ``dtype``)."""
    return b.gep(array, [index], inbounds=True, source_etype=TYPES[dtype])


def load(b: ir.IRBuilder, array: ir.Value, dtype: str, index: ir.Value) -> ir.Value:
    return b.load(element(b, array, dtype, index), typ=TYPES[dtype])


def store(b: ir.IRBuilder, value: ir.Value, array: ir.Value, dtype: str,
          index: ir.Value) -> None:
    b.store(value, element(b, array, dtype, index))


def convert(b: ir.IRBuilder, value: ir.Value, source: str, target: str) -> ir.Value:
    """``np.<target>(value)`` for a scalar of ``source`` (float to int truncates toward
    zero; integers wrap or sign-extend)."""
    if source == target:
        return value
    to = TYPES[target]
    if is_float(source) and is_float(target):
        return b.fpext(value, to) if target == "float64" else b.fptrunc(value, to)
    if is_float(source):
        return b.fptosi(value, to)
    if is_float(target):
        return b.sitofp(value, to)
    return b.sext(value, to) if target == "int64" else b.trunc(value, to)


__all__ = ["ENTRY_TYPE", "I1", "I8", "I32", "I64", "F32", "F64", "PTR", "TYPES", "constant",
           "i64", "i32", "loop", "offset", "element", "load", "store", "convert", "is_float"]

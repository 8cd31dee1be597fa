"""A ``MatVec`` statement as IR: products with a vector side, streaming the matrix once.

A decode step's matrix products have one row (``x @ W`` with ``x`` of shape ``[1, k]``),
so their time is the time to read ``W`` from memory. These functions read it front to
back, one matrix row after the next (a single sequential stream, which the hardware
prefetcher follows at the core's read bandwidth), with explicit vector instructions,
in exactly the order ``loops.MatVec`` defines (the Numba backend's
``intrinsics.matvec_dot``/``matvec_axpy`` compute the same order in scalar code, so
both give the same bits):

- ``dot`` (an output is a dot product of a matrix row with the vector): one vector of
  ``MATVEC_LANES`` partial sums per row, the row's tail terms added one lane at a time,
  then the lanes halved 8, 4, 2, 1;
- ``axpy`` (an output is a column of the matrix): the outputs accumulate in place in
  ``out`` (which stays in the first-level cache), one matrix row per pass over them.

Reading two or four rows at once (to share the loads of ``out``, or to overlap two
chains of adds) interleaves as many short streams, and measured on a 2-core AMD EPYC
(Zen 4) that halved the rate: one row at a time reads the 768 x 50,257 head at 34 GB/s
and the blocks' 768 x 2304 projections at 31 GB/s, against 33-36 GB/s for a plain sum of
the same bytes. Each function is defined once per module and dtype, internal, over
run-time sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from ...lower.loops import MATVEC_LANES
from .types import I32, I64, PTR, TYPES, constant, element, i64, load, loop, store

#: vectors of the matrix an iteration of the inner loop reads (plans compile with
#: LLVM's loop unroller off; one vector an iteration read at about half the rate)
UNROLL = 4


class MatVecs:
    """The matrix-vector functions of one module, each defined on first use."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module

    def call(self, b: ir.IRBuilder, form: str, dtype: str, matrix: ir.Value, ld: int,
             vector: ir.Value, out: ir.Value, k: int, n: int) -> None:
        """``out[:n] = M @ vector[:k]`` in ``form`` (``loops.MatVec``), the matrix's
        rows ``ld`` elements apart."""
        name = f"matvec_{form}_{dtype}"
        fn = self.module.globals.get(name)
        if fn is None:
            fn = self._dot(name, dtype) if form == "dot" else self._axpy(name, dtype)
        b.call(fn, [matrix, i64(ld), vector, out, i64(k), i64(n)])

    def _function(self, name: str) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(),
                                                      [PTR, I64, PTR, PTR, I64, I64]), name)
        fn.linkage = "internal"
        for k in (0, 2, 3):
            fn.args[k].add_attribute("noalias")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def _dot(self, name: str, dtype: str) -> ir.Function:
        fn, b = self._function(name)
        matrix, ld, vector, out, k, n = fn.args
        vec = ir.VectorType(TYPES[dtype], MATVEC_LANES)
        align = _size(dtype)
        acc = b.alloca(vec)  # promoted to a register
        full = b.udiv(k, i64(MATVEC_LANES))
        tail_at = b.mul(full, i64(MATVEC_LANES))
        with loop(b, n, "j") as j:
            row = element(b, matrix, dtype, b.mul(j, ld))
            b.store(ir.Constant(vec, None), acc)
            def add_terms(at: ir.Value) -> None:
                x = b.load(element(b, vector, dtype, at), typ=vec, align=align)
                w = b.load(element(b, row, dtype, at), typ=vec, align=align)
                b.store(b.fadd(b.load(acc, typ=vec), b.fmul(w, x)), acc)
            _unrolled(b, full, add_terms)
            with loop(b, b.sub(k, tail_at), "t") as t:
                at = b.add(tail_at, t)
                lanes = b.load(acc, typ=vec)
                lane = b.fadd(b.extract_element(lanes, t),
                              b.fmul(load(b, row, dtype, at), load(b, vector, dtype, at)))
                b.store(b.insert_element(lanes, lane, t), acc)
            total = b.load(acc, typ=vec)
            width = MATVEC_LANES // 2
            while width >= 1:
                total = b.fadd(b.shuffle_vector(total, total, _mask(range(width))),
                               b.shuffle_vector(total, total, _mask(range(width, 2 * width))))
                width //= 2
            store(b, b.extract_element(total, ir.Constant(I32, 0)), out, dtype, j)
        b.ret_void()
        return fn

    def _axpy(self, name: str, dtype: str) -> ir.Function:
        fn, b = self._function(name)
        matrix, ld, vector, out, k, n = fn.args
        vec = ir.VectorType(TYPES[dtype], MATVEC_LANES)
        align = _size(dtype)
        full = b.udiv(n, i64(MATVEC_LANES))
        tail_at = b.mul(full, i64(MATVEC_LANES))
        with loop(b, n, "z") as z:
            store(b, constant(0.0, dtype), out, dtype, z)
        with loop(b, k, "q") as q:
            row = element(b, matrix, dtype, b.mul(q, ld))
            x = load(b, vector, dtype, q)
            splat = b.shuffle_vector(b.insert_element(ir.Constant(vec, None), x,
                                                      ir.Constant(I32, 0)),
                                     ir.Constant(vec, None), _mask([0] * MATVEC_LANES))
            def add_row(at: ir.Value, row: ir.Value = row, splat: ir.Value = splat) -> None:
                place = element(b, out, dtype, at)
                w = b.load(element(b, row, dtype, at), typ=vec, align=align)
                b.store(b.fadd(b.load(place, typ=vec, align=align), b.fmul(splat, w)), place,
                        align=align)
            _unrolled(b, full, add_row)
            with loop(b, b.sub(n, tail_at), "e") as e:
                at = b.add(tail_at, e)
                total = b.fadd(load(b, out, dtype, at), b.fmul(x, load(b, row, dtype, at)))
                store(b, total, out, dtype, at)
        b.ret_void()
        return fn


def _unrolled(b: ir.IRBuilder, vectors: ir.Value, body: Callable[[ir.Value], None]) -> None:
    """``body(at)`` for ``at = 0, LANES, 2 * LANES, ...``, ``vectors`` times in order:
    ``UNROLL`` to an iteration, then the rest one at a time."""
    groups = b.udiv(vectors, i64(UNROLL))
    with loop(b, groups, "u") as u:
        first = b.mul(u, i64(UNROLL * MATVEC_LANES))
        for k in range(UNROLL):
            body(b.add(first, i64(k * MATVEC_LANES)))
    with loop(b, b.urem(vectors, i64(UNROLL)), "v") as v:
        body(b.mul(b.add(b.mul(groups, i64(UNROLL)), v), i64(MATVEC_LANES)))


def _mask(lanes: Sequence[int]) -> ir.Constant:
    """A shuffle mask picking ``lanes`` (all zeros: lane 0 everywhere)."""
    return ir.Constant(ir.VectorType(I32, len(lanes)), list(lanes))


def _size(dtype: str) -> int:
    return 4 if dtype == "float32" else 8


__all__ = ["MatVecs"]

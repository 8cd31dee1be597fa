"""A ``Gemm`` of method ``"tiles"`` as LLVM IR: our register-tiled product, which runs
the float32 products of the shapes models use (``loops.tiles_suit``) instead of a BLAS
call. Both compiled backends emit this one function: the llvm renderer into a plan's
module, the Numba backend through an intrinsic (``numba/intrinsics.tile_product``) into
the module Numba compiles, so the two run the same machine loop.

Every output is the chain ``loops.Gemm`` defines for the method (``acc = fma(A(i, q),
B(q, j), acc)`` for ``q`` from 0, starting at zero), so the bits do not depend on the
tile sizes, the vector width or the thread count (``tests/compiler/backends/
test_tiles.py`` checks both vector widths against scalar chains).

The function walks the output in panels of ``PANEL_VECTORS`` vectors of columns; inside
a panel, in tiles of ``rows`` output rows (8 with AVX-512's 32 vector registers, 6 with
AVX2's 16), whose ``rows x PANEL_VECTORS`` accumulators stay in registers for the whole
shared dimension: per step of ``q`` it loads the panel's row of ``B`` once and
broadcasts one element of ``A`` per tile row. The panel of ``B`` stays in the
second-level cache while the tiles walk down ``A``, which is read in place: no packing
of ``A`` and no call, what a BLAS call pays on small shapes. A ``B`` whose columns are
not contiguous (``b_j != 1``: ``x @ W.T``) is first copied, a panel at a time, into a
stack buffer (so ``k`` is bounded: ``MAX_PACKED_DEPTH``). Columns left over from whole
vectors run as scalar chains. The figures against SciPy's OpenBLAS are in
docs/compiler.md ("Products are our own register tiles").
"""

from __future__ import annotations

from typing import TypeAlias

from llvmlite import ir

from ..lower.loops import MAX_PACKED_DEPTH
from .llvm.types import I64, PTR, TYPES, element, i64, loop

#: a size or stride: a number the generator knows, or a value of the function calling
Size: TypeAlias = "int | ir.Value"

#: vectors of columns a tile holds
PANEL_VECTORS = 2


def host_lanes() -> int:
    """float32 lanes of the widest vector register this CPU offers plans (16 with
    AVX-512, 8 otherwise)."""
    import llvmlite.binding as llvm

    return 16 if llvm.get_host_cpu_features().get("avx512f", False) else 8


class TileProducts:
    """The tiled-product functions of one module, each defined on first use."""

    def __init__(self, module: ir.Module, lanes: int | None = None) -> None:
        self.module = module
        self.lanes = lanes or host_lanes()
        self.rows = 8 if self.lanes == 16 else 6

    def call(self, b: ir.IRBuilder, dtype: str, a: ir.Value, a_i: Size, a_k: Size,
             bm: ir.Value, b_k: Size, b_j: Size, out: ir.Value, ldc: Size,
             m: Size, k: Size, n: Size, packed: bool | None = None) -> None:
        """``out[i * ldc + j] = sum over q of A(i, q) * B(q, j)`` with ``A(i, q) =
        a[i * a_i + q * a_k]`` and ``B(q, j) = bm[q * b_k + j * b_j]``; ``packed``: whether
        ``B``'s columns are not contiguous (default: ``b_j != 1``, for a known ``b_j``).

        A product whose ``B`` would be copied but whose ``A`` has fewer rows than ``B``
        has columns (GPT-2's head ``x @ wte.T``: 128 rows, 50,257 columns) runs as its
        transpose ``out.T = B.T @ A.T`` instead, so the copy is of ``A`` (``x``, once per
        panel of its 128 rows) and not of all of ``B``: the same chains, as a product's
        terms commute, so the same bits; the transposed outputs are stored lane by lane."""
        if packed is None:
            packed = not isinstance(b_j, int) or b_j != 1
        c_i, c_j = ldc, 1
        if packed and all(isinstance(x, int) for x in (a_k, m, n)) and a_k == 1 and m < n:
            a, a_i, a_k, bm, b_k, b_j = bm, b_j, b_k, a, a_k, a_i
            m, n, c_i, c_j = n, m, 1, ldc
        strided = not isinstance(c_j, int) or c_j != 1
        name = f"tiles_{'packed' if packed else 'rows'}{'_strided' if strided else ''}_{dtype}"
        fn = self.module.globals.get(name)
        if fn is None:
            fn = self._define(name, dtype, packed, strided)
        b.call(fn, [a, _size(a_i), _size(a_k), bm, _size(b_k), _size(b_j), out, _size(c_i),
                    _size(c_j), _size(m), _size(k), _size(n)])

    def _define(self, name: str, dtype: str, packed: bool, strided: bool) -> ir.Function:
        """The function over ``(a, a_i, a_k, b, b_k, b_j, out, c_i, c_j, m, k, n)``:
        output ``(i, j)`` at ``out[i * c_i + j * c_j]`` (``strided``: ``c_j != 1``)."""
        fn = ir.Function(self.module, ir.FunctionType(
            ir.VoidType(), [PTR, I64, I64, PTR, I64, I64, PTR, I64, I64, I64, I64, I64]),
            name)
        fn.linkage = "internal"
        for index in (0, 3, 6):
            fn.args[index].add_attribute("noalias")
        a, a_i, a_k, bm, b_k, b_j, out, c_i, c_j, m, k, n = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        scalar = TYPES[dtype]
        vec = ir.VectorType(scalar, self.lanes)
        acc = [[b.alloca(vec) for _ in range(PANEL_VECTORS)] for _ in range(self.rows)]
        buffer = b.alloca(scalar, i64(MAX_PACKED_DEPTH * PANEL_VECTORS * self.lanes)) \
            if packed else None
        total = b.alloca(scalar)
        width = self.lanes * PANEL_VECTORS
        suffix = f"v{self.lanes}f{32 if dtype == 'float32' else 64}"
        vector_fma = self.module.declare_intrinsic(f"llvm.fma.{suffix}", (),
                                                   ir.FunctionType(vec, [vec] * 3))

        def panel(j0: ir.Value, vectors: int) -> None:
            """The columns ``j0 .. j0 + vectors * lanes`` of every output row."""
            if buffer is not None:
                columns = vectors * self.lanes
                with loop(b, k, "pq") as q, loop(b, i64(columns), "pj") as j:
                    source = b.add(b.mul(q, b_k), b.mul(b.add(j0, j), b_j))
                    value = b.load(element(b, bm, dtype, source), typ=scalar)
                    b.store(value, element(b, buffer, dtype,
                                           b.add(b.mul(q, i64(columns)), j)))
                base, step = buffer, i64(columns)
            else:
                base, step = element(b, bm, dtype, j0), b_k
            tiles = b.udiv(m, i64(self.rows))
            with loop(b, tiles, "t") as t:
                tile(b.mul(t, i64(self.rows)), self.rows, vectors, base, step, j0)
            with loop(b, b.urem(m, i64(self.rows)), "r") as r:
                tile(b.add(b.mul(tiles, i64(self.rows)), r), 1, vectors, base, step, j0)

        def tile(i0: ir.Value, rows: int, vectors: int, base: ir.Value, step: ir.Value,
                 j0: ir.Value) -> None:
            for r in range(rows):
                for v in range(vectors):
                    b.store(ir.Constant(vec, None), acc[r][v])
            a0 = element(b, a, dtype, b.mul(i0, a_i))
            with loop(b, k, "q") as q:
                row = element(b, base, dtype, b.mul(q, step))
                columns = [b.load(element(b, row, dtype, i64(v * self.lanes)), typ=vec,
                                  align=4 if dtype == "float32" else 8)
                           for v in range(vectors)]
                at = element(b, a0, dtype, b.mul(q, a_k))
                for r in range(rows):
                    x = b.load(element(b, at, dtype, b.mul(i64(r), a_i)), typ=scalar)
                    splat = b.insert_element(ir.Constant(vec, None), x, i64(0))
                    splat = b.shuffle_vector(splat, ir.Constant(vec, None),
                                             ir.Constant(ir.VectorType(ir.IntType(32),
                                                                       self.lanes), None))
                    for v in range(vectors):
                        b.store(b.call(vector_fma, [splat, columns[v],
                                                    b.load(acc[r][v], typ=vec)]), acc[r][v])
            for r in range(rows):
                target = element(b, out, dtype, b.add(b.mul(b.add(i0, i64(r)), c_i),
                                                      b.mul(j0, c_j)))
                for v in range(vectors):
                    value = b.load(acc[r][v], typ=vec)
                    if not strided:
                        b.store(value, element(b, target, dtype, i64(v * self.lanes)),
                                align=4 if dtype == "float32" else 8)
                        continue
                    for lane in range(self.lanes):
                        at = b.mul(i64(v * self.lanes + lane), c_j)
                        b.store(b.extract_element(value, i64(lane)),
                                element(b, target, dtype, at))

        panels = b.udiv(n, i64(width))
        with loop(b, panels, "p") as p:
            panel(b.mul(p, i64(width)), PANEL_VECTORS)
        done = b.mul(panels, i64(width))
        for vectors in range(PANEL_VECTORS - 1, 0, -1):  # whole vectors left over
            fits = b.icmp_signed(">=", b.sub(n, done), i64(vectors * self.lanes))
            with b.if_then(fits):
                panel(done, vectors)
            done = b.select(fits, b.add(done, i64(vectors * self.lanes)), done)
        with loop(b, b.sub(n, done), "cj") as cj:  # columns left over: scalar chains
            j = b.add(done, cj)
            with loop(b, m, "ci") as i:
                b.store(ir.Constant(scalar, 0.0), total)
                with loop(b, k, "cq") as q:
                    x = b.load(element(b, a, dtype, b.add(b.mul(i, a_i), b.mul(q, a_k))),
                               typ=scalar)
                    y = b.load(element(b, bm, dtype, b.add(b.mul(q, b_k), b.mul(j, b_j))),
                               typ=scalar)
                    b.store(b.fma(x, y, b.load(total, typ=scalar)), total)
                b.store(b.load(total, typ=scalar),
                        element(b, out, dtype, b.add(b.mul(i, c_i), b.mul(j, c_j))))
        b.ret_void()
        return fn


def _size(value: Size) -> ir.Value:
    return i64(value) if isinstance(value, int) else value


__all__ = ["PANEL_VECTORS", "TileProducts", "host_lanes"]

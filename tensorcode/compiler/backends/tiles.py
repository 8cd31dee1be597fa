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
stack buffer (so ``k`` is bounded: ``MAX_PACKED_DEPTH``), or the product runs as its
transpose when ``A`` is the smaller side (``call``). Columns left over from whole vectors
are one more vector with its lanes past the last column masked off. The figures against
SciPy's OpenBLAS are in docs/compiler.md ("Products are our own register tiles").
"""

from __future__ import annotations

from typing import TypeAlias

from llvmlite import ir

from ..lower.statements import MAX_PACKED_DEPTH, vector_lanes
from .llvm.types import I32, I64, PTR, TYPES, element, i32, i64, loop

#: a size or stride: a number the generator knows, or a value of the function calling
Size: TypeAlias = "int | ir.Value"

#: vectors of columns a tile holds
PANEL_VECTORS = 2


class TileProducts:
    """The tiled-product functions of one module, each defined on first use."""

    def __init__(self, module: ir.Module, lanes: int | None = None) -> None:
        self.module = module
        self.lanes = lanes or vector_lanes()
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
        sizes = [i64(x) if isinstance(x, int) else x
                 for x in (a_i, a_k, b_k, b_j, c_i, c_j, m, k, n)]
        b.call(fn, [a, *sizes[:2], bm, *sizes[2:4], out, *sizes[4:]])

    def _intrinsic(self, name: str, result: ir.Type, arguments: list[ir.Type]) -> ir.Function:
        found = self.module.globals.get(name)
        return found if found is not None else ir.Function(
            self.module, ir.FunctionType(result, arguments), name)

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
        align = 4 if dtype == "float32" else 8
        acc = [[b.alloca(vec) for _ in range(PANEL_VECTORS)] for _ in range(self.rows)]
        buffer = b.alloca(scalar, i64(MAX_PACKED_DEPTH * PANEL_VECTORS * self.lanes)) \
            if packed else None
        width = self.lanes * PANEL_VECTORS
        suffix = f"v{self.lanes}f{32 if dtype == 'float32' else 64}"
        masks = ir.VectorType(ir.IntType(1), self.lanes)
        vector_fma = self._intrinsic(f"llvm.fma.{suffix}", vec, [vec] * 3)
        masked_load = self._intrinsic(f"llvm.masked.load.{suffix}.p0", vec, [PTR, I32, masks, vec])
        masked_store = self._intrinsic(f"llvm.masked.store.{suffix}.p0", ir.VoidType(),
                                       [vec, PTR, I32, masks])
        lane_numbers = ir.Constant(ir.VectorType(I64, self.lanes), list(range(self.lanes)))

        def splat(value: ir.Value, ty: ir.Type) -> ir.Value:
            one = b.insert_element(ir.Constant(ty, None), value, i64(0))
            return b.shuffle_vector(one, ir.Constant(ty, None),
                                    ir.Constant(ir.VectorType(I32, self.lanes), None))

        def panel(j0: ir.Value, vectors: int, valid: ir.Value | None = None) -> None:
            """The columns ``j0 .. j0 + vectors * lanes`` of every output row; ``valid``:
            how many of the last vector's lanes are columns (the rest are masked off)."""
            columns = vectors * self.lanes
            if buffer is not None:
                count = i64(columns) if valid is None else \
                    b.add(i64(columns - self.lanes), valid)
                with loop(b, k, "pq") as q, loop(b, count, "pj") as j:
                    source = b.add(b.mul(q, b_k), b.mul(b.add(j0, j), b_j))
                    value = b.load(element(b, bm, dtype, source), typ=scalar)
                    b.store(value, element(b, buffer, dtype,
                                           b.add(b.mul(q, i64(columns)), j)))
                base, step = buffer, i64(columns)
            else:
                base, step = element(b, bm, dtype, j0), b_k
            mask = None if valid is None else \
                b.icmp_unsigned("<", lane_numbers, splat(valid, ir.VectorType(I64, self.lanes)))
            tiles = b.udiv(m, i64(self.rows))
            with loop(b, tiles, "t") as t:
                tile(b.mul(t, i64(self.rows)), self.rows, vectors, base, step, j0, mask)
            with loop(b, b.urem(m, i64(self.rows)), "r") as r:
                tile(b.add(b.mul(tiles, i64(self.rows)), r), 1, vectors, base, step, j0, mask)

        def tile(i0: ir.Value, rows: int, vectors: int, base: ir.Value, step: ir.Value,
                 j0: ir.Value, mask: ir.Value | None) -> None:
            last = vectors - 1 if mask is not None else -1  # the masked vector, if any
            for r in range(rows):
                for v in range(vectors):
                    b.store(ir.Constant(vec, None), acc[r][v])
            a0 = element(b, a, dtype, b.mul(i0, a_i))
            with loop(b, k, "q") as q:
                row = element(b, base, dtype, b.mul(q, step))
                places = [element(b, row, dtype, i64(v * self.lanes)) for v in range(vectors)]
                columns = [b.call(masked_load, [at, i32(align), mask, ir.Constant(vec, None)])
                           if v == last else b.load(at, typ=vec, align=align)
                           for v, at in enumerate(places)]
                start = element(b, a0, dtype, b.mul(q, a_k))
                for r in range(rows):
                    x = b.load(element(b, start, dtype, b.mul(i64(r), a_i)), typ=scalar)
                    broadcast = splat(x, vec)
                    for v in range(vectors):
                        b.store(b.call(vector_fma, [broadcast, columns[v],
                                                    b.load(acc[r][v], typ=vec)]), acc[r][v])
            for r in range(rows):
                target = element(b, out, dtype, b.add(b.mul(b.add(i0, i64(r)), c_i),
                                                      b.mul(j0, c_j)))
                for v in range(vectors):
                    value = b.load(acc[r][v], typ=vec)
                    if not strided:
                        at = element(b, target, dtype, i64(v * self.lanes))
                        if v == last:
                            b.call(masked_store, [value, at, i32(align), mask])
                        else:
                            b.store(value, at, align=align)
                        continue
                    for lane in range(self.lanes):
                        at = element(b, target, dtype, b.mul(i64(v * self.lanes + lane), c_j))
                        if v != last:
                            b.store(b.extract_element(value, i64(lane)), at)
                            continue
                        with b.if_then(b.extract_element(mask, i64(lane))):
                            b.store(b.extract_element(value, i64(lane)), at)

        panels = b.udiv(n, i64(width))
        with loop(b, panels, "p") as p:
            panel(b.mul(p, i64(width)), PANEL_VECTORS)
        done = b.mul(panels, i64(width))
        for vectors in range(PANEL_VECTORS - 1, 0, -1):  # whole vectors left over
            fits = b.icmp_signed(">=", b.sub(n, done), i64(vectors * self.lanes))
            with b.if_then(fits):
                panel(done, vectors)
            done = b.select(fits, b.add(done, i64(vectors * self.lanes)), done)
        rest = b.sub(n, done)  # fewer columns than a vector: one masked vector
        with b.if_then(b.icmp_signed(">", rest, i64(0))):
            panel(done, 1, rest)
        b.ret_void()
        return fn


__all__ = ["PANEL_VECTORS", "TileProducts"]

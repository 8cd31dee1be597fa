"""The loop program: every kernel of a schedule as loops, loads, stores and scalar ops.

The level every code generator renders (tinygrad's linearized ops and TVM's TIR are the
models, kept small). ``lower(graph, kernels, row_start)`` turns each kernel record of a
schedule (``kernels.py``: fused elementwise with its reductions, matmul, take,
scatter-add, one-hot, concat, pad, copy, random) into one ``LoopKernel`` once, here; a
renderer is then a table of statement kinds and a table of scalar ops, and never sees a
kernel kind.

Values (``Expr``; these and the statements are the classes of ``statements.py``):

- ``Const(value, dtype)``: a number baked into the code;
- ``Ref(name)``: a loop variable, a value a ``Let`` bound, or an accumulator's current
  value;
- ``Index(base, terms)``: ``base + sum(stride * term)``, an element index (int64; zero
  strides are dropped, a stride of 1 is not multiplied);
- ``Load(arena, dtype, index)``: one element of an arena;
- ``Apply(op, args, dtype, operand)``: the registry's elementwise op ``op`` on scalars
  (``dtype`` the result's, ``operand`` operand 0's), rendered by each backend's op table.

Statements (``Stmt``):

- ``Let(name, value)``: bind a value; ``Store(arena, dtype, index, value)``: write one
  element (the value is evaluated before the index);
- ``Loop(var, extent, body, annotations)``: ``for var in range(extent)``; the
  ``Annotations`` (vectorize width, unroll factor, tile size, parallel partition with
  its fixed chunk) are carried for the renderers and the passes that decide them;
- ``Init(name)`` and ``Accumulate(name, combine, value, dtype)``: a register
  accumulator declared by the kernel (``LoopKernel.accumulators``, each with its dtype
  and identity) reset to its identity, and combined with a value by the registry op
  ``combine`` (``add``, ``maximum``, ``minimum``; the value widened to the
  accumulator's dtype first);
- ``Check(value, size, message)``: stop the plan with ``message`` unless
  ``0 <= value < size`` (an index operand's range);
- calls, where a library or a shared routine does the work: ``RowReduce`` (a row of
  terms in scratch reduced by a vectorized routine, binding ``name``), ``Gemm`` (a
  matrix product by BLAS, the way ``np.dot`` calls it), ``MatVec`` (a product with a
  vector operand, streaming the matrix once, in an order fixed here) and ``Sample`` (a
  categorical draw: each row's tokens in sorted order).

Numerics decided here, so every renderer computes the same: a ``MatVec``'s sums run in
its dtype in the order its docstring gives; other float sums and means accumulate in
float64 (integer sums in int64) and round once when stored; a reduction's
identity; the loop order of every kernel; which reductions run in two passes over a row
of scratch (``layout.row_terms``); where a categorical draw's workspace lies in scratch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import registry as primitives
from ..core.dtypes import DTYPES, FLOAT_DTYPES
from ..core.ir import Graph
from . import depth
from .kernels import (
    Arena,
    ConcatKernel,
    CopyKernel,
    FusedKernel,
    Kernel,
    LayerNormKernel,
    MatmulKernel,
    OneHotKernel,
    PadKernel,
    RandomKernel,
    Scalar,
    ScatterAddKernel,
    SoftmaxKernel,
    Strided,
    TakeKernel,
    broadcast_access,
    c_strides,
)
from .layout import ROW_REDUCTION_MIN, coalesce, fused_layout, row_terms
from .random_fills import fill as random_fill
from .schedule import blas_layout
from .statements import (
    MATVEC_LANES,
    MAX_PACKED_DEPTH,
    Accumulate,
    Accumulator,
    Annotations,
    Apply,
    Call,
    Check,
    Const,
    Expr,
    Gemm,
    Index,
    Init,
    Let,
    Load,
    Loop,
    LoopKernel,
    MatVec,
    Ref,
    RowReduce,
    Sample,
    Stmt,
    Store,
    tiles_suit,
)

# ---------------------------------------------------------------------------------------
# reductions: identities and accumulator dtypes, once

#: the registry op a reduction combines its terms with
COMBINE = {"sum": "add", "mean": "add", "max": "maximum", "min": "minimum"}


def identity(op: str, dtype: str) -> Const:
    """The identity of reduction ``op`` in ``dtype``: 0, or the lowest (highest) value
    for a max (min): -inf/inf for floats, the integer range's end otherwise."""
    if op in ("sum", "mean"):
        return Const(0, dtype)
    if dtype in FLOAT_DTYPES:
        return Const(-np.inf if op == "max" else np.inf, dtype)
    info = np.iinfo(dtype)
    return Const(int(info.min if op == "max" else info.max), dtype)


def accumulator_dtype(op: str, dtype: str) -> str:
    """A register accumulator's dtype: float64 for a float sum or mean, int64 for an
    integer one, the reduction's own for max and min."""
    if op in ("sum", "mean"):
        return "float64" if dtype in FLOAT_DTYPES else "int64"
    return dtype


# ---------------------------------------------------------------------------------------
# lowering


def index_message(kind: str, size: int) -> str:
    """The error of an index out of range in a ``kind`` kernel over an axis of ``size``."""
    return f"{kind}: an index is out of range for an axis of size {size}"


def _affine(base: int, strides: Sequence[int], names: Sequence[Expr]) -> Index:
    return Index(int(base), tuple((int(s), n) for s, n in zip(strides, names)))


def _read(loc: Any, strides: Sequence[int], names: Sequence[Expr]) -> Expr:
    if isinstance(loc, Scalar):
        return Const(loc.value, loc.dtype)
    return Load(loc.arena, loc.dtype, _affine(loc.offset, strides, names))


class _Builder:
    """Statements appended to the innermost open loop."""

    def __init__(self) -> None:
        self.stack: list[list[Stmt]] = [[]]
        self.open_loops: list[tuple[str, int]] = []

    def add(self, stmt: Stmt) -> None:
        self.stack[-1].append(stmt)

    def open(self, var: str, extent: int) -> Ref:
        self.stack.append([])
        self.open_loops.append((var, int(extent)))
        return Ref(var)

    def close(self, count: int = 1) -> None:
        for _ in range(count):
            body = self.stack.pop()
            var, extent = self.open_loops.pop()
            self.add(Loop(var, extent, tuple(body)))

    def nest(self, dims: Sequence[int], prefix: str) -> list[Expr]:
        return [self.open(f"{prefix}{d}", n) for d, n in enumerate(dims)]

    @property
    def body(self) -> tuple[Stmt, ...]:
        assert len(self.stack) == 1
        return tuple(self.stack[0])


class Lowering:
    """Lowers the kernels of one schedule (see ``lower``)."""

    def __init__(self, graph: Graph, row_start: dict[str, int],
                 scratch_start: dict[str, int]) -> None:
        self.g = graph
        self.row_start = row_start
        self.scratch_start = scratch_start

    def kernel(self, kernel: Kernel) -> LoopKernel:
        self.out = _Builder()
        self.accumulators: list[Accumulator] = []
        getattr(self, f"k_{kernel.kind}")(kernel)
        title = f"{kernel.kind} {' '.join('%' + str(i) for i in kernel.nodes)}"
        return LoopKernel(self.out.body, tuple(self.accumulators), tuple(kernel.nodes), title)

    def shape(self, kernel: Kernel, operand: int) -> tuple[int, ...]:
        node = self.g.nodes[kernel.nodes[0]]
        return tuple(self.g.nodes[node.inputs[operand]].type.shape)

    def fill(self, loc: Strided, value: Const) -> None:
        z = self.out.open("z", loc.size)
        self.out.add(Store(loc.arena, loc.dtype, _affine(loc.offset, [1], [z]), value))
        self.out.close()

    # fused elementwise loops and their reductions
    def k_fused(self, kernel: FusedKernel) -> None:
        g, out = self.g, self.out
        layout = fused_layout(g, kernel)
        stores, loads = kernel.stores, kernel.loads
        dims, reductions, local = layout.dims, layout.reductions, layout.local
        for r in reductions:
            if r not in local:  # accumulated in place: the stores start at the identity
                node = g.nodes[r]
                self.fill(stores[r], identity(node.op, node.type.dtype))
        opens: dict[int, list[int]] = {}
        for r, d in local.items():
            opens.setdefault(d, []).append(r)
        rows: dict[int, tuple[str, int]] = {}
        offsets = dict(self.row_start)
        for r, dtype in row_terms(g, layout):
            start = offsets.get(dtype, 0)
            offsets[dtype] = start + dims[-1]
            rows[r] = (dtype, start)
        for r in local:
            if r not in rows:
                node = g.nodes[r]
                acc = accumulator_dtype(node.op, node.type.dtype)
                self.accumulators.append(
                    Accumulator(f"a{r}", acc, identity(node.op, acc)))
        names: list[Expr] = []

        def open_level(d: int) -> None:
            for r in opens.get(d, []):
                if r not in rows:
                    out.add(Init(f"a{r}"))

        def close_level(d: int) -> None:
            for r in opens.get(d, []):
                node = g.nodes[r]
                dtype = node.type.dtype
                if r in rows:
                    row_dtype, start = rows[r]
                    op = "sum" if node.op in ("sum", "mean") else node.op
                    out.add(RowReduce(f"a{r}", op, row_dtype, start, dims[-1]))
                    acc = "float64" if op == "sum" else row_dtype
                else:
                    acc = accumulator_dtype(node.op, dtype)
                value: Expr = Ref(f"a{r}")
                if node.op == "mean" and node.type.is_float:
                    value = Apply("div", (value, Const(float(self._count(r)), acc)), acc, acc)
                value = Apply("astype", (value,), dtype, acc)
                loc = stores[r]
                out.add(Store(loc.arena, dtype,
                              _affine(loc.offset, layout.red_vec[r][:d], names[:d]), value))

        for d in range(len(dims)):
            open_level(d)
            names.append(out.open(f"i{d}", dims[d]))
        open_level(len(dims))
        for j, loc in loads.items():
            if isinstance(loc, Scalar):
                out.add(Let(f"v{j}", Const(loc.value, loc.dtype)))
        for j in layout.load_keys:
            out.add(Let(f"v{j}", _read(loads[j], layout.load_vec[j], names)))
        for i in kernel.nodes:
            node = g.nodes[i]
            dtype = node.type.dtype
            if primitives.is_reduction(node.op):
                x = Ref(f"v{node.inputs[0]}")
                combine = COMBINE[node.op]
                if i in rows:
                    row_dtype, start = rows[i]
                    out.add(Store(Arena("scratch", row_dtype), row_dtype,
                                  Index(start, ((1, names[-1]),)), x))
                elif i in local:
                    out.add(Accumulate(f"a{i}", combine, x, dtype))
                else:
                    loc = stores[i]
                    out.add(Let(f"t{i}", _affine(loc.offset, layout.red_vec[i], names)))
                    old = Load(loc.arena, dtype, Ref(f"t{i}"))
                    out.add(Store(loc.arena, dtype, Ref(f"t{i}"),
                                  Apply(combine, (old, x), dtype, dtype)))
                continue
            operand = g.nodes[node.inputs[0]].type.dtype if node.inputs else dtype
            out.add(Let(f"v{i}", Apply(node.op, tuple(Ref(f"v{j}") for j in node.inputs),
                                       dtype, operand)))
            if i in layout.store_vec:
                loc = stores[i]
                out.add(Store(loc.arena, dtype,
                              _affine(loc.offset, layout.store_vec[i], names), Ref(f"v{i}")))
        close_level(len(dims))
        for d in range(len(dims) - 1, -1, -1):
            out.close()
            names.pop()
            close_level(d)
        for r in reductions:
            node = g.nodes[r]
            if r not in local and node.op == "mean" and node.type.is_float:
                loc, dtype = stores[r], node.type.dtype
                q = out.open("q", loc.size)
                out.add(Let(f"t{r}", _affine(loc.offset, [1], [q])))
                old = Load(loc.arena, dtype, Ref(f"t{r}"))
                count = Const(float(self._count(r)), dtype)
                out.add(Store(loc.arena, dtype, Ref(f"t{r}"),
                              Apply("div", (old, count), dtype, dtype)))
                out.close()

    def _count(self, r: int) -> int:
        node = self.g.nodes[r]
        shape = self.g.nodes[node.inputs[0]].type.shape
        return math.prod(shape[a] for a in node.attr("axis"))

    # copies, concatenation, padding
    def k_copy(self, kernel: CopyKernel) -> None:
        self.copy(kernel.src, kernel.dst)

    def copy(self, src: Any, dst: Strided) -> None:
        vectors = [list(dst.strides)]
        if isinstance(src, Strided):
            vectors.append(list(broadcast_access(src, dst.shape)))
        dims, vecs = coalesce(dst.shape, vectors)
        names = self.out.nest(dims, "i")
        value = _read(src, vecs[1] if len(vecs) > 1 else [], names)
        self.out.add(Store(dst.arena, dst.dtype, _affine(dst.offset, vecs[0], names), value))
        self.out.close(len(dims))

    def k_concat(self, kernel: ConcatKernel) -> None:
        out, axis = kernel.out, kernel.axis
        strides = c_strides(out.shape)
        start = 0
        for src in kernel.ins:
            shape = src.shape if isinstance(src, Strided) else \
                tuple(1 if a == axis else d for a, d in enumerate(out.shape))
            self.copy(src, Strided(out.base, out.offset + start * strides[axis], shape,
                                   strides, out.dtype))
            start += shape[axis]

    def k_pad(self, kernel: PadKernel) -> None:
        out = kernel.out
        self.fill(out, Const(0, out.dtype))
        strides = c_strides(out.shape)
        shape = self.shape(kernel, 0)
        self.copy(kernel.x, Strided(out.base, out.offset + kernel.before * strides[kernel.axis],
                                    shape, strides, out.dtype))

    # gathers and scatters
    def index_value(self, loc: Any, shape: Sequence[int], names: Sequence[Expr],
                    kind: str, size: int) -> Ref:
        """Bind ``ix``, an index operand's element as int64, and check its range."""
        strides = list(loc.strides) if isinstance(loc, Strided) else []
        strides = [0 if n == 1 else st for n, st in zip(shape, strides)]
        self.out.add(Let("ix", Apply("astype", (_read(loc, strides, names),), "int64",
                                     loc.dtype)))
        self.out.add(Check(Ref("ix"), int(size), index_message(kind, int(size))))
        return Ref("ix")

    def k_take(self, kernel: TakeKernel) -> None:
        x, idx, out, axis = kernel.x, kernel.index, kernel.out, kernel.axis
        xshape, ishape = self.shape(kernel, 0), self.shape(kernel, 1)
        pre, post = xshape[:axis], xshape[axis + 1:]
        b = self.out
        names_pre, names_idx = b.nest(pre, "p"), b.nest(ishape, "q")
        ix = self.index_value(idx, ishape, names_idx, kernel.kind, xshape[axis])
        names_post = b.nest(post, "r")
        b.add(Let("o", _affine(out.offset, c_strides(out.shape),
                               names_pre + names_idx + names_post)))
        value: Expr
        if isinstance(x, Scalar):
            value = Const(x.value, x.dtype)
        else:
            xs = [0 if n == 1 else st for n, st in zip(x.shape, x.strides)]
            terms = list(zip(xs[:axis], names_pre)) + [(x.strides[axis], ix)] + \
                list(zip(xs[axis + 1:], names_post))
            value = Load(x.arena, x.dtype, Index(x.offset, tuple(terms)))
        b.add(Store(out.arena, out.dtype, Ref("o"), value))
        b.close(len(pre) + len(ishape) + len(post))

    def k_scatter_add(self, kernel: ScatterAddKernel) -> None:
        values, idx, out = kernel.values, kernel.index, kernel.out
        axis, size = kernel.axis, kernel.size
        gshape, ishape = self.shape(kernel, 0), self.shape(kernel, 1)
        pre, post = gshape[:axis], gshape[axis + len(ishape):]
        self.fill(out, Const(0, out.dtype))
        b = self.out
        names_pre, names_idx = b.nest(pre, "p"), b.nest(ishape, "q")
        ix = self.index_value(idx, ishape, names_idx, kernel.kind, size)
        names_post = b.nest(post, "r")
        gstrides = list(broadcast_access(values, gshape)) if isinstance(values, Strided) else []
        b.add(Let("g", _read(values, gstrides, names_pre + names_idx + names_post)))
        ostrides = c_strides(pre + (size,) + post)
        terms = list(zip(ostrides[:axis], names_pre)) + [(ostrides[axis], ix)] + \
            list(zip(ostrides[axis + 1:], names_post))
        b.add(Let("o", Index(out.offset, tuple(terms))))
        old = Load(out.arena, out.dtype, Ref("o"))
        b.add(Store(out.arena, out.dtype, Ref("o"),
                    Apply("add", (old, Ref("g")), out.dtype, out.dtype)))
        b.close(len(pre) + len(ishape) + len(post))

    def k_one_hot(self, kernel: OneHotKernel) -> None:
        idx, out, n = kernel.index, kernel.out, kernel.n
        ishape = self.shape(kernel, 0)
        self.fill(out, Const(0, out.dtype))
        b = self.out
        names = b.nest(ishape, "q")
        ix = self.index_value(idx, ishape, names, kernel.kind, n)
        row = _affine(out.offset, [s * n for s in c_strides(ishape)], names)
        b.add(Store(out.arena, out.dtype, Apply("add", (row, ix), "int64", "int64"),
                    Const(1, out.dtype)))
        b.close(len(ishape))

    # matrix products
    def k_matmul(self, kernel: MatmulKernel) -> None:
        a, bm, out = kernel.a, kernel.b, kernel.out
        batch, m, kk, n = kernel.batch, kernel.m, kernel.k, kernel.n
        dtype = out.dtype
        b = self.out
        bnames = b.nest(batch, "j")
        b.add(Let("ob", _affine(out.offset, [st * m * n for st in c_strides(batch)], bnames)))

        def batch_offset(loc: Any) -> Expr:
            if isinstance(loc, Scalar):
                return Const(0, "int64")
            lead = len(batch) - (len(loc.shape) - 2)
            strides = [0] * lead + [0 if size == 1 else st for size, st in
                                    zip(loc.shape[:-2], loc.strides[:-2])]
            return _affine(loc.offset, strides, bnames)

        b.add(Let("ab", batch_offset(a)))
        b.add(Let("bb", batch_offset(bm)))
        if kernel.mode == "blas":
            assert isinstance(a, Strided) and isinstance(bm, Strided)
            a_layout, b_layout = _blas_layout(a, m, kk), _blas_layout(bm, kk, n)
            if (m == 1) != (n == 1):
                b.add(_mat_vec(a, a_layout, bm, b_layout, out, m, kk, n))
            else:
                method = "tiles" if tiles_suit(m, kk, n, a_layout, b_layout, dtype) \
                    else "blas"
                b.add(Gemm(a, Ref("ab"), a_layout, bm, Ref("bb"), b_layout, out, Ref("ob"),
                           m, kk, n, method=method))
            b.close(len(batch))
            return

        def add(x: Expr, y: Expr) -> Expr:
            return Apply("add", (x, y), "int64", "int64")

        def mul(x: Expr, y: int) -> Expr:
            return Apply("mul", (x, Const(y, "int64")), "int64", "int64")

        def elem(loc: Any, row: Expr, col: Expr, base: Expr) -> Expr:
            if isinstance(loc, Scalar):
                return Const(loc.value, loc.dtype)
            sr, sc = loc.strides[-2], loc.strides[-1]
            index = base
            if loc.shape[-2] != 1 and sr:
                index = add(index, mul(row, sr) if sr != 1 else row)
            if loc.shape[-1] != 1 and sc:
                index = add(index, mul(col, sc) if sc != 1 else col)
            return Load(loc.arena, loc.dtype, index)

        def target(i: Expr, j: Expr) -> Expr:
            return add(Ref("ob"), add(mul(i, n), j))

        def accumulate(product: Expr) -> None:
            b.add(Let("t", target(Ref("mi"), Ref("mj"))))
            b.add(Let("p", product))
            old = Load(out.arena, dtype, Ref("t"))
            b.add(Store(out.arena, dtype, Ref("t"), Apply("add", (old, Ref("p")), dtype, dtype)))

        zero = Const(0, dtype)
        ab, bb = Ref("ab"), Ref("bb")
        if kernel.mode == "kij":
            mi = b.open("mi", m * n)
            b.add(Store(out.arena, dtype, add(Ref("ob"), mi), zero))
            b.close()
            mk, mi, mj = b.open("mk", kk), b.open("mi", m), b.open("mj", n)
            accumulate(Apply("mul", (elem(a, mi, mk, ab), elem(bm, mk, mj, bb)), dtype, dtype))
            b.close(3)
        else:  # ikj
            mi = b.open("mi", m)
            mj = b.open("mj", n)
            b.add(Store(out.arena, dtype, target(mi, mj), zero))
            b.close()
            mk = b.open("mk", kk)
            b.add(Let("av", elem(a, mi, mk, ab)))
            mj = b.open("mj", n)
            accumulate(Apply("mul", (Ref("av"), elem(bm, mk, mj, bb)), dtype, dtype))
            b.close(3)
        b.close(len(batch))

    # a layer norm, found by pattern
    def k_layer_norm(self, kernel: LayerNormKernel) -> None:
        """One row at a time: its mean, its variance and the normalized row (times the
        gain, plus the bias), each member computed as the fused kernels compute it (the
        same ops, sums in float64, two passes over a row of scratch from
        ``ROW_REDUCTION_MIN`` terms), so the results are theirs bit for bit; the row is
        read three times, from cache, and members are stored only where read later."""
        g, b, match = self.g, self.out, kernel.match
        dtype = g.nodes[match.normalized].type.dtype
        n, shape = kernel.row, tuple(kernel.space)
        two_pass = n >= ROW_REDUCTION_MIN
        start = self.row_start.get(dtype, 0)
        if not two_pass:
            for name in ("am", "av"):
                self.accumulators.append(Accumulator(name, "float64", Const(0, "float64")))
        rows = _Rows(shape, [kernel.x, kernel.gain, kernel.bias, *kernel.stores.values()])
        outer = b.nest(rows.dims, "p")
        values: dict[int, Expr] = {match.eps: Const(kernel.eps.value, kernel.eps.dtype)}

        def read(loc: Any, i: Expr) -> Expr:
            if isinstance(loc, Scalar):
                return Const(loc.value, loc.dtype)
            return Load(loc.arena, loc.dtype, rows.index(loc, outer, i))

        def compute(node: int, i: Expr | None, store: bool = True) -> None:
            op = g.nodes[node]
            value = Apply(op.op, tuple(values[j] for j in op.inputs), dtype, dtype)
            b.add(Let(f"v{node}", value))
            values[node] = Ref(f"v{node}")
            loc = kernel.stores.get(node)
            if loc is not None and store:
                b.add(Store(loc.arena, dtype, rows.index(loc, outer, i), values[node]))

        def mean(node: int, term: int | None, name: str) -> None:
            """``node``, the mean of the row of ``term`` (x itself when None)."""
            if not two_pass:
                b.add(Init(name))
            i = b.open("i", n)
            values[match.x] = read(kernel.x, i)
            if term is not None:
                compute(match.centered, i)
                compute(term, i)
            value = values[match.x if term is None else term]
            if two_pass:
                b.add(Store(Arena("scratch", dtype), dtype, Index(start, ((1, i),)), value))
            else:
                b.add(Accumulate(name, "add", value, dtype))
            b.close()
            if two_pass:
                b.add(RowReduce(name, "sum", dtype, start, n))
            total = Apply("div", (Ref(name), Const(float(n), "float64")), "float64", "float64")
            b.add(Let(f"v{node}", Apply("astype", (total,), dtype, "float64")))
            values[node] = Ref(f"v{node}")
            loc = kernel.stores.get(node)
            if loc is not None:
                b.add(Store(loc.arena, dtype, rows.index(loc, outer, None), values[node]))

        mean(match.mean, None, "am")
        mean(match.variance, match.square, "av")
        compute(match.shifted, None)
        compute(match.deviation, None)
        i = b.open("i", n)
        values[match.x] = read(kernel.x, i)
        compute(match.centered, i, store=False)  # stored by the variance's pass
        compute(match.normalized, i)
        for node, vector in ((match.scaled, kernel.gain), (match.shifted_out, kernel.bias)):
            if node >= 0:
                other = match.gain if node == match.scaled else match.bias
                values[other] = read(vector, i)
                compute(node, i)
        b.close()
        b.close(len(outer))

    # a softmax or log-sum-exp, found by pattern
    def k_softmax(self, kernel: SoftmaxKernel) -> None:
        """One row at a time: its maximum, the exponentials and their sum, then the
        probabilities (or ``log(sum) + max``), each member computed as the fused
        kernels compute it (the same ops and reductions, in two passes over a row of
        scratch from ``ROW_REDUCTION_MIN`` terms), so the results are theirs bit for
        bit. With a row in scratch the exponentials stay there for the division."""
        g, b, match = self.g, self.out, kernel.match
        dtype = g.nodes[match.total].type.dtype
        n, shape = kernel.row, tuple(kernel.space)
        two_pass = n >= ROW_REDUCTION_MIN
        start = self.row_start.get(dtype, 0)
        row = Arena("scratch", dtype)
        if not two_pass:
            self.accumulators += [Accumulator("am", dtype, identity("max", dtype)),
                                  Accumulator("at", "float64", Const(0, "float64"))]
        rows = _Rows(shape, [kernel.z, *kernel.stores.values()])
        outer = b.nest(rows.dims, "p")
        values: dict[int, Expr] = {}

        def read(i: Expr) -> Expr:
            loc = kernel.z
            if isinstance(loc, Scalar):
                return Const(loc.value, loc.dtype)
            return Load(loc.arena, loc.dtype, rows.index(loc, outer, i))

        def bind(node: int, value: Expr, i: Expr | None, store: bool = True) -> None:
            b.add(Let(f"v{node}", value))
            values[node] = Ref(f"v{node}")
            loc = kernel.stores.get(node)
            if loc is not None and store:
                b.add(Store(loc.arena, dtype, rows.index(loc, outer, i), values[node]))

        def compute(node: int, i: Expr | None, store: bool = True) -> None:
            op = g.nodes[node]
            bind(node, Apply(op.op, tuple(values[j] for j in op.inputs), dtype, dtype), i,
                 store)

        def reduce(node: int, term: Expr, i: Expr, op: str, name: str) -> None:
            if two_pass:
                b.add(Store(row, dtype, Index(start, ((1, i),)), term))
            else:
                b.add(Accumulate(name, COMBINE[op], term, dtype))

        # the maximum
        if not two_pass:
            b.add(Init("am"))
        i = b.open("i", n)
        values[match.z] = read(i)
        reduce(match.peak, values[match.z], i, "max", "am")
        b.close()
        if two_pass:
            b.add(RowReduce("am", "max", dtype, start, n))
        bind(match.peak, Apply("astype", (Ref("am"),), dtype, dtype), None)
        # the exponentials and their sum
        if not two_pass:
            b.add(Init("at"))
        i = b.open("i", n)
        values[match.z] = read(i)
        compute(match.shifted, i)
        compute(match.exps, i)
        reduce(match.total, values[match.exps], i, "sum", "at")
        b.close()
        if two_pass:
            b.add(RowReduce("at", "sum", dtype, start, n))
        bind(match.total, Apply("astype", (Ref("at"),), dtype, "float64"), None)
        if match.lse >= 0:
            compute(match.log_total, None)
            compute(match.lse, None)
        if match.probabilities >= 0:
            i = b.open("i", n)
            if two_pass:  # the row holds the exponentials
                values[match.exps] = Load(row, dtype, Index(start, ((1, i),)))
            else:
                values[match.z] = read(i)
                compute(match.shifted, i, store=False)
                compute(match.exps, i, store=False)
            compute(match.probabilities, i)
            b.close()
        b.close(len(outer))

    # random draws
    def k_random(self, kernel: RandomKernel) -> None:
        """The Philox stream's loops (``random_fills.py``); a categorical draw fills its
        rows' uniforms into scratch that way, then samples each row (``Sample``)."""
        out, key = kernel.out, kernel.key
        assert isinstance(key, Strided) and out.contiguous  # an input; a fresh buffer
        if kernel.op != "categorical":
            for stmt in random_fill(kernel.op, out, key, int(kernel.offset), kernel.attrs):
                self.out.add(stmt)
            return
        logits = kernel.logits
        assert isinstance(logits, Strided)
        shape = logits.shape
        classes = int(shape[-1])
        room = dict(self.scratch_start)

        def scratch(dtype: str, n: int) -> int:
            at = room.get(dtype, 0)
            room[dtype] = at + n
            return at

        workspace = (scratch("float64", classes), scratch("float64", classes),
                     scratch("int64", classes), scratch("int64", classes))
        rows = out.size
        uniforms = scratch("float64", rows)
        if not logits.contiguous:  # gathered into scratch first
            at = scratch(logits.dtype, math.prod(shape))
            copy = Strided(Arena("scratch", logits.dtype), at, shape, c_strides(shape),
                           logits.dtype)
            self.copy(logits, copy)
            logits = copy
        into = Strided(Arena("scratch", "float64"), uniforms, (rows,), (1,), "float64")
        for stmt in random_fill("random_uniform", into, key, int(kernel.offset), {}):
            self.out.add(stmt)
        self.out.add(Sample(out, logits, uniforms, dict(kernel.attrs), workspace))


class _Rows:
    """The row loops of a kernel over the last axis of ``shape``: the leading axes
    coalesced where every location walks them contiguously (``coalesce``), and each
    location's element index from the row loops' names and the position in the row."""

    def __init__(self, shape: tuple[int, ...], locs: Sequence[Any]) -> None:
        self.shape = shape
        self.strided = [loc for loc in locs if isinstance(loc, Strided)]
        vectors = [self._full(loc) for loc in self.strided]
        self.dims, outer = coalesce(shape[:-1], [v[:-1] for v in vectors])
        self.outer = {id(loc): o for loc, o in zip(self.strided, outer)}
        self.last = {id(loc): v[-1] for loc, v in zip(self.strided, vectors)}

    def _full(self, loc: Strided) -> list[int]:
        if len(loc.shape) == len(self.shape):
            return [0 if d == 1 and t != 1 else st
                    for d, t, st in zip(loc.shape, self.shape, loc.strides)]
        return list(broadcast_access(loc, self.shape))

    def index(self, loc: Strided, names: Sequence[Expr], i: Expr | None) -> Index:
        """Element ``i`` of ``loc``'s row (its one element per row when ``i`` is None)."""
        strides = list(self.outer[id(loc)]) + ([self.last[id(loc)]] if i is not None else [])
        return _affine(loc.offset, strides, list(names) + ([i] if i is not None else []))


def _mat_vec(a: Strided, a_layout: str, b: Strided, b_layout: str, out: Strided,
             m: int, kk: int, n: int) -> MatVec:
    """A product with one vector side (``m == 1`` or ``n == 1``, not both) as a
    ``MatVec`` over the other side's rows (form ``dot``) or columns (``axpy``), as
    its layout stores them; the operands start at ``ab`` and ``bb``, the output at
    ``ob``."""
    if m == 1:  # vector @ matrix: the outputs are the k x n matrix's columns
        form, ld = ("axpy", n) if b_layout == "C" else ("dot", kk)
        return MatVec(b, Ref("bb"), ld, form, a, Ref("ab"), out, Ref("ob"), kk, n)
    form, ld = ("dot", kk) if a_layout == "C" else ("axpy", m)  # matrix @ vector
    return MatVec(a, Ref("ab"), ld, form, b, Ref("bb"), out, Ref("ob"), kk, m)


def _blas_layout(loc: Strided, rows: int, cols: int) -> str:
    layout = blas_layout(loc, rows, cols)
    assert layout is not None  # the schedule chose BLAS only for such operands
    return layout


def categorical_room(kernel: Kernel) -> dict[str, int]:
    """Scratch a categorical draw needs past the rows (``scratch_sizes``): its scaled
    row, cumulative weights and each row's uniform (float64), the sorted order and the
    merge's workspace (int64), and a contiguous copy of strided logits."""
    if not isinstance(kernel, RandomKernel) or kernel.op != "categorical":
        return {}
    logits = kernel.logits
    assert isinstance(logits, Strided)  # the schedule gives a categorical array logits
    classes = int(logits.shape[-1])
    room = {"float64": 2 * classes + kernel.out.size, "int64": 2 * classes}
    if not logits.contiguous:
        room[logits.dtype] = room.get(logits.dtype, 0) + math.prod(logits.shape)
    return room


def row_room(graph: Graph, kernels: Sequence[Kernel]) -> dict[str, int]:
    """Scratch the reduction rows need (``layout.row_terms``): the most one kernel keeps
    (kernels run one after another, so they share it)."""
    extra: dict[str, int] = {}
    for kernel in kernels:
        if isinstance(kernel, (LayerNormKernel, SoftmaxKernel)) and \
                kernel.row >= ROW_REDUCTION_MIN:
            dtype = kernel.x.dtype if isinstance(kernel, LayerNormKernel) else kernel.z.dtype
            extra[dtype] = max(extra.get(dtype, 0), kernel.row)
        if isinstance(kernel, FusedKernel):
            layout = fused_layout(graph, kernel)
            need: dict[str, int] = {}
            for _, dtype in row_terms(graph, layout):
                need[dtype] = need.get(dtype, 0) + layout.dims[-1]
            for dtype, n in need.items():
                extra[dtype] = max(extra.get(dtype, 0), n)
    return extra


def scratch_sizes(graph: Graph, kernels: Sequence[Kernel], arena: dict[str, int]
                  ) -> dict[str, int]:
    """Elements of each scratch arena the loop programs need, by dtype: the schedule's
    ``arena`` (its buffers), then the rows (``row_room``), then the most any one
    categorical draw (``categorical_room``) or product split along its shared dimension
    (``depth.room``) keeps."""
    sizes = {d: int(n) for d, n in arena.items()}
    for dtype, n in row_room(graph, kernels).items():
        sizes[dtype] = sizes.get(dtype, 0) + n
    room: dict[str, int] = {}
    for kernel in kernels:
        for dtype, n in (*categorical_room(kernel).items(), *depth.room(kernel).items()):
            room[dtype] = max(room.get(dtype, 0), n)
    for dtype, n in room.items():
        sizes[dtype] = sizes.get(dtype, 0) + n
    return dict(sorted(sizes.items()))


def lower(graph: Graph, kernels: Sequence[Kernel], arena: dict[str, int]
          ) -> tuple[LoopKernel, ...]:
    """Each of ``kernels`` (a schedule's, over ``graph``; ``arena`` the schedule's own
    scratch per dtype, where the rows start) as a ``LoopKernel``."""
    row_start = {d: int(n) for d, n in arena.items()}
    rows = row_room(graph, kernels)
    scratch_start = {d: row_start.get(d, 0) + rows.get(d, 0)
                     for d in set(row_start) | set(rows)}
    lowering = Lowering(graph, row_start, scratch_start)
    return tuple(lowering.kernel(kernel) for kernel in kernels)


def uses_accumulators(stmt: Stmt) -> bool:
    """Whether ``stmt`` (a loop: anything in its body) resets, combines or reads an
    accumulator (an accumulator is read by a ``Ref`` in a ``Store``'s value)."""
    if isinstance(stmt, Loop):
        return any(uses_accumulators(s) for s in stmt.body)
    return isinstance(stmt, (Init, Accumulate))


def _text(e: Expr) -> str:
    if isinstance(e, Const):
        return f"{e.value!r}:{DTYPES[e.dtype]}"
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Index):
        terms = [str(e.base)] if e.base or not e.terms else []
        terms += [_text(t) if s == 1 else f"{_text(t)}*{s}" for s, t in e.terms if s]
        return " + ".join(terms)
    if isinstance(e, Load):
        return f"{e.arena.label}[{_text(e.index)}]"
    return f"{e.op}({', '.join(_text(a) for a in e.args)}):{DTYPES[e.dtype]}"


def describe(kernel: LoopKernel) -> str:
    """The loop kernel as text, one statement a line (what ``docs/compiler.md`` shows)."""
    lines = [f"kernel {kernel.title}"]
    lines += [f"  accumulator {a.name}: {DTYPES[a.dtype]} from {a.identity.value!r}"
              for a in kernel.accumulators]

    def walk(body: Sequence[Stmt], depth: int) -> None:
        pad = "  " * depth
        for s in body:
            if isinstance(s, Loop):
                lines.append(f"{pad}for {s.var} in range({s.extent}):")
                walk(s.body, depth + 1)
            elif isinstance(s, Let):
                lines.append(f"{pad}{s.name} = {_text(s.value)}")
            elif isinstance(s, Store):
                lines.append(f"{pad}{s.arena.label}[{_text(s.index)}] = {_text(s.value)}")
            elif isinstance(s, Init):
                lines.append(f"{pad}{s.name} = identity")
            elif isinstance(s, Accumulate):
                lines.append(f"{pad}{s.name} = {s.combine}({s.name}, {_text(s.value)})")
            elif isinstance(s, Check):
                lines.append(f"{pad}check 0 <= {_text(s.value)} < {s.size}")
            elif isinstance(s, RowReduce):
                lines.append(f"{pad}{s.name} = row_{s.op}(W_{DTYPES[s.dtype]}"
                             f"[{s.start}:{s.start + s.n}])")
            else:
                lines.append(f"{pad}{type(s).__name__.lower()} -> {s.out.arena.label}"
                             f"[{s.out.offset}]")
    walk(kernel.body, 1)
    return "\n".join(lines)


def errors(kernels: Sequence[LoopKernel]) -> list[str]:
    """The distinct ``Check`` messages of ``kernels``, in order (status ``s`` of a plan's
    code is message ``s - 1``)."""
    found: list[str] = []
    for kernel in kernels:
        for s in kernel.statements():
            if isinstance(s, Check) and s.message not in found:
                found.append(s.message)
    return found


__all__ = ["Const", "Ref", "Index", "Load", "Apply", "Expr", "Annotations", "Let", "Store",
           "Loop", "Accumulator", "Init", "Accumulate", "Check", "RowReduce", "Gemm",
           "MatVec", "MATVEC_LANES", "MAX_PACKED_DEPTH", "tiles_suit",
           "Sample", "Stmt", "Call", "LoopKernel", "COMBINE",
           "identity", "accumulator_dtype", "index_message", "lower", "scratch_sizes", "row_room",
           "categorical_room", "errors", "uses_accumulators", "describe"]

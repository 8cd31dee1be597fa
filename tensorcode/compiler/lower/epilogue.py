"""Epilogues: the elementwise kernel after a split matrix product, run inside its blocks.

A product that ``partition.py`` splits into blocks of rows or columns writes its output
one block per chunk, on whichever thread takes the chunk; the elementwise kernel after
it (a bias, an activation, a residual add, the mask a ReLU's gradient keeps) then read
the whole output again in a pass of its own: on one thread when it is small, reading
half of what the other core had just written (W4's ReLU after its first layer took 5.8
us at one thread and 18-25 us at two, 2-core AMD EPYC), or as a run of the pool of its
own. Fused, each chunk applies the epilogue to the block it has just written, while the
block is in that core's cache.

Fused only when the loop program shows it safe (anything else stays as it was):

- the product's kernel is one partitioned loop over blocks (``Let``s, one ``Gemm``) with
  no columns left over for the calling thread, its output a row-major ``m x n`` region
  at a known start;
- the next kernel declares no accumulator and is ``Let``s and one loop over the ``m``
  rows, whose body is ``Let``s and one loop over the ``n`` columns of ``Let``s and
  ``Store``s (no reduction, check or call);
- it reads the product's output only at the element of its own row and column;
- it writes nothing the product reads (its operands), no element of the output but its
  own, and nothing it reads at another element;
- the two kernels bind different names.

Every element is computed from the same values by the same operations, so the results
are the same bits, at any thread count. The fused kernel takes the product's place and
keeps its cost; the elementwise kernel keeps its place with an empty body, so kernel
``k`` of the loop program is still kernel ``k`` of the schedule (the profiler counts the
epilogue's time in the product's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .kernels import Arena, Strided
from .loops import Apply, Expr, Gemm, Index, Let, Load, Loop, LoopKernel, Ref, Stmt, Store
from .partition import expressions, interval, nodes, walk

#: (arena, first element, last element) of what a kernel reads or writes
Region = tuple[Arena, int, int]


def fuse(kernels: Sequence[LoopKernel]) -> tuple[LoopKernel, ...]:
    """``kernels`` with each elementwise kernel that may run inside the blocks of the
    split product before it moved there (see the module doc)."""
    fused = list(kernels)
    for k in range(len(fused) - 1):
        kernel = _fused(fused[k], fused[k + 1])
        if kernel is not None:
            fused[k] = kernel
            fused[k + 1] = replace(fused[k + 1], body=(), accumulators=())
    return tuple(fused)


def _fused(product: LoopKernel, epilogue: LoopKernel) -> LoopKernel | None:
    split = _split_product(product)
    if split is None or epilogue.accumulators:
        return None
    blocks, gemm, start = split
    m, n = gemm.out.shape
    shape = _elementwise(epilogue, m, n)
    if shape is None:
        return None
    top, rows, columns = shape
    names, theirs = _names(product.body), _names(epilogue.body)
    if names & theirs:
        return None
    used = names | theirs
    if not _safe(epilogue, gemm, start, rows.var, columns.var, blocks):
        return None
    if gemm.m * blocks.extent == m and gemm.n == n:  # blocks of rows
        inner = _fresh(rows.var, used)
        first = _shifted(Ref(inner), gemm.m, blocks.var)
        applied: Stmt = Loop(inner, gemm.m, (Let(rows.var, first), *rows.body),
                             replace(rows.annotations, partition=0))
    elif gemm.n * blocks.extent == n and gemm.m == m:  # blocks of columns
        inner = _fresh(columns.var, used)
        first = _shifted(Ref(inner), gemm.n, blocks.var)
        narrow = Loop(inner, gemm.n, (Let(columns.var, first), *columns.body),
                      columns.annotations)
        applied = Loop(rows.var, m, (*rows.body[:-1], narrow),
                       replace(rows.annotations, partition=0))
    else:
        return None
    body = replace(blocks, body=(*blocks.body, *top, applied))
    return replace(product, body=(body,), nodes=product.nodes + epilogue.nodes,
                   title=f"{product.title} + {epilogue.title}")


def _split_product(kernel: LoopKernel) -> tuple[Loop, Gemm, int] | None:
    """The loop of blocks, its ``Gemm`` and the first element of the whole output, when
    ``kernel`` is exactly a split product over a row-major 2-d output."""
    if kernel.accumulators or len(kernel.body) != 1 or not isinstance(kernel.body[0], Loop):
        return None
    blocks = kernel.body[0]
    if not blocks.annotations.partition or not blocks.body:
        return None
    *lets, gemm = blocks.body
    if not isinstance(gemm, Gemm) or not all(isinstance(s, Let) for s in lets):
        return None
    out = gemm.out
    if len(out.shape) != 2 or tuple(out.strides) != (out.shape[1], 1) or \
            not isinstance(out.base, Arena):
        return None
    # out_at is (the Let of the output's start) + (the block's step) * (block variable)
    at = gemm.out_at
    if not (isinstance(at, Apply) and at.op == "add" and isinstance(at.args[0], Ref)):
        return None
    bound = {s.name: s.value for s in lets if isinstance(s, Let)}
    start = bound.get(at.args[0].name)
    if not isinstance(start, Index) or start.terms or start.base != out.offset:
        return None
    return blocks, gemm, start.base


def _elementwise(kernel: LoopKernel, m: int, n: int
                 ) -> tuple[tuple[Let, ...], Loop, Loop] | None:
    """``kernel``'s top-level ``Let``s, its loop over ``m`` rows and the loop over ``n``
    columns inside it, when that is all it is (see the module doc)."""
    if not kernel.body or not isinstance(kernel.body[-1], Loop):
        return None
    top, rows = kernel.body[:-1], kernel.body[-1]
    if rows.extent != m or not rows.body or not isinstance(rows.body[-1], Loop):
        return None
    columns = rows.body[-1]
    if columns.extent != n or columns.annotations.partition:
        return None
    lets = (*top, *rows.body[:-1])
    if not all(isinstance(s, Let) for s in lets) or \
            not all(isinstance(s, (Let, Store)) for s in columns.body):
        return None
    return tuple(s for s in top if isinstance(s, Let)), rows, columns


def _safe(kernel: LoopKernel, gemm: Gemm, start: int, row: str, column: str,
          blocks: Loop) -> bool:
    """Whether ``kernel`` may run block by block inside the product (see the module
    doc): ``row`` and ``column`` are its loop variables."""
    m, n = gemm.out.shape
    extents = {row: m, column: n}
    if not isinstance(gemm.out.base, Arena):  # checked by _split_product
        return False
    out: Region = (gemm.out.base, start, start + m * n - 1)
    own = Index(start, tuple(sorted(((n, Ref(row)), (1, Ref(column))), key=repr)))
    bound = {s.name: s.value for s in blocks.body if isinstance(s, Let)}
    operands = [_operand(gemm.a, gemm.a_at, bound), _operand(gemm.b, gemm.b_at, bound)]
    if any(r is None for r in operands):
        return False
    statements = list(walk(kernel.body))
    stores = [s for s in statements if isinstance(s, Store)]
    written: list[tuple[Region, Expr]] = []
    for store in stores:
        region = _region(store.arena, store.index, extents)
        if region is None or any(_overlap(region, r) for r in operands if r is not None):
            return False
        if _overlap(region, out) and _canonical(store.index) != own:
            return False
        written.append((region, store.index))
    for load in (e for s in statements for x in expressions(s) for e in nodes(x)
                 if isinstance(e, Load)):
        region = _region(load.arena, load.index, extents)
        if _overlap(region, out) and _canonical(load.index) != own:
            return False
        if any(_overlap(region, w) and load.index != index for w, index in written):
            return False
    return True


def _operand(operand: Strided, at: Expr, bound: Mapping[str, Expr]) -> Region | None:
    """The whole region a product's operand spans over every block, from its view's
    offset, shape and strides; None unless ``at`` begins from a ``Let`` of that offset
    (alone, or plus a block's step)."""
    if isinstance(at, Apply) and at.op == "add":
        at = at.args[0]
    start = bound.get(at.name) if isinstance(at, Ref) else None
    if not isinstance(operand.base, Arena) or not isinstance(start, Index) or \
            start.terms or start.base != operand.offset:
        return None
    span = sum((d - 1) * abs(s) for d, s in zip(operand.shape, operand.strides))
    return operand.base, operand.offset, operand.offset + span


def _region(arena: Arena, index: Expr, extents: Mapping[str, int]) -> Region | None:
    if not isinstance(index, Index):
        return None
    reach = interval(index, extents)
    return None if reach is None else (arena, reach[0], reach[1])


def _overlap(a: Region | None, b: Region) -> bool:
    """Whether two regions may share an element (an unknown region may share any)."""
    if a is None:
        return True
    return a[0] == b[0] and a[1] <= b[2] and b[1] <= a[2]


def _canonical(index: Expr) -> Expr:
    """``index`` with its terms in one order (and zero strides dropped), to compare."""
    if not isinstance(index, Index):
        return index
    return Index(index.base, tuple(sorted((t for t in index.terms if t[0]), key=repr)))


def _names(body: Sequence[Stmt]) -> set[str]:
    """Every name ``body`` binds or reads: loop variables, ``Let``s, references."""
    found: set[str] = set()
    for s in walk(body):
        if isinstance(s, Loop):
            found.add(s.var)
        elif isinstance(s, Let):
            found.add(s.name)
        found |= {e.name for x in expressions(s) for e in nodes(x) if isinstance(e, Ref)}
    return found


def _fresh(name: str, used: set[str]) -> str:
    k = 0
    while f"{name}_{k}" in used:
        k += 1
    return f"{name}_{k}"


def _shifted(value: Expr, step: int, by: str) -> Expr:
    """``value + step * by``: a block's first row or column and on."""
    return Apply("add", (value, Index(0, ((step, Ref(by)),))), "int64", "int64")


__all__ = ["fuse"]

"""Parallel partitions: which loops of the loop program run in chunks on the worker pool.

A kernel's top-level loop is *partitioned* when its iterations are independent and its
work pays for waking the pool: the loop then carries ``Annotations.partition``, a fixed
number of iterations per chunk, and a renderer that honours it calls the chunks through
the pool (``backends/pool.py``); one that does not runs the loop as before. The chunk
size is decided here from the loop's work alone, never from the thread count, and each
chunk computes exactly what the serial loop computes for its iterations (reductions run
whole inside one iteration), so results are the same bits for any number of threads.

Independent iterations, checked on the loop program itself:

- no ``Check`` (a status returns from the kernel), ``MatVec`` (whose writes this check
  does not see; a large one is split by ``_split_mat_vec``) or ``Sample`` (its workspace
  is shared) inside the loop; a ``Gemm`` (a batched product's loop: one BLAS call per
  matrix, BLAS running one thread) writes a block of ``m * n`` elements at ``out_at``
  and reads its operands' matrices at ``a_at`` and ``b_at``, checked as stores and loads;
- every name the body reads is bound inside it (a loop variable, a ``Let``, an
  accumulator the body resets) or by a top-level ``Let`` before the loop, which each
  chunk binds again (``outer_lets``): nothing flows between iterations through
  registers;
- every ``Store`` outside the row room writes a region of its own per iteration: its
  index steps by the loop variable with a stride wider than what the inner terms span;
- every ``Load`` reads nothing another iteration writes: its elements lie outside every
  region the loop stores to, or it reads the very element the same iteration stores.

The *row room* (``layout.row_terms``: the scratch where a row of terms waits for its
vectorized reduction) is private to a chunk: the renderer gives each chunk its own copy,
so kernels that normalize rows (softmax, layer norm) partition too. A loop may write the
row room only where a ``RowReduce`` inside the same loop reads it (a whole-array sum,
whose one row is reduced after the loop, stays on one thread).

The cost model is two numbers: a loop is partitioned when it does at least ``MIN_WORK``
element operations (loads, stores, arithmetic; a transcendental op counts
``TRANSCENDENTAL``), in chunks of at least ``CHUNK_WORK``. Measured on a 2-core AMD EPYC
(``python -m benchmarks --only threads``): a run of the pool costs well under a
microsecond while its workers spin, and W3's largest loop (about 65,000 element
operations, a few microseconds of vectorized code) ran no faster on two threads than on
one, so the threshold sits four times above it. W1-W3's steps stay on one thread.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from ..core import registry as primitives
from ..core.ir import Graph
from . import depth, loops
from .hoist import invariant_loads
from .kernels import Arena, Kernel, Strided
from .loops import (
    Accumulate,
    Annotations,
    Apply,
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
)

#: the element operations below which a loop stays on the calling thread (see the
#: module doc: W3's largest loop, a quarter of this, did not pay for a second thread)
MIN_WORK = 1 << 18
#: the element operations of one chunk at least (fixed, so chunks do not depend on the
#: thread count)
CHUNK_WORK = 1 << 15
#: a matrix product of at least this many flops is split into blocks (one BLAS call
#: each, one BLAS thread each, on the pool's threads) of at least ``GEMM_CHUNK_FLOPS``:
#: blocks of its rows, at least ``GEMM_MIN_ROWS``, when it has at least as many rows as
#: columns, else blocks of its columns, at least ``GEMM_MIN_COLUMNS`` and a multiple of
#: ``GEMM_COLUMN_STEP``; at most ``GEMM_MAX_BLOCKS``. The split side is the larger
#: operand's, which each block then reads once: measured on a 2-core AMD EPYC at one
#: thread, GPT-2's 128x768 by 768x50257 head as 8 blocks of 16 rows took 490-527 ms,
#: whole 142-162 ms, as 16 blocks of columns 139 ms; 128x768 by 768x2304 as 16-row blocks
#: 8.8 ms, whole 5.6-6.2, as column blocks 5.4-5.8; a block of 128 rows or more costs
#: within a few percent of its share of the whole
GEMM_MIN_FLOPS = 1 << 23
GEMM_CHUNK_FLOPS = 1 << 22
GEMM_MIN_ROWS = 128
GEMM_MIN_COLUMNS = 128
GEMM_COLUMN_STEP = 64
GEMM_MAX_BLOCKS = 16
#: a ``MatVec`` of form ``dot`` reading at least this many matrix elements is split into
#: blocks of outputs, each reading a contiguous block of about ``MATVEC_CHUNK`` elements
#: (a multiple of ``MATVEC_ROWS`` rows); a single core streams a block at its full rate
MATVEC_MIN = 1 << 21
MATVEC_CHUNK = 1 << 20
MATVEC_ROWS = 64
#: what a transcendental op (exp, tanh, log...) counts among element operations
TRANSCENDENTAL = 8


def lower(graph: Graph, kernels: Sequence[Kernel], arena: Mapping[str, int]
          ) -> tuple[LoopKernel, ...]:
    """A schedule's ``kernels`` (over ``graph``, its own scratch ``arena``) as loop
    programs (``loops.lower``), their inner loops' invariant loads hoisted
    (``hoist.py``), with their partitions decided."""
    lowered = tuple(invariant_loads(k) for k in loops.lower(graph, kernels, dict(arena)))
    rows = loops.row_room(graph, kernels)
    room = {d: int(arena.get(d, 0)) + int(rows.get(d, 0)) for d in set(arena) | set(rows)}
    return annotate(lowered, row_regions(graph, kernels, arena), room)


def row_regions(graph: Graph, kernels: Sequence[Kernel], arena: Mapping[str, int]
                ) -> dict[str, tuple[int, int]]:
    """The row room of each dtype: ``(start, end)`` elements of its scratch arena."""
    return {d: (int(arena.get(d, 0)), int(arena.get(d, 0)) + int(n))
            for d, n in loops.row_room(graph, kernels).items() if n}


def annotate(kernels: Sequence[LoopKernel], rows: Mapping[str, tuple[int, int]],
             room: Mapping[str, int] | None = None) -> tuple[LoopKernel, ...]:
    """``kernels`` with each partitionable, large enough top-level loop annotated with
    its chunk (see the module doc); ``rows``: the row room, private to a chunk;
    ``room``: where each dtype's scratch past the rows begins (0 where the schedule
    keeps none), for the partial products of a product split along its shared dimension
    (``depth.py``; none without it)."""
    return tuple(replace(k, body=_split_gemm(k.body, room) or _split_mat_vec(k.body)
                         or _decide_inside_batch_of_one(k.body, rows)
                         or _decide_each(k.body, rows))
                 for k in kernels)


def _decide_inside_batch_of_one(body: Sequence[Stmt], rows: Mapping[str, tuple[int, int]]
                                ) -> tuple[Stmt, ...] | None:
    """The loops inside a batch of one (attention's loop over heads, of one sequence's
    forward) decided as top-level loops; None when there is no such batch or nothing
    inside it is partitioned."""
    flat = _without_unit_loops(body)
    if len(flat) == len(body):
        return None
    decided = _decide_each(flat, rows)
    if not any(isinstance(s, Loop) and s.annotations.partition for s in decided):
        return None
    return decided


def _decide_each(body: Sequence[Stmt], rows: Mapping[str, tuple[int, int]]
                 ) -> tuple[Stmt, ...]:
    """Each top-level statement decided (``_decide``), a loop with the ``Let``s before
    it that it reads (``outer_lets``)."""
    decided: list[Stmt] = []
    lets: list[Let] = []
    for s in body:
        if isinstance(s, Let):
            lets.append(s)
        decided.append(_decide(s, rows, outer_lets(lets, s) if isinstance(s, Loop) else []))
    return tuple(decided)


def outer_lets(lets: Sequence[Let], loop: Loop) -> list[Let]:
    """The top-level ``Let``s among ``lets`` (those before ``loop``, in order) whose
    names ``loop`` reads without binding them, with those they read in turn (a random
    fill's key words): a partitioned loop's chunk binds them again itself, as it reads
    nothing bound outside it."""
    statements = list(walk(loop.body))
    bound = set(_extents(loop)) | {s.name for s in statements if isinstance(s, Let)}
    needed = {node.name for s in statements for e in expressions(s) for node in nodes(e)
              if isinstance(node, Ref)} - bound
    chosen: list[Let] = []
    for let in reversed(lets):
        if let.name in needed:
            chosen.append(let)
            needed.discard(let.name)
            needed |= {node.name for node in nodes(let.value) if isinstance(node, Ref)}
    return chosen[::-1]


def _split_gemm(body: Sequence[Stmt], room: Mapping[str, int] | None = None
                ) -> tuple[Stmt, ...] | None:
    """A kernel that is one large matrix product (its ``Let``s, then a ``Gemm``) as a
    partitioned loop over blocks of the product's rows or columns (see
    ``GEMM_MIN_FLOPS``), each block one BLAS call (the ``Let``s move into the loop: a
    chunk reads nothing bound outside it); None when the product is small or a vector
    product. A block reads its operands in place with the whole product's leading
    dimensions (``Gemm.a_ld``, ``b_ld``, ``out_ld``). A batch of one around the product
    (GPT-2's head on one sequence) is the product itself (``_without_unit_loops``).
    A product with too few rows and columns for either but a long shared dimension
    splits along it instead (``_split_depth``), its partials in scratch at ``room``."""
    body = _without_unit_loops(body)
    if not body or not isinstance(body[-1], Gemm) or \
            not all(isinstance(s, Let) for s in body[:-1]):
        return None
    gemm = body[-1]
    flops = 2 * gemm.m * gemm.n * gemm.k
    if gemm.m < 2 or gemm.n < 2 or flops < GEMM_MIN_FLOPS or \
            gemm.a_ld or gemm.b_ld or gemm.out_ld:
        return None
    split = _split_rows(body[:-1], gemm, flops) if gemm.m >= gemm.n \
        else _split_columns(body[:-1], gemm, flops)
    return split or _split_depth(body[:-1], gemm, room)


def _shifted(at: Expr, step: int, by: Expr) -> Expr:
    return Apply("add", (at, Index(0, ((step, by),))), "int64", "int64")


def _split_rows(lets: Sequence[Stmt], gemm: Gemm, flops: int) -> tuple[Stmt, ...] | None:
    """Blocks of ``m / blocks`` rows; a block of a transposed ``a`` (a backward pass's
    ``x.T @ g``) is a block of its stored columns."""
    blocks = next((b for b in (16, 8, 4, 2) if gemm.m % b == 0 and gemm.m // b >= GEMM_MIN_ROWS
                   and flops // b >= GEMM_CHUNK_FLOPS), 0)
    if not blocks:
        return None
    rows, var = gemm.m // blocks, Ref("rows")
    block = replace(gemm, m=rows, a_at=_shifted(gemm.a_at, rows * gemm.a.strides[-2], var),
                    out_at=_shifted(gemm.out_at, rows * gemm.out.strides[-2], var),
                    a_ld=gemm.m if gemm.a_layout == "F" else 0)
    return (Loop(var.name, blocks, (*lets, block), Annotations(partition=1)),)


def _split_columns(lets: Sequence[Stmt], gemm: Gemm, flops: int) -> tuple[Stmt, ...] | None:
    """Blocks of ``width`` columns (a block of a transposed ``b`` is a block of its
    stored rows), then the columns left over as one more call on the calling thread."""
    n = gemm.n
    blocks = min(GEMM_MAX_BLOCKS, flops // GEMM_CHUNK_FLOPS)
    # the width rounded down where that keeps GEMM_MAX_BLOCKS, so the columns left over
    # (one call on the calling thread, after the blocks) are fewer than a step's
    # (rounded up, GPT-2's head left 2257 of its 50257 columns serial)
    step, share = GEMM_COLUMN_STEP, n // max(blocks, 1)
    width = max(GEMM_MIN_COLUMNS, share // step * step)
    if n // width > GEMM_MAX_BLOCKS:
        width = max(GEMM_MIN_COLUMNS, -(-share // step) * step)
    count, rest = divmod(n, width)
    if rest == 1:  # no product of one column: the last block takes it
        count, rest = count - 1, width + 1
    if count < 2:
        return None
    var = Ref("columns")

    def block(n_block: int, by: Expr) -> Gemm:
        return replace(gemm, n=n_block,
                       b_at=_shifted(gemm.b_at, width * gemm.b.strides[-1], by),
                       out_at=_shifted(gemm.out_at, width, by),
                       b_ld=n if gemm.b_layout == "C" else 0, out_ld=n)
    split: tuple[Stmt, ...] = (Loop(var.name, count, (*lets, block(width, var)),
                                    Annotations(partition=1)),)
    if rest:
        split += (*lets, block(rest, Const(count, "int64")))
    return split


def _split_depth(lets: Sequence[Stmt], gemm: Gemm, room: Mapping[str, int] | None
                 ) -> tuple[Stmt, ...] | None:
    """Blocks of the shared dimension (``depth.blocks``), each a partial product into
    scratch at ``room`` (block ``b`` at ``b * m * n``), then a loop adding the partials
    in block order into the output. A block of a row-major ``a`` is a block of its
    columns (read with the whole product's ``k`` as its leading dimension), of a
    transposed ``a`` a block of its stored rows; the other way round for ``b``."""
    m, k, n, dtype = gemm.m, gemm.k, gemm.n, gemm.out.dtype
    count = depth.blocks(m, k, n)
    if not count or room is None or tuple(gemm.out.strides[-2:]) != (n, 1):
        return None
    size, var, start = k // count, Ref("depth"), room.get(dtype, 0)
    scratch = Arena("scratch", dtype)
    block = replace(gemm, k=size,
                    a_at=_shifted(gemm.a_at, size if gemm.a_layout == "C" else size * m, var),
                    a_ld=k if gemm.a_layout == "C" else 0,
                    b_at=_shifted(gemm.b_at, size * n if gemm.b_layout == "C" else size, var),
                    b_ld=k if gemm.b_layout == "F" else 0,
                    out=Strided(scratch, start, (m, n), (n, 1), dtype),
                    out_at=Index(start, ((m * n, var),)), out_ld=0)
    element = Ref("element")
    total: Expr = Load(scratch, dtype, Index(start, ((1, element),)))
    for b in range(1, count):
        part = Load(scratch, dtype, Index(start + b * m * n, ((1, element),)))
        total = Apply("add", (total, part), dtype, dtype)
    out = gemm.out.base
    assert isinstance(out, Arena)  # the loop program's operands are arenas
    sums = Loop(element.name, m * n,
                (Store(out, dtype, _shifted(gemm.out_at, 1, element), total),))
    return (Loop(var.name, count, (*lets, block), Annotations(partition=1)), *lets, sums)


def _split_mat_vec(body: Sequence[Stmt]) -> tuple[Stmt, ...] | None:
    """A kernel that is one large ``MatVec`` of form ``dot`` (its ``Let``s, then the
    product, inside loops of one iteration) as a partitioned loop over blocks of its
    outputs, each block one ``MatVec`` reading its own contiguous rows of the matrix,
    then the rows left over; an output's value does not depend on the block it is in
    (``loops.MatVec``). None for a small product or the ``axpy`` form: its blocks would
    be columns, each row of the matrix read in pieces, and measured on a 2-core AMD
    EPYC a piece of 1152 columns streamed at a third of a whole row's rate."""
    flat = _without_unit_loops(body)
    if not flat or not isinstance(flat[-1], MatVec) or \
            not all(isinstance(s, Let) for s in flat[:-1]):
        return None
    product, lets = flat[-1], flat[:-1]
    if product.form != "dot" or product.k * product.n < MATVEC_MIN:
        return None
    per_block = -(-max(1, MATVEC_CHUNK // product.k) // MATVEC_ROWS) * MATVEC_ROWS
    blocks = product.n // per_block
    if blocks < 2:
        return None
    var = "rows"
    shifted = _shifted
    block = replace(product, n=per_block,
                    matrix_at=shifted(product.matrix_at, per_block * product.ld, Ref(var)),
                    out_at=shifted(product.out_at, per_block, Ref(var)))
    split: tuple[Stmt, ...] = (Loop(var, blocks, (*lets, block), Annotations(partition=1)),)
    rest = product.n - blocks * per_block
    if rest:
        done = Const(blocks, "int64")
        split += (*lets, replace(product, n=rest,
                                 matrix_at=shifted(product.matrix_at,
                                                   per_block * product.ld, done),
                                 out_at=shifted(product.out_at, per_block, done)))
    return split


def _without_unit_loops(body: Sequence[Stmt]) -> tuple[Stmt, ...]:
    """``body`` with each loop of one iteration that is its only statement replaced by
    a ``Let`` of its variable (0) and its body (a batch of one around a product)."""
    while len(body) == 1 and isinstance(body[0], Loop) and body[0].extent == 1:
        loop = body[0]
        body = (Let(loop.var, Const(0, "int64")), *loop.body)
    return tuple(body)


def chunks(loop: Loop) -> int:
    """How many chunks a partitioned ``loop`` runs as."""
    return -(-loop.extent // loop.annotations.partition)


def kernel_chunks(kernel: LoopKernel) -> int:
    """How many chunks ``kernel``'s partitioned loop runs as (1: none is partitioned)."""
    return max((chunks(s) for s in kernel.body
                if isinstance(s, Loop) and s.annotations.partition), default=1)


def in_row_room(arena_role: str, dtype: str, index: Expr,
                rows: Mapping[str, tuple[int, int]]) -> bool:
    """Whether an access (of ``arena_role`` scratch, ``dtype``) lies in the row room."""
    if arena_role != "scratch" or dtype not in rows or not isinstance(index, Index):
        return False
    start, end = rows[dtype]
    return start <= index.base < end


# ---------------------------------------------------------------------------------------


def _decide(stmt: Stmt, rows: Mapping[str, tuple[int, int]], outer: Sequence[Let] = ()
            ) -> Stmt:
    """``stmt`` partitioned when it is a large loop of independent iterations (with
    ``outer``, the ``Let``s before it that its chunks bind again)."""
    if not isinstance(stmt, Loop) or stmt.extent < 2 or stmt.annotations.partition:
        return stmt
    per_iteration = _work(stmt.body)
    if per_iteration * stmt.extent < MIN_WORK or \
            not _independent(replace(stmt, body=(*outer, *stmt.body)), rows):
        return stmt
    chunk = max(1, math.ceil(CHUNK_WORK / max(per_iteration, 1)))
    if chunk >= stmt.extent:
        return stmt
    return replace(stmt, annotations=replace(stmt.annotations, partition=chunk))


def walk(body: Sequence[Stmt]) -> Iterator[Stmt]:
    """Every statement of ``body``, loops' bodies included, in order."""
    for s in body:
        yield s
        if isinstance(s, Loop):
            yield from walk(s.body)


def expressions(stmt: Stmt) -> Iterator[Expr]:
    """The values and indices ``stmt`` evaluates (a ``Gemm``: its operands' starts)."""
    if isinstance(stmt, Let):
        yield stmt.value
    elif isinstance(stmt, Store):
        yield stmt.index
        yield stmt.value
    elif isinstance(stmt, Accumulate):
        yield stmt.value
    elif isinstance(stmt, Gemm):
        yield from (stmt.a_at, stmt.b_at, stmt.out_at)


def nodes(expr: Expr) -> Iterator[Expr]:
    """``expr`` and every value inside it."""
    yield expr
    if isinstance(expr, Apply):
        for a in expr.args:
            yield from nodes(a)
    elif isinstance(expr, Load):
        yield from nodes(expr.index)
    elif isinstance(expr, Index):
        for _, term in expr.terms:
            yield from nodes(term)


def _expr_work(expr: Expr) -> int:
    total = 0
    for node in nodes(expr):
        if isinstance(node, Load):
            total += 1
        elif isinstance(node, Apply):
            total += TRANSCENDENTAL if primitives.is_transcendental(node.op) else 1
    return total


def _work(body: Sequence[Stmt]) -> int:
    total = 0
    for s in body:
        if isinstance(s, Loop):
            total += s.extent * _work(s.body)
        elif isinstance(s, RowReduce):
            total += s.n
        elif isinstance(s, Gemm):
            total += s.m * s.n * s.k
        else:
            total += sum(_expr_work(e) for e in expressions(s)) + (1 if isinstance(s, Store) else 0)
    return total


def _extents(loop: Loop) -> dict[str, int]:
    """Each loop variable's extent; a name bound to the constant 0 counts as a variable
    of extent 1 (the variable of a batch of one, ``_without_unit_loops``)."""
    found = {loop.var: loop.extent}
    for s in walk(loop.body):
        if isinstance(s, Loop):
            found[s.var] = s.extent
        elif isinstance(s, Let) and s.value == Const(0, "int64"):
            found[s.name] = 1
    return found


def interval(index: Index, extents: Mapping[str, int]) -> tuple[int, int] | None:
    """The lowest and highest element ``index`` reaches over the loop; None when a term
    is not a loop variable (then nothing is known)."""
    low = high = index.base
    for stride, term in index.terms:
        if not isinstance(term, Ref) or term.name not in extents:
            return None
        reach = stride * (extents[term.name] - 1)
        low, high = low + min(0, reach), high + max(0, reach)
    return low, high


def _own_region(index: Expr, var: str, extents: Mapping[str, int], width: int = 1) -> bool:
    """Whether ``index`` (and the ``width`` elements from it) writes a region of its own
    for each value of ``var``."""
    if not isinstance(index, Index):
        return False
    outer = [s for s, t in index.terms if isinstance(t, Ref) and t.name == var]
    if len(outer) != 1 or outer[0] <= 0:
        return False
    span = 0
    for stride, term in index.terms:
        if isinstance(term, Ref) and term.name == var:
            continue
        if not isinstance(term, Ref) or term.name not in extents:
            return False
        span += abs(stride) * (extents[term.name] - 1)
    return outer[0] >= span + width


def _independent(loop: Loop, rows: Mapping[str, tuple[int, int]]) -> bool:
    statements = list(walk(loop.body))
    if any(isinstance(s, (Check, MatVec, Sample)) for s in statements):
        return False
    extents = _extents(loop)
    bound = set(extents)
    bound |= {s.name for s in statements if isinstance(s, (Let, RowReduce, Init))}
    for s in statements:
        if isinstance(s, Accumulate) and s.name not in bound:
            return False
        for expr in expressions(s):
            for node in nodes(expr):
                if isinstance(node, Ref) and node.name not in bound:
                    return False
    reduced = [(s.dtype, s.start, s.start + s.n) for s in statements
               if isinstance(s, RowReduce)]
    for s in statements:  # a row of terms must be reduced inside the iteration that wrote it
        if isinstance(s, Store) and in_row_room(s.arena.role, s.dtype, s.index, rows):
            assert isinstance(s.index, Index)
            at = s.index.base
            if not any(d == s.dtype and start <= at < end for d, start, end in reduced):
                return False
    stores = [s for s in statements if isinstance(s, Store)
              and not in_row_room(s.arena.role, s.dtype, s.index, rows)]
    written: list[tuple[object, tuple[int, int], Expr]] = []
    for s in stores:
        if not _own_region(s.index, loop.var, extents):
            return False
        assert isinstance(s.index, Index)
        region = interval(s.index, extents)
        if region is None:
            return False
        written.append((s.arena, region, s.index))
    lets = {s.name: s.value for s in statements if isinstance(s, Let)}
    gemms = [s for s in statements if isinstance(s, Gemm)]
    for g in gemms:
        out = _matrix(g.out, lets.get(_name(g.out_at)), extents)
        if out is None or not _own_region(lets[_name(g.out_at)], loop.var, extents,
                                          g.m * g.n):
            return False
        written.append((g.out.arena, out, Const(-1, "int64")))  # no load is exempt
    for g in gemms:
        for operand, first in ((g.a, g.a_at), (g.b, g.b_at)):
            reach = _matrix(operand, lets.get(_name(first)), extents)
            if reach is None or any(arena == operand.arena and reach[0] <= region[1]
                                    and region[0] <= reach[1]
                                    for arena, region, _ in written):
                return False
    for s in statements:
        for expr in expressions(s):
            for node in nodes(expr):
                if isinstance(node, Load) and not _reads_safely(node, written, extents, rows):
                    return False
    return True


def _name(expr: Expr) -> str:
    return expr.name if isinstance(expr, Ref) else ""


def _matrix(operand: Strided, at: Expr | None, extents: Mapping[str, int]
            ) -> tuple[int, int] | None:
    """The elements a ``Gemm`` operand's matrices reach over the loop, from ``at`` (the
    ``Index`` its ``*_at`` names) and the operand's last two axes; None when unknown."""
    if not isinstance(at, Index):
        return None
    reach = interval(at, extents)
    if reach is None:
        return None
    span = sum((size - 1) * abs(stride)
               for size, stride in zip(operand.shape[-2:], operand.strides[-2:]))
    return reach[0], reach[1] + span


def _reads_safely(load: Load, written: Sequence[tuple[object, tuple[int, int], Expr]],
                  extents: Mapping[str, int], rows: Mapping[str, tuple[int, int]]) -> bool:
    """Whether ``load`` reads nothing another iteration of the loop writes."""
    if in_row_room(load.arena.role, load.dtype, load.index, rows):
        return True
    if not isinstance(load.index, Index):
        return False
    reach = interval(load.index, extents)
    for arena, region, index in written:
        if arena != load.arena:
            continue
        if reach is None:
            return False
        if reach[0] <= region[1] and region[0] <= reach[1] and load.index != index:
            return False
    return True


__all__ = ["CHUNK_WORK", "MIN_WORK", "TRANSCENDENTAL", "annotate", "chunks", "expressions",
           "in_row_room", "interval", "lower", "nodes", "outer_lets", "row_regions", "walk"]

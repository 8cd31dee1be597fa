"""The loop program's values and statements (``loops.py`` describes each and lowers the
schedule's kernels to them; ``random_fills.py`` and ``approximations.py`` build scalar
graphs of them)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .kernels import Arena, Strided

# ---------------------------------------------------------------------------------------
# values


@dataclass(frozen=True)
class Const:
    """A number of ``dtype`` baked into the code."""

    value: Any
    dtype: str


@dataclass(frozen=True)
class Ref:
    """A loop variable, a ``Let``'s value or an accumulator's current value."""

    name: str


@dataclass(frozen=True)
class Index:
    """``base + sum(stride * term)`` as int64 (the terms in order; zero strides drop)."""

    base: int
    terms: tuple[tuple[int, Expr], ...] = ()


@dataclass(frozen=True)
class Load:
    """Element ``index`` of ``arena`` (elements of ``dtype``)."""

    arena: Arena
    dtype: str
    index: Expr


@dataclass(frozen=True)
class Apply:
    """The registry's elementwise op ``op`` of ``args``: a ``dtype`` result, operand 0
    of dtype ``operand``."""

    op: str
    args: tuple[Expr, ...]
    dtype: str
    operand: str


Expr = Const | Ref | Index | Load | Apply


# ---------------------------------------------------------------------------------------
# statements


@dataclass(frozen=True)
class Annotations:
    """How a loop may run: ``vectorize`` width and ``unroll`` factor (0: the compiler's
    choice), ``tile`` (0: untiled) and ``partition`` (0: one thread; else the fixed
    chunk of iterations a thread takes, so a result does not depend on the number of
    threads). The llvm renderer honours ``partition`` (``partition.py``); the others
    none yet: LLVM's loop unroller stays off and its vectorizer decides the width."""

    vectorize: int = 0
    unroll: int = 0
    tile: int = 0
    partition: int = 0


@dataclass(frozen=True)
class Let:
    name: str
    value: Expr


@dataclass(frozen=True)
class Store:
    """``arena[index] = value`` (``value`` evaluated first)."""

    arena: Arena
    dtype: str
    index: Expr
    value: Expr


@dataclass(frozen=True)
class Loop:
    var: str
    extent: int
    body: tuple[Stmt, ...]
    annotations: Annotations = Annotations()


@dataclass(frozen=True)
class Accumulator:
    """A register accumulator of a kernel: ``name``, ``dtype`` and ``identity``."""

    name: str
    dtype: str
    identity: Const


@dataclass(frozen=True)
class Init:
    """Reset accumulator ``name`` to its identity."""

    name: str


@dataclass(frozen=True)
class Accumulate:
    """``name = combine(name, value)``; ``value`` of ``dtype``, widened to the
    accumulator's dtype first."""

    name: str
    combine: str
    value: Expr
    dtype: str


@dataclass(frozen=True)
class Check:
    """Stop with ``message`` unless ``0 <= value < size`` (``value`` an int64)."""

    value: Expr
    size: int
    message: str


@dataclass(frozen=True)
class RowReduce:
    """``name`` = ``op`` (sum, max, min) of the ``n`` terms of ``dtype`` at ``start`` in
    the scratch arena of ``dtype``: a float64 for a sum, a ``dtype`` value otherwise."""

    name: str
    op: str
    dtype: str
    start: int
    n: int

    @property
    def result(self) -> str:
        return "float64" if self.op == "sum" else self.dtype


@dataclass(frozen=True)
class Gemm:
    """``out = a @ b`` by BLAS for ``m x k`` and ``k x n`` operands whose last two axes
    BLAS reads in place (``a_layout``, ``b_layout``: ``"C"`` row-major, ``"F"``
    transposed), each starting ``*_at`` elements into its arena; ``out`` row-major.
    ``a_ld``, ``b_ld``, ``out_ld``: the distance in elements between two stored rows of
    ``a``, ``b`` and ``out`` when it is not the operand's own width (a block of a larger
    product: ``partition.py``); 0 when it is.

    ``method``: ``"blas"`` calls BLAS's ``gemm`` (its summation order is BLAS's own);
    ``"tiles"`` (``tiles_suit``) runs our register-tiled product, whose every output is
    the chain ``acc = fma(A(i, q), B(q, j), acc)`` for ``q`` from 0 starting at zero, one
    fused multiply-add rounded per term: the same bits on every backend, vector width
    and thread count."""

    a: Strided
    a_at: Expr
    a_layout: str
    b: Strided
    b_at: Expr
    b_layout: str
    out: Strided
    out_at: Expr
    m: int
    k: int
    n: int
    a_ld: int = 0
    b_ld: int = 0
    out_ld: int = 0
    method: str = "blas"

    @property
    def a_steps(self) -> tuple[int, int]:
        """``(a_i, a_k)``: ``A(i, q)`` is element ``a_at + i * a_i + q * a_k``."""
        if self.a_layout == "C":
            return self.a_ld or self.k, 1
        return 1, self.a_ld or self.m

    @property
    def b_steps(self) -> tuple[int, int]:
        """``(b_k, b_j)``: ``B(q, j)`` is element ``b_at + q * b_k + j * b_j``."""
        if self.b_layout == "C":
            return self.b_ld or self.n, 1
        return 1, self.b_ld or self.k


#: the longest shared dimension a tiled product whose ``B`` columns are not contiguous
#: copies a panel of (its stack buffer: this many rows of two vector registers)
MAX_PACKED_DEPTH = 1024


@functools.cache
def vector_lanes() -> int:
    """float32 lanes of this CPU's widest vector registers: 16 with AVX-512, else 8 (read
    from the kernel's ``/proc/cpuinfo``: the lowering imports no code generator; 8 where
    it cannot be read). The tiled product's shape and where it beats BLAS follow it."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return 16 if "avx512f" in line.split() else 8
    except OSError:
        pass
    return 8


def tiles_suit(m: int, k: int, n: int, a_layout: str, b_layout: str, dtype: str,
               lanes: int | None = None) -> bool:
    """Whether our register-tiled product (``method="tiles"``) runs a product of this
    shape rather than a BLAS call on a CPU of ``lanes`` float32 lanes (default this
    one's, ``vector_lanes``): float32, at least 8 rows and 16 columns (fewer use a tile's
    registers poorly), and with AVX-512 a shared dimension short enough that a panel of
    ``B`` (it times two vector registers) stays in the second-level cache: at most 1,024;
    4,096 for at most 256 rows (GPT-2's 128 x 3072 by 3072 x 768), which walk the panel
    few times; 8,192 for an output of at most 256 x 256 (a weight gradient ``x.T @ g``
    over a batch's rows). Measured against SciPy's OpenBLAS at one thread (plans call it
    with one), the 16-lane tiles won every such shape tried and lost where the panel no
    longer fits: 2,048 cubed ran at 69 GFLOP/s against 104. The 8-lane tiles (AVX2, 6
    rows) won only on products of many rows over a short shared dimension (2,048 x 32 by
    32 x 128: 110 against 79) and lost on GPT-2's and the weight gradients' shapes (64
    against 95, 55-64 against 76-94), run on the same core with OpenBLAS's Haswell
    kernels: without AVX-512 only that class is tiled (``backends/tiles.py``)."""
    if dtype != "float32" or n < 16 or m < 8:
        return False
    if (lanes or vector_lanes()) < 16:
        return a_layout == b_layout == "C" and m >= 512 and k <= 256
    if b_layout != "C" and k > MAX_PACKED_DEPTH:
        return False
    return k <= 1024 or (m <= 256 and k <= 4096) or (m <= 256 and n <= 256 and k <= 8192)


#: the partial sums of a ``MatVec`` of form ``dot`` (one vector register of float32)
MATVEC_LANES = 16


@dataclass(frozen=True)
class MatVec:
    """``out[j] = sum over q < k of M(j, q) * vector[q]`` for ``n`` outputs ``j``, each
    product and sum rounded to the dtype (no fused multiply-add), in a fixed order:

    - ``form == "dot"``: ``M(j, q) = matrix[matrix_at + j * ld + q]`` (an output reads a
      row of the matrix). Lane ``l < MATVEC_LANES`` sums the terms ``q = l, l + 16,
      ...`` in order from 0; then lanes ``l`` and ``l + w`` add for ``w`` = 8, 4, 2, 1
      (lane ``l`` on the left); lane 0 is the output.
    - ``form == "axpy"``: ``M(j, q) = matrix[matrix_at + q * ld + j]`` (an output reads
      a column): the terms are added in order of ``q`` from 0.

    Both forms read the matrix front to back once: what a one-row product (a decode
    step's projections, the vocabulary head) is bound by. ``vector`` and ``out`` are
    contiguous; an output's value does not depend on which other outputs the statement
    computes, so a product split into blocks of outputs gives the same bits."""

    matrix: Strided
    matrix_at: Expr
    ld: int
    form: str
    vector: Strided
    vector_at: Expr
    out: Strided
    out_at: Expr
    k: int
    n: int


@dataclass(frozen=True)
class Sample:
    """A categorical draw: ``out[r]`` (int64) is the index ``philox.categorical_row``
    picks from contiguous row ``r`` of ``logits`` divided by ``temperature`` (``attrs``,
    with ``top_k`` and ``top_p``) with the uniform at element ``uniforms + r`` of the
    float64 scratch (filled before, ``random_fills.py``); the per-row workspace lies in
    scratch at ``workspace``: (float64 scaled row, float64 cumulative weights, int64
    order, int64 merge room) offsets. A call because a row's tokens are visited in
    sorted order (a stable merge sort, then a cut and a search that stop early), which
    the loop program, with its fixed extents and no branches, does not express."""

    out: Strided
    logits: Strided
    uniforms: int
    attrs: dict[str, Any]
    workspace: tuple[int, int, int, int]


Stmt = Let | Store | Loop | Init | Accumulate | Check | RowReduce | Gemm | MatVec | Sample
Call = RowReduce | Gemm | MatVec | Sample


@dataclass(frozen=True)
class LoopKernel:
    """One kernel as a loop program: ``body``, the ``accumulators`` it declares, the
    graph ``nodes`` it computes and a ``title`` for printed code."""

    body: tuple[Stmt, ...]
    accumulators: tuple[Accumulator, ...] = ()
    nodes: tuple[int, ...] = ()
    title: str = ""

    def statements(self) -> list[Stmt]:
        """Every statement, loops' bodies included, in order."""
        found: list[Stmt] = []

        def walk(body: Sequence[Stmt]) -> None:
            for s in body:
                found.append(s)
                if isinstance(s, Loop):
                    walk(s.body)
        walk(self.body)
        return found


__all__ = ["Const", "Ref", "Index", "Load", "Apply", "Expr", "Annotations", "Let", "Store",
           "Loop", "Accumulator", "Init", "Accumulate", "Check", "RowReduce", "Gemm",
           "MatVec", "MATVEC_LANES", "MAX_PACKED_DEPTH", "tiles_suit",
           "vector_lanes",
           "Sample", "Stmt", "Call", "LoopKernel"]

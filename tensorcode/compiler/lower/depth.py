"""A matrix product split along its shared dimension: partial products, then their sum.

A backward pass's weight gradient ``x.T @ g`` over a batch's rows is a product with few
rows and columns and a long shared dimension (a width-64 transformer's query-key-value
gradient: 64 x 2048 by 2048 x 192). Neither its rows nor its columns make blocks large
enough to split (``partition.py``: at least 128 each), so it ran whole on the calling
thread: two such products were 2 ms of a 2-thread step's 21. Split along ``k`` instead,
each block computes a partial product of ``m x n`` into scratch (one BLAS call each, on
the pool), and a loop after them adds the partials in block order into the output.

The blocks are fixed by the shape alone, never by the thread count, and the partials
are added in one fixed order, so the result is the same bits at any thread count (it
differs in rounding from the product computed whole: a different order of the sums,
within float32 rounding of the reference). The partials live in scratch past the rows
(``loops.scratch_sizes``, shared with a categorical draw's workspace: kernels run one
after another), sized here from the kernel record so that a loaded plan allocates it
without lowering the loop program.
"""

from __future__ import annotations

from .kernels import Kernel, MatmulKernel, Strided

#: a product split this way has fewer than ``SIDE`` rows and columns (so neither splits
#: into blocks of 128), at least ``MIN_FLOPS`` flops, and blocks of at least ``MIN_DEPTH``
#: of the shared dimension and ``CHUNK_FLOPS`` flops each, at most ``MAX_BLOCKS``
SIDE = 256
MIN_FLOPS = 1 << 23
CHUNK_FLOPS = 1 << 22
MIN_DEPTH = 256
MAX_BLOCKS = 16


def blocks(m: int, k: int, n: int) -> int:
    """How many blocks of ``k`` a product of ``m x k`` by ``k x n`` splits into (0: it
    does not)."""
    flops = 2 * m * k * n
    if not (2 <= m < SIDE and 2 <= n < SIDE) or flops < MIN_FLOPS:
        return 0
    return next((b for b in (MAX_BLOCKS, 8, 4, 2) if k % b == 0 and k // b >= MIN_DEPTH
                 and flops // b >= CHUNK_FLOPS), 0)


def room(kernel: Kernel) -> dict[str, int]:
    """The scratch a kernel's partial products need, by dtype (nothing unless it is one
    BLAS product, unbatched, that splits this way)."""
    if not isinstance(kernel, MatmulKernel) or kernel.mode != "blas" or \
            any(size != 1 for size in kernel.batch) or \
            not (isinstance(kernel.a, Strided) and isinstance(kernel.b, Strided)):
        return {}
    count = blocks(kernel.m, kernel.k, kernel.n)
    return {kernel.out.dtype: count * kernel.m * kernel.n} if count else {}


__all__ = ["CHUNK_FLOPS", "MAX_BLOCKS", "MIN_DEPTH", "MIN_FLOPS", "SIDE", "blocks", "room"]

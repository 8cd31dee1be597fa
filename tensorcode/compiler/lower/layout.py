"""How a fused kernel's loops run, and the scratch a plan's code needs for it.

A fused kernel's loop layout (``fused_layout``) and which of its reductions run in two
passes over a row of scratch (``row_terms``) are functions of the kernel record alone, so
the loop program (``loops.py``) reads the same answer for every kernel; ``loops.scratch_sizes``
adds the rows' room to the schedule's scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..core import registry as primitives
from .kernels import FusedKernel, Strided, broadcast_access, c_strides

#: the fewest terms a float reduction over the innermost loop needs before it is
#: computed in two passes (``row_terms``)
ROW_REDUCTION_MIN = 16


def coalesce(dims: Sequence[int], vectors: Sequence[Sequence[int]]
              ) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 axes and merge adjacent axes every access walks contiguously."""
    keep = [a for a, d in enumerate(dims) if d != 1]
    out_dims = [dims[a] for a in keep]
    out_vecs = [[v[a] for a in keep] for v in vectors]
    a = len(out_dims) - 2
    while a >= 0:
        if all(v[a] == v[a + 1] * out_dims[a + 1] for v in out_vecs):
            out_dims[a] *= out_dims[a + 1]
            del out_dims[a + 1]
            for v in out_vecs:
                v[a] = v[a + 1]
                del v[a + 1]
        a -= 1
    return out_dims, out_vecs



class FusedLayout(NamedTuple):
    """How a fused kernel's loops run: the coalesced loop extents ``dims``, each
    strided load's, store's and reduction's stride per loop, and for each reduction
    whose reduced axes are a suffix of the loops the loop level its register
    accumulator opens at (``local``; the others accumulate in place, in memory)."""

    dims: list[int]
    reductions: list[int]
    load_keys: list[int]
    load_vec: dict[int, list[int]]
    store_vec: dict[int, list[int]]
    red_vec: dict[int, list[int]]
    local: dict[int, int]


def fused_layout(g: Any, kernel: FusedKernel) -> FusedLayout:
    """The loop layout of ``kernel`` (``FusedLayout``), a function of the kernel alone."""
    space = tuple(kernel.space)
    loads: dict[int, Any] = kernel.loads
    members = kernel.nodes
    reductions = [i for i in members if primitives.is_reduction(g.nodes[i].op)]
    vectors: list[list[int]] = []
    load_keys = [j for j, loc in loads.items() if isinstance(loc, Strided)]
    for j in load_keys:
        vectors.append(list(broadcast_access(loads[j], space)))
    store_keys = [i for i in members if i in kernel.stores and i not in reductions]
    for _ in store_keys:
        vectors.append(list(c_strides(space)))
    for r in reductions:
        axes = set(g.nodes[r].attr("axis"))
        kept = [d for a, d in enumerate(space) if a not in axes]
        ks = list(c_strides(kept))
        vec, q = [], 0
        for a in range(len(space)):
            if a in axes:
                vec.append(0)
            else:
                vec.append(ks[q])
                q += 1
        vectors.append(vec)
    dims, vecs = coalesce(space, vectors)
    n_loads, n_stores = len(load_keys), len(store_keys)
    red_vec = dict(zip(reductions, vecs[n_loads + n_stores:]))
    local: dict[int, int] = {}
    for r in reductions:
        reduced = [a for a, st in enumerate(red_vec[r]) if st == 0]
        first = min(reduced) if reduced else len(dims)
        if reduced == list(range(first, len(dims))):
            local[r] = first
    return FusedLayout(list(dims), reductions, load_keys,
                       dict(zip(load_keys, vecs[:n_loads])),
                       dict(zip(store_keys, vecs[n_loads:n_loads + n_stores])), red_vec, local)


def row_terms(g: Any, layout: FusedLayout) -> list[tuple[int, str]]:
    """The reductions of a fused kernel computed in two passes, with their row's dtype
    (the term's): the innermost loop only stores each term in a row of scratch, and
    ``row_sum``, ``row_max`` or ``row_min`` (``intrinsics``) reduce the row (a sum
    still accumulates in float64). A running sum or maximum in that loop is a chain
    of dependent operations, which keeps LLVM from vectorizing the loop's other work
    (an ``exp``, a division) as well; the row's reduction is vectorized. Taken when
    every reduction closing at the innermost level is a float one over at least
    ``ROW_REDUCTION_MIN`` terms."""
    dims, last = layout.dims, len(layout.dims) - 1
    inner = [r for r in layout.reductions if layout.local.get(r) == last]
    if last < 0 or not inner or dims[-1] < ROW_REDUCTION_MIN or any(
            not g.nodes[r].type.is_float for r in inner):
        return []
    return [(r, g.nodes[g.nodes[r].inputs[0]].type.dtype) for r in inner]


__all__ = ["coalesce", "FusedLayout", "fused_layout", "row_terms", "ROW_REDUCTION_MIN"]

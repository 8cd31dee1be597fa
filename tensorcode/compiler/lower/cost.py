"""What one kernel of a schedule costs in arithmetic and in memory traffic.

A kernel's time alone says little; against the work it does it says how close to the
machine it runs. ``kernel_cost(graph, kernel)`` counts, from the kernel record alone:

- ``flops``: two per multiply-add of a matrix product; one per element and op of a
  fused kernel (an elementwise op or a reduction's combine), whatever the op costs in
  instructions (an ``exp`` counts one, as profilers count it);
- ``bytes``: what the kernel reads and writes once, each distinct location's elements
  at their dtype's size (a broadcast operand counts the elements it holds, not the
  times it is read): the traffic a kernel that streamed each operand once would move.
  A gather counts the rows it reads (as many as it writes), not the whole table.

``label`` names the kernel's class for a per-kind table: ``matmul``, ``matmul (loops)``
for a small product by generated loops, ``fused``, ``fused reduction`` (a fused kernel
that reduces), and the kind of every other kernel (``layer_norm``, ``take``, ``copy``,
...; a layer norm or softmax counts one flop per element and member, as a fused
kernel does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core import registry as primitives
from ..core.ir import Graph
from .kernels import (
    FusedKernel,
    Kernel,
    LayerNormKernel,
    MatmulKernel,
    Scalar,
    SoftmaxKernel,
    Strided,
    TakeKernel,
)


@dataclass(frozen=True)
class KernelCost:
    """One kernel's ``label`` (its class), ``shape`` (the space it iterates; a matrix
    product's ``(batch.., m, k, n)``), ``flops`` and ``bytes`` (see the module doc)."""

    label: str
    shape: tuple[int, ...]
    flops: int
    bytes: int


def _held(loc: object) -> int:
    """Bytes of the elements a location holds (a stride-0 axis holds one)."""
    if not isinstance(loc, Strided):
        return 0
    held = math.prod(1 if s == 0 else d for d, s in zip(loc.shape, loc.strides))
    return int(held) * np.dtype(loc.dtype).itemsize


def _traffic(kernel: Kernel) -> int:
    seen: set[tuple] = set()
    total = 0
    for loc in list(kernel.read_locs()) + list(kernel.write_locs()):
        if isinstance(loc, Scalar):
            continue
        key = (loc.base, loc.offset, loc.shape, loc.strides)
        if key not in seen:
            seen.add(key)
            total += _held(loc)
    return total


def kernel_cost(graph: Graph, kernel: Kernel) -> KernelCost:
    """The cost of ``kernel`` (a record of a schedule over ``graph``)."""
    traffic = _traffic(kernel)
    if isinstance(kernel, TakeKernel):  # a gather reads the rows it writes, not the table
        traffic = 2 * _held(kernel.out) + _held(kernel.index)
    if isinstance(kernel, MatmulKernel):
        batch = math.prod(kernel.batch)
        label = "matmul" if kernel.mode == "blas" else "matmul (loops)"
        return KernelCost(label, tuple(kernel.batch) + (kernel.m, kernel.k, kernel.n),
                          2 * batch * kernel.m * kernel.k * kernel.n, traffic)
    if isinstance(kernel, FusedKernel):
        size = math.prod(kernel.space)
        reduces = any(primitives.is_reduction(graph.nodes[i].op) for i in kernel.nodes)
        return KernelCost("fused reduction" if reduces else "fused", tuple(kernel.space),
                          size * len(kernel.nodes), traffic)
    if isinstance(kernel, (LayerNormKernel, SoftmaxKernel)):
        return KernelCost(kernel.kind, tuple(kernel.space),
                          math.prod(kernel.space) * len(kernel.nodes), traffic)
    return KernelCost(kernel.kind, tuple(kernel.space), 0, traffic)


__all__ = ["KernelCost", "kernel_cost"]

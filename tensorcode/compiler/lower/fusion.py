"""Fusion: which elementwise nodes (and the reductions they feed) share one loop nest.

A fused kernel is a scheduling decision, not a value, so ``fuse`` returns a ``Fusion``
describing the groups rather than a new graph; ``schedule.build`` turns each group into
a ``FusedKernel``. Op facts come from the registry only, through
``primitives.is_elementwise``, ``primitives.is_reduction`` and ``primitives.is_view``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..core import registry as primitives
from ..core.ir import SOURCE_OPS, Graph, Node


def is_fusable(node: Node) -> bool:
    """Whether ``node`` joins a fused group: an elementwise op or a reduction."""
    return node.op not in SOURCE_OPS and (primitives.is_elementwise(node.op)
                                          or primitives.is_reduction(node.op))


def loop_space(graph: Graph, node: Node) -> tuple[int, ...]:
    """The shape a fusable node's loop runs over: its own for an elementwise op, its
    input's for a reduction (which writes fewer elements than it reads)."""
    if primitives.is_reduction(node.op):
        return graph.nodes[node.inputs[0]].type.shape
    return node.type.shape


@dataclass
class Group:
    """One fused kernel: ``space`` is the shape its loop nest runs over; ``members``
    are elementwise nodes of that shape and reductions of values of that shape, in
    graph order."""

    space: tuple[int, ...]
    members: list[int]

    def reductions(self, graph: Graph) -> list[int]:
        return [i for i in self.members if primitives.is_reduction(graph.nodes[i].op)]


@dataclass
class Fusion:
    """The kernels ``fuse`` chose: ``groups`` in schedule order, ``group_of`` node ->
    group index for every fused node, ``placed_after`` node -> the number of groups
    before it for every other computed node (matmuls, gathers, copied views)."""

    groups: list[Group]
    group_of: dict[int, int]
    placed_after: dict[int, int]

    def in_register(self, graph: Graph, consumer: int, j: int) -> bool:
        """Whether ``consumer`` reads value ``j`` from a register of its own group (a
        reduction's result is only complete after its loop, so it never is)."""
        g = self.group_of.get(consumer)
        return (g is not None and self.group_of.get(j) == g
                and not primitives.is_reduction(graph.nodes[j].op))


def _view_base(graph: Graph, i: int, is_view: Callable[[int], bool]) -> tuple[int, bool]:
    """The node a value is a view of, and whether any view op was crossed."""
    crossed = False
    while is_view(i):
        i = graph.nodes[i].inputs[0]
        crossed = True
    return i, crossed


def fuse(graph: Graph, is_view: Callable[[int], bool] | None = None,
         units: Mapping[int, int] | None = None) -> Fusion:
    """Group elementwise nodes of the same shape, and the reductions they feed, into
    kernels, in an order that respects every dependency.

    A node joins an earlier group of its shape when each of its inputs is either a
    member of that group (read from a register) or produced before the group starts
    (read from memory); a reduction's result is only readable after its group ends,
    and a value read through a view (a transpose, a broadcast, a reshape) must come from
    memory. Other nodes (``barrier``: matmuls, gathers, ...) close nothing: they only
    order themselves after their inputs, so groups they do not depend on stay open.
    ``is_view(i)`` says which nodes are free views (default: every ``primitives.is_view``
    op); a view the schedule must copy is a barrier like any other kernel. ``units``
    maps each node of a kernel found by pattern (``row_kernels.py``) to the group's first
    node: every member is placed where that first node is, like one barrier."""
    units = units or {}
    if is_view is None:
        def is_view(i: int) -> bool:
            return primitives.is_view(graph.nodes[i].op)
    groups: list[Group] = []
    group_of: dict[int, int] = {}
    # position of each non-fused compute node in the sequence of groups: a node placed
    # after group k is available to groups > k
    placed_after: dict[int, int] = {}

    def ready_at(j: int) -> int:
        """The first group index at which value j can be read from memory."""
        base, _ = _view_base(graph, j, is_view)
        node = graph.nodes[base]
        if node.op in SOURCE_OPS:
            return 0
        if base in group_of:
            return group_of[base] + 1
        return placed_after.get(base, 0)

    def can_join(k: int, node_inputs: Sequence[int]) -> bool:
        for j in node_inputs:
            if group_of.get(j) == k and not primitives.is_reduction(graph.nodes[j].op):
                continue  # a register of the same group
            if ready_at(j) > k:
                return False
        return True

    for i, node in enumerate(graph.nodes):
        if node.op in SOURCE_OPS or is_view(i):
            continue
        if i in units:
            placed_after[i] = placed_after.get(units[i], len(groups))
            continue
        if is_fusable(node):
            space = loop_space(graph, node)
            best, best_score = None, -1
            for k in range(len(groups) - 1, -1, -1):
                if groups[k].space != space or not can_join(k, node.inputs):
                    continue
                score = sum(1 for j in node.inputs if group_of.get(j) == k)
                if score > best_score:
                    best, best_score = k, score
            if best is None:
                groups.append(Group(space, []))
                best = len(groups) - 1
            groups[best].members.append(i)
            group_of[i] = best
        else:
            # a kernel after every group so far; groups opened later can read it
            placed_after[i] = len(groups)
    return Fusion(groups, group_of, placed_after)


__all__ = ["fuse", "Fusion", "Group", "is_fusable", "loop_space"]

"""Graph passes: each a function from one ``Graph`` to another, verified after it runs.

A graph's ``outputs`` are the roots a consumer asked for; every pass keeps them (renumbered)
and keeps every source node object as it was, so a lowered graph's parameters and inputs
can be traced back to the network they came from by identity.

The passes, in the order ``optimize`` runs them:

- ``dce``: dead-code elimination from the outputs (a twin an entry does not ask for is
  never scheduled);
- ``fold_constants``: leaf-only subgraphs evaluated once with the reference rules;
- ``simplify``: algebraic identities (``x*1``, ``x+0``, ``--x``, reshape of reshape,
  transpose of transpose, identity broadcasts, ``detach``);
- ``cse``: common subexpression elimination;

Fusion, which groups elementwise chains into kernels, is a scheduling decision rather
than a graph rewrite: it lives in ``fusion.py``, next to the schedule that uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..core import registry as primitives
from ..core.ir import SOURCE_OPS, Graph, Node, Type, closure, describe, freeze_attrs
from ..core.verify import verify

#: registry kinds whose every output element depends on one element of each input (fusable)
ELEMENTWISE_KINDS = frozenset({"elementwise"})
#: largest folded constant (elements) unless it is no bigger than what it replaces
FOLD_LIMIT = 4096


class _Rewriter:
    """Builds a new node list while mapping old ids to new ones."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def add(self, node: Node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def apply(self, op: str, inputs: Sequence[int], attrs: dict | tuple = ()) -> int:
        frozen = attrs if isinstance(attrs, tuple) else freeze_attrs(attrs)
        rule = primitives.REGISTRY[op]
        out = rule.infer([self.nodes[j].type for j in inputs], dict(frozen))
        return self.add(Node(op, tuple(inputs), frozen, out))

    def leaf(self, value: np.ndarray) -> int:
        value = np.array(value, copy=True, order="C")
        value.flags.writeable = False
        return self.add(Node("leaf", (), (), Type.of(value), value))


def _finish(nodes: list[Node], outputs: Iterable[int]) -> Graph:
    graph = Graph(tuple(nodes), tuple(outputs))
    verify(graph)
    return graph


def _remapped(node: Node, remap: Sequence[int]) -> Node:
    if not node.inputs:
        return node
    inputs = tuple(remap[j] for j in node.inputs)
    if inputs == node.inputs:
        return node
    return Node(node.op, inputs, node.attrs, node.type, node.value, node.name)


# ---------------------------------------------------------------------------------------
# dead-code elimination


def dce(graph: Graph, roots: Iterable[int] | None = None) -> Graph:
    """Keep only what ``roots`` (default: the graph's outputs) depend on."""
    roots = tuple(graph.outputs if roots is None else roots)
    keep = closure(graph, roots)
    remap = [-1] * len(graph.nodes)
    nodes: list[Node] = []
    for i in keep:
        remap[i] = len(nodes)
        nodes.append(_remapped(graph.nodes[i], remap))
    return _finish(nodes, [remap[r] for r in roots])


# ---------------------------------------------------------------------------------------
# common subexpression elimination


def cse(graph: Graph) -> Graph:
    """Merge nodes that compute the same value: same op, inputs, attrs and type, or
    leaves with the same contents. Parameters and inputs are never merged."""
    seen: dict[tuple, int] = {}
    remap: list[int] = []
    nodes: list[Node] = []
    for node in graph.nodes:
        new = _remapped(node, remap)
        if node.op in ("parameter", "input"):
            remap.append(len(nodes))
            nodes.append(new)
            continue
        key = new.key()
        if key in seen:
            remap.append(seen[key])
            continue
        seen[key] = len(nodes)
        remap.append(len(nodes))
        nodes.append(new)
    return _finish(nodes, [remap[r] for r in graph.outputs])


# ---------------------------------------------------------------------------------------
# constant folding


def _leaf_values(nodes: Sequence[Node], ids: Iterable[int]) -> list[np.ndarray] | None:
    """The values of nodes ``ids`` when every one is a leaf (which always carries its
    value), else None: only ops over leaves fold."""
    values = []
    for j in ids:
        value = nodes[j].value
        if nodes[j].op != "leaf" or value is None:
            return None
        values.append(value)
    return values


def fold_constants(graph: Graph, limit: int = FOLD_LIMIT) -> Graph:
    """Evaluate every op whose inputs are all leaves and replace it with a leaf.

    ``broadcast_to`` is never folded (a broadcast scalar is cheaper to compute than to
    store), nor is a result bigger than ``limit`` elements that is bigger than its
    inputs; an op whose reference raises (an out-of-range constant index) is kept so
    the error surfaces at run time, as in the interpreter."""
    rewriter = _Rewriter()
    remap: list[int] = []
    for node in graph.nodes:
        new = _remapped(node, remap)
        leaves = (_leaf_values(rewriter.nodes, new.inputs)
                  if node.op not in SOURCE_OPS and primitives.REGISTRY[node.op].foldable
                  and new.inputs else None)
        if leaves is not None:
            in_size = sum(rewriter.nodes[j].type.size for j in new.inputs)
            if new.type.size <= max(limit, in_size) or new.type.size <= in_size:
                try:
                    with np.errstate(all="ignore"):
                        value = primitives.REGISTRY[new.op].reference(leaves, new.attr_dict)
                    value = np.asarray(value).astype(new.type.dtype, copy=False)
                except Exception:
                    value = None
                if value is not None and Type.of(value) == new.type:
                    remap.append(rewriter.leaf(value))
                    continue
        remap.append(rewriter.add(new))
    return _finish(rewriter.nodes, [remap[r] for r in graph.outputs])


# ---------------------------------------------------------------------------------------
# algebraic simplification


def _uniform(node: Node) -> float | int | None:
    """The single value every element of a leaf holds, or None."""
    if node.op != "leaf" or node.value is None or node.value.size == 0:
        return None
    flat = node.value.reshape(-1)
    first = flat[0]
    if node.type.is_float and np.isnan(first):
        return None
    if flat.size > 1 and not np.all(flat == first):
        return None
    return first.item()


def simplify(graph: Graph) -> Graph:
    """Rewrite algebraic identities; every rewrite keeps the node's exact type.

    ``x*1``, ``1*x``, ``x/1``, ``x+0``, ``0+x``, ``x-0`` become ``x``; ``--x`` becomes
    ``x``; ``reshape(reshape(x))`` one reshape, a reshape to its own shape ``x``;
    ``transpose(transpose(x))`` one transpose (or ``x``); a broadcast to its own shape,
    a broadcast of a broadcast, and a broadcast feeding an elementwise op that
    broadcasts anyway are dropped; ``detach`` is the identity in a forward-only plan;
    a leaf whose elements are all equal becomes a broadcast scalar."""
    rw = _Rewriter()
    remap: list[int] = []
    nodes = rw.nodes

    def same(i: int, t: Type) -> bool:
        return nodes[i].type == t

    for node in graph.nodes:
        new = _remapped(node, remap)
        op, ins, t = new.op, new.inputs, new.type
        out: int | None = None
        if op == "leaf" and t.size > 1:
            value = _uniform(new)
            if value is not None:
                scalar = rw.leaf(np.asarray(value, dtype=t.dtype))
                out = rw.apply("broadcast_to", [scalar], {"shape": t.shape})
        elif op == "detach":
            out = ins[0]
        elif op in ("mul", "add", "sub", "div"):
            a, b = ins
            ua, ub = _uniform(nodes[a]), _uniform(nodes[b])
            base = _broadcast_base(nodes, a), _broadcast_base(nodes, b)
            ua = ua if ua is not None else _uniform(nodes[base[0]])
            ub = ub if ub is not None else _uniform(nodes[base[1]])
            if op == "mul" and ub == 1 and same(a, t):
                out = a
            elif op == "mul" and ua == 1 and same(b, t):
                out = b
            elif ((op == "div" and ub == 1 and same(a, t))
                  or (op in ("add", "sub") and ub == 0 and same(a, t))):
                out = a
            elif op == "add" and ua == 0 and same(b, t):
                out = b
        elif op == "neg" and nodes[ins[0]].op == "neg":
            out = nodes[ins[0]].inputs[0]
        elif op == "reshape":
            src = ins[0]
            if nodes[src].op == "reshape":
                src = nodes[src].inputs[0]
            if same(src, t):
                out = src
            elif src != ins[0]:
                out = rw.apply("reshape", [src], {"shape": t.shape})
        elif op == "transpose":
            axes = tuple(new.attr("axes"))
            src = ins[0]
            if nodes[src].op == "transpose":
                inner = tuple(nodes[src].attr("axes"))
                axes = tuple(inner[k] for k in axes)
                src = nodes[src].inputs[0]
            if axes == tuple(range(len(axes))):
                out = src
            elif src != ins[0]:
                out = rw.apply("transpose", [src], {"axes": axes})
        elif op == "broadcast_to":
            src = ins[0]
            if nodes[src].op == "broadcast_to":
                src = nodes[src].inputs[0]
            if same(src, t):
                out = src
            elif src != ins[0]:
                out = rw.apply("broadcast_to", [src], {"shape": t.shape})
        if out is None and op not in SOURCE_OPS and primitives.REGISTRY[op].broadcasts:
            # drop explicit broadcasts the op's own broadcasting makes redundant
            stripped = list(ins)
            for k, j in enumerate(ins):
                if nodes[j].op == "broadcast_to":
                    trial = list(stripped)
                    trial[k] = nodes[j].inputs[0]
                    try:
                        rule = primitives.REGISTRY[op].infer([nodes[x].type for x in trial],
                                                      new.attr_dict)
                    except Exception:
                        continue
                    if rule == t:
                        stripped = trial
            if stripped != list(ins):
                out = rw.add(Node(op, tuple(stripped), new.attrs, t))
        remap.append(rw.add(new) if out is None else out)
    return _finish(nodes, [remap[r] for r in graph.outputs])


def _broadcast_base(nodes: Sequence[Node], i: int) -> int:
    while nodes[i].op in ("broadcast_to", "reshape"):
        i = nodes[i].inputs[0]
    return i


# ---------------------------------------------------------------------------------------
# the pipeline


def canonical_order(graph: Graph, rank: Callable[[int, Node], tuple] | None = None) -> Graph:
    """Sources first (parameters, then inputs, then leaves, each in their order, or by
    ``rank``), then ops in their relative order: a stable form whose text, and so whose
    hash, does not depend on where a source was recorded."""
    def key(i: int) -> tuple:
        node = graph.nodes[i]
        group = {"parameter": 0, "input": 1, "leaf": 2}.get(node.op, 3)
        if group < 3 and rank is not None:
            return (group,) + tuple(rank(i, node))
        return (group, i)
    order = sorted(range(len(graph.nodes)), key=key)
    remap = [-1] * len(graph.nodes)
    for new, old in enumerate(order):
        remap[old] = new
    nodes = [_remapped(graph.nodes[old], remap) for old in order]
    return _finish(nodes, [remap[r] for r in graph.outputs])


PIPELINE: tuple[Callable[[Graph], Graph], ...] = (fold_constants, simplify, cse)


def optimize(graph: Graph, rounds: int = 4) -> Graph:
    """DCE, then fold, simplify and CSE until nothing changes (at most ``rounds``
    rounds), then DCE again. Every intermediate graph is verified."""
    graph = dce(graph)
    text = describe(graph)
    for _ in range(rounds):
        for step in PIPELINE:
            graph = step(graph)
        graph = dce(graph)
        new_text = describe(graph)
        if new_text == text:
            break
        text = new_text
    return graph


__all__ = ["dce", "cse", "fold_constants", "simplify", "canonical_order", "optimize",
           "PIPELINE", "ELEMENTWISE_KINDS"]

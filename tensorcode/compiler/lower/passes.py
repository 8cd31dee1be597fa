"""Graph passes: each a function from one ``Graph`` to another, verified after it runs.

A graph's ``outputs`` are the roots a consumer asked for; every pass keeps them (renumbered)
and keeps every source node object as it was, so a lowered graph's parameters and inputs
carry the network node they came from (``Node.origin``) through every pass.

The passes, in the order ``optimize`` runs them:

- ``dce``: dead-code elimination from the outputs (a twin an entry does not ask for is
  never scheduled);
- ``fold_constants``: leaf-only subgraphs evaluated once with the reference rules;
- ``simplify``: algebraic identities (``x*1``, ``x+0``, ``--x``, reshape of reshape,
  transpose of transpose, identity broadcasts, ``detach``), written as the rewrite rules
  of ``SIMPLIFY`` (``patterns.py``);
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
from .patterns import Pat, Rules

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


def _uniform_through_views(node: Node, nodes: Sequence[Node]) -> float | int | None:
    """``_uniform`` of ``node``, or else of what it broadcasts or reshapes."""
    value = _uniform(node)
    if value is not None:
        return value
    base = node
    while base.op in ("broadcast_to", "reshape"):
        base = nodes[base.inputs[0]]
    return _uniform(base)


def _is(value: int) -> Pat:
    """An operand every element of which is ``value`` (seen through broadcasts and
    reshapes)."""
    return Pat(where=lambda node, nodes: _uniform_through_views(node, nodes) == value)


X = Pat(name="x")


def _same(rw: _Rewriter, node: Node, x: int) -> int | None:
    """``x`` in ``node``'s place when it has ``node``'s exact type."""
    return x if rw.nodes[x].type == node.type else None


def _uniform_leaf(rw: _Rewriter, node: Node) -> int | None:
    value = _uniform(node)
    if value is None:
        return None
    scalar = rw.leaf(np.asarray(value, dtype=node.type.dtype))
    return rw.apply("broadcast_to", [scalar], {"shape": node.type.shape})


def _view_of_view(op: str, attr: str) -> Callable[..., int]:
    """``op(op(x))`` as one ``op`` of ``x`` (or ``x`` when that has the node's type)."""
    def rewrite(rw: _Rewriter, node: Node, x: int) -> int:
        if rw.nodes[x].type == node.type:
            return x
        return rw.apply(op, [x], {attr: node.type.shape})
    return rewrite


def _transposes(rw: _Rewriter, node: Node, inner: int, x: int) -> int:
    axes = tuple(node.attr("axes"))
    first = tuple(rw.nodes[inner].attr("axes"))
    axes = tuple(first[k] for k in axes)
    if axes == tuple(range(len(axes))):
        return x
    return rw.apply("transpose", [x], {"axes": axes})


def _identity_transpose(rw: _Rewriter, node: Node, x: int) -> int | None:
    axes = tuple(node.attr("axes"))
    return x if axes == tuple(range(len(axes))) else None


def _broadcasts_itself(node: Node, nodes: Sequence[Node]) -> bool:
    return node.op not in SOURCE_OPS and primitives.REGISTRY[node.op].broadcasts


def _strip_broadcasts(rw: _Rewriter, node: Node) -> int | None:
    """``node`` without the explicit broadcasts of its inputs that its own broadcasting
    makes redundant (each dropped only where the type stays the same)."""
    nodes, ins = rw.nodes, node.inputs
    stripped = list(ins)
    for k, j in enumerate(ins):
        if nodes[j].op == "broadcast_to":
            trial = list(stripped)
            trial[k] = nodes[j].inputs[0]
            try:
                rule = primitives.REGISTRY[node.op].infer([nodes[x].type for x in trial],
                                                          node.attr_dict)
            except Exception:
                continue
            if rule == node.type:
                stripped = trial
    if stripped == list(ins):
        return None
    return rw.add(Node(node.op, tuple(stripped), node.attrs, node.type))


#: ``simplify``'s rewrites, tried in this order (see ``simplify``); an action gets the
#: rewriter, the node and its bound inputs and returns the id that replaces the node
SIMPLIFY = Rules([
    (Pat("leaf", where=lambda node, nodes: node.type.size > 1), _uniform_leaf),
    (Pat("detach", src=(X,)), lambda rw, node, x: x),
    (Pat("mul", src=(X, _is(1))), _same),
    (Pat("mul", src=(_is(1), X)), _same),
    (Pat("div", src=(X, _is(1))), _same),
    (Pat(frozenset({"add", "sub"}), src=(X, _is(0))), _same),
    (Pat("add", src=(_is(0), X)), _same),
    (Pat("neg", src=(Pat("neg", src=(X,)),)), lambda rw, node, x: x),
    (Pat("reshape", src=(Pat("reshape", src=(X,)),)), _view_of_view("reshape", "shape")),
    (Pat("reshape", src=(X,)), _same),
    (Pat("transpose", src=(Pat("transpose", src=(X,), name="inner"),)), _transposes),
    (Pat("transpose", src=(X,)), _identity_transpose),
    (Pat("broadcast_to", src=(Pat("broadcast_to", src=(X,)),)),
     _view_of_view("broadcast_to", "shape")),
    (Pat("broadcast_to", src=(X,)), _same),
    (Pat(where=_broadcasts_itself), _strip_broadcasts),
])


def simplify(graph: Graph) -> Graph:
    """Rewrite algebraic identities (the rules of ``SIMPLIFY``); every rewrite keeps the
    node's exact type.

    ``x*1``, ``1*x``, ``x/1``, ``x+0``, ``0+x``, ``x-0`` become ``x``; ``--x`` becomes
    ``x``; ``reshape(reshape(x))`` one reshape, a reshape to its own shape ``x``;
    ``transpose(transpose(x))`` one transpose (or ``x``); a broadcast to its own shape,
    a broadcast of a broadcast, and a broadcast feeding an elementwise op that
    broadcasts anyway are dropped; ``detach`` is the identity in a forward-only plan;
    a leaf whose elements are all equal becomes a broadcast scalar."""
    rw = _Rewriter()
    remap: list[int] = []
    for node in graph.nodes:
        new = _remapped(node, remap)
        out = SIMPLIFY.apply(rw, new, rw.nodes)
        remap.append(rw.add(new) if out is None else out)
    return _finish(rw.nodes, [remap[r] for r in graph.outputs])


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

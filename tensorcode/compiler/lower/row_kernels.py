"""Shapes of work the schedule lowers as one kernel of their own, found by pattern.

A layer norm is seven registry ops whatever wrote it (``tc.layer_norm``,
``tc.nn.LayerNorm``, a hand-written tape): the row's mean, the centered row, its
square, the variance, ``+ eps``, the square root and the division, and often a gain and
a bias after it. As fused elementwise kernels it is four loop nests (the mean; the
centered row, stored whole, and the variance; ``sqrt(v + eps)`` over one value per
row; the division) reading the row three times from memory and writing it once more
than it must. ``layer_norms(graph, is_view)`` finds each such group of nodes, so the
schedule can lower it as one ``LayerNormKernel`` (``kernels.py``) that keeps the row
in cache (``loops.py``); anything that does not match exactly stays with today's
kernels. ``softmaxes`` finds softmaxes (``max``, ``z - max``, ``exp``, ``sum``, the
division) and log-sum-exps (the same, then ``log(sum) + max``: the cross-entropy's) over
the last axis, each one ``SoftmaxKernel``: three kernels today, writing the row of
exponentials to memory in between.

A match needs: ``m = mean(x, axis=[last], keepdims)``, ``c = x - m``, ``q = c * c``,
``v = mean(q, axis=[last], keepdims)``, ``e = v + eps`` (either order; ``eps`` a
one-element leaf), ``s = sqrt(e)``, ``y = c / s``, every value float32 or float64 of one
dtype. Then, when ``y``'s only consumer is ``y * g`` with ``g`` a source (a parameter,
input or constant, or a view of one) of shape ``[n]``, the product joins, and likewise
``+ b`` after it. Members read outside the group are stored by the kernel; the others
never touch memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.ir import SOURCE_OPS, Graph


@dataclass(frozen=True)
class LayerNormMatch:
    """One layer norm: its input ``x``, ``eps`` (a leaf), the nodes ``mean``,
    ``centered``, ``square``, ``variance``, ``shifted`` (``v + eps``), ``deviation``
    (the square root), ``normalized``, then optionally ``scaled`` (``* gain``) and
    ``shifted_out`` (``+ bias``); ``gain`` and ``bias`` their vectors (-1 when absent).
    ``members`` lists every node of the group in graph order."""

    x: int
    eps: int
    mean: int
    centered: int
    square: int
    variance: int
    shifted: int
    deviation: int
    normalized: int
    scaled: int = -1
    gain: int = -1
    shifted_out: int = -1
    bias: int = -1

    @property
    def members(self) -> tuple[int, ...]:
        found = (self.mean, self.centered, self.square, self.variance, self.shifted,
                 self.deviation, self.normalized, self.scaled, self.shifted_out)
        return tuple(sorted(i for i in found if i >= 0))

    @property
    def result(self) -> int:
        """The last node of the group (the value the group stands for)."""
        return max(self.members)


def _users(graph: Graph) -> list[list[int]]:
    users: list[list[int]] = [[] for _ in graph.nodes]
    for i, node in enumerate(graph.nodes):
        for j in set(node.inputs):
            users[j].append(i)
    for j in graph.outputs:
        users[j].append(-1)
    return users


def layer_norms(graph: Graph, is_view: Callable[[int], bool]) -> list[LayerNormMatch]:
    """Every layer norm of ``graph`` (see the module doc), no node in two matches."""
    nodes = graph.nodes
    users = _users(graph)
    found: list[LayerNormMatch] = []
    taken: set[int] = set()

    def last_axis_mean(i: int, of: int) -> bool:
        node = nodes[i]
        rank = nodes[of].type.rank
        return (node.op == "mean" and node.inputs == (of,) and rank >= 1
                and list(node.attr("axis")) == [rank - 1] and bool(node.attr("keepdims")))

    def source(i: int) -> bool:
        while is_view(i):
            i = nodes[i].inputs[0]
        return nodes[i].op in SOURCE_OPS

    def one_user(i: int, op: str) -> int:
        if len(users[i]) != 1 or users[i][0] < 0 or nodes[users[i][0]].op != op:
            return -1
        return users[i][0]

    for y, node in enumerate(nodes):
        if node.op != "div" or node.type.dtype not in ("float32", "float64"):
            continue
        c, s = node.inputs
        cn, sn = nodes[c], nodes[s]
        if cn.op != "sub" or sn.op != "sqrt" or cn.type.shape != node.type.shape:
            continue
        x, m = cn.inputs
        if not last_axis_mean(m, x) or nodes[x].type.dtype != node.type.dtype:
            continue
        e = sn.inputs[0]
        if nodes[e].op != "add":
            continue
        a, b = nodes[e].inputs
        v, eps = (a, b) if nodes[b].op == "leaf" else (b, a)
        if nodes[eps].op != "leaf" or nodes[eps].type.size != 1 or \
                nodes[eps].type.dtype != node.type.dtype:
            continue
        if not nodes[v].inputs or not last_axis_mean(v, nodes[v].inputs[0]):
            continue
        q = nodes[v].inputs[0]
        if nodes[q].op != "mul" or nodes[q].inputs != (c, c):
            continue
        n = node.type.shape[-1] if node.type.rank else 1
        match = dict(x=x, eps=eps, mean=m, centered=c, square=q, variance=v, shifted=e,
                     deviation=s, normalized=y)
        tail = y
        for op, name, vector in (("mul", "scaled", "gain"), ("add", "shifted_out", "bias")):
            user = one_user(tail, op)
            if user < 0:
                break
            other = [j for j in nodes[user].inputs if j != tail]
            if len(other) != 1 or nodes[other[0]].type.shape != (n,) or \
                    nodes[other[0]].type.dtype != node.type.dtype or not source(other[0]) or \
                    nodes[user].type.shape != node.type.shape:
                break
            match[name], match[vector] = user, other[0]
            tail = user
        made = LayerNormMatch(**match)
        if taken.isdisjoint(made.members):
            taken.update(made.members)
            found.append(made)
    return found


@dataclass(frozen=True)
class SoftmaxMatch:
    """A softmax or a log-sum-exp over the last axis of ``z``: ``peak = max(z)``,
    ``shifted = z - peak``, ``exps = exp(shifted)``, ``total = sum(exps)``, then
    ``probabilities = exps / total`` or ``log_total = log(total)`` and ``lse =
    log_total + peak`` (-1 for the form absent). ``members`` in graph order."""

    z: int
    peak: int
    shifted: int
    exps: int
    total: int
    probabilities: int = -1
    log_total: int = -1
    lse: int = -1

    @property
    def members(self) -> tuple[int, ...]:
        found = (self.peak, self.shifted, self.exps, self.total, self.probabilities,
                 self.log_total, self.lse)
        return tuple(sorted(i for i in found if i >= 0))


def softmaxes(graph: Graph, is_view: Callable[[int], bool],
              taken: set[int] | None = None) -> list[SoftmaxMatch]:
    """Every softmax and log-sum-exp over the last axis of ``graph`` (``SoftmaxMatch``),
    none with a node of ``taken`` (nor two with one node)."""
    nodes = graph.nodes
    users = _users(graph)
    taken = set(taken or ())
    found: list[SoftmaxMatch] = []

    def last_axis(i: int, op: str, of: int) -> bool:
        node = nodes[i]
        rank = nodes[of].type.rank
        return (node.op == op and node.inputs == (of,) and rank >= 1
                and list(node.attr("axis")) == [rank - 1] and bool(node.attr("keepdims")))

    for t, node in enumerate(nodes):
        if node.op != "sum" or node.type.dtype not in ("float32", "float64"):
            continue
        e = node.inputs[0]
        if not last_axis(t, "sum", e) or nodes[e].op != "exp":
            continue
        d = nodes[e].inputs[0]
        if nodes[d].op != "sub":
            continue
        z, m = nodes[d].inputs
        if not last_axis(m, "max", z) or nodes[z].type.dtype != node.type.dtype or \
                nodes[d].type.shape != nodes[z].type.shape:
            continue
        match: dict[str, int] = dict(z=z, peak=m, shifted=d, exps=e, total=t)
        for u in users[t]:
            if u >= 0 and nodes[u].op == "div" and nodes[u].inputs == (e, t):
                match["probabilities"] = u
                break
        else:
            for u in users[t]:
                if u < 0 or nodes[u].op != "log":
                    continue
                adds = [a for a in users[u] if a >= 0 and nodes[a].op == "add"
                        and set(nodes[a].inputs) == {u, m}]
                if adds:
                    match["log_total"], match["lse"] = u, adds[0]
                    break
        if "probabilities" not in match and "lse" not in match:
            continue
        made = SoftmaxMatch(**match)
        if taken.isdisjoint(made.members):
            taken.update(made.members)
            found.append(made)
    return found


__all__ = ["LayerNormMatch", "layer_norms", "SoftmaxMatch", "softmaxes"]

"""The NumPy reference interpreter: the oracle every other backend is tested against.

It evaluates a graph node by node with each op's ``reference`` rule from the registry,
computing only what the requested roots need and reusing values already known;
``Prepared`` does the graph walk once for a program run many times. As a
``Backend`` it prepares nothing ahead of time: a plan on it interprets its optimized
graph at every call, so it never approximates and never touches the plan cache.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import numpy as np

from ...core import registry as primitives
from ...core.ir import Graph, closure


def evaluate(graph: Graph, values: MutableMapping[int, np.ndarray], roots: Iterable[int]
             ) -> MutableMapping[int, np.ndarray]:
    """Fill ``values`` (node id -> array) for every node ``roots`` depend on.

    ``values`` must already hold every parameter and input the roots reach; leaves are
    taken from the graph. Results are read-only so no caller can change a shared value.
    """
    roots = [r for r in roots if r not in values]
    if not roots:
        return values
    for i in closure(graph, roots):
        if i in values:
            continue
        node = graph.nodes[i]
        if node.op == "leaf":
            assert node.value is not None  # a leaf always carries its value
            values[i] = node.value
            continue
        if node.op in ("parameter", "input"):
            raise KeyError(f"no value supplied for {node.op} %{i}")
        result = primitives.REGISTRY[node.op].reference([values[j] for j in node.inputs],
                                                 node.attr_dict)
        result = np.asarray(result)
        if result.dtype.name != node.type.dtype:
            result = result.astype(node.type.dtype)
        result.flags.writeable = False
        values[i] = result
    return values


class Prepared:
    """The interpreter with the graph resolved once for fixed ``roots``.

    ``evaluate`` walks the graph at every call: it computes the closure of the roots,
    looks each op up in the registry and reads its attrs and dtype. A program called
    many times with the same graph (the distillation oracle, the reference executor)
    pays that once here: construction keeps the nodes the roots need, in order, each
    with its rule bound to its attrs (``OpDef.prepare``, or ``reference`` when an op has
    none) and its result dtype. ``prepared(sources)`` then runs the steps with NumPy's
    floating-point warnings silenced once for the whole call, and returns the roots'
    values (in ``roots`` order) computed by the same rules as ``evaluate``.
    """

    def __init__(self, graph: Graph, roots: Iterable[int]) -> None:
        self.roots = tuple(roots)
        order = closure(graph, list(self.roots))
        self._known: dict[int, Any] = {}
        self.sources: tuple[int, ...] = tuple(
            i for i in order if graph.nodes[i].op in ("parameter", "input"))
        steps = []
        for i in order:
            node = graph.nodes[i]
            if node.op == "leaf":
                assert node.value is not None  # a leaf always carries its value
                self._known[i] = node.value
                continue
            if node.op in ("parameter", "input"):
                continue
            op = primitives.REGISTRY[node.op]
            attrs = node.attr_dict
            if op.prepare is not None:
                rule = op.prepare(attrs)
            else:
                rule = functools.partial(_with_attrs, op.reference, attrs)
            steps.append((i, rule, tuple(node.inputs), np.dtype(node.type.dtype)))
        self._steps = tuple(steps)

    def __call__(self, sources: Mapping[int, np.ndarray]) -> list[np.ndarray]:
        """The roots' values given every parameter and input in ``self.sources``
        (``KeyError`` names a missing one). A computed root is this call's own array; a
        root that is a leaf or a source is that value itself."""
        values = dict(self._known)
        values.update(sources)
        for i in self.sources:
            if i not in values:
                raise KeyError(f"no value supplied for %{i}")
        with np.errstate(all="ignore"):
            for i, rule, inputs, dtype in self._steps:
                # a rule may return a NumPy scalar for a 0-d result: every rule takes one,
                # and the roots are made arrays below (builtin dtypes are singletons)
                result = rule([values[j] for j in inputs])
                if result.dtype is not dtype:
                    result = result.astype(dtype)
                values[i] = result
        return [np.asarray(values[r]) for r in self.roots]


def _with_attrs(rule: Any, attrs: Any, arrays: Any) -> Any:
    return rule(arrays, attrs)


__all__ = ["evaluate", "Prepared"]

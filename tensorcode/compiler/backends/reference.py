"""The NumPy reference interpreter: the oracle every other backend is tested against.

It evaluates a graph node by node with each op's ``reference`` rule from the registry,
computing only what the requested roots need and reusing values already known. As a
``Backend`` it prepares nothing ahead of time: a plan on it interprets its optimized
graph at every call, so it never approximates and never touches the plan cache.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING

import numpy as np

from .. import primitives
from ..ir import Graph, closure

if TYPE_CHECKING:  # pragma: no cover
    from ..schedule import Schedule


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


class ReferenceBackend:
    """The ``Backend`` of the NumPy interpreter: nothing to generate or compile."""

    name = "reference"
    approximates = False

    def prepare(self, schedule: Schedule, approximate: bool) -> None:
        """No program: the plan evaluates its optimized graph with ``evaluate``."""
        return None


BACKEND = ReferenceBackend()

__all__ = ["evaluate", "ReferenceBackend", "BACKEND"]

"""The IR verifier: every reference, order and type rule checked against the registry.

It sits above both ``ir`` (the data structures) and ``primitives`` (the type rules), so
neither of those imports the other in a circle.
"""

from __future__ import annotations

from ...errors import CompileError
from . import registry as primitives
from .ir import SOURCE_OPS, Graph, Type


def verify(graph: Graph) -> None:
    """Check references, order and types; raise ``CompileError`` naming the node.

    Every pass's output goes through this, so a pass that breaks an invariant is
    caught where it happened rather than as a wrong number later.
    """
    for index, node in enumerate(graph.nodes):
        where = f"node %{index} ({node.op})"
        if not isinstance(node.type, Type):
            raise CompileError(f"{where}: type is {node.type!r}, not a Type")
        for j in node.inputs:
            if not isinstance(j, int) or j < 0 or j >= index:
                raise CompileError(f"{where}: input %{j} does not refer to an earlier node")
        if node.op in SOURCE_OPS:
            if node.inputs:
                raise CompileError(f"{where}: a {node.op} takes no inputs")
            if node.value is None:
                raise CompileError(f"{where}: a {node.op} needs its value")
            if Type.of(node.value) != node.type:
                raise CompileError(
                    f"{where}: value has type {Type.of(node.value)} but the node says {node.type}")
            continue
        if node.op not in primitives.REGISTRY:
            raise CompileError(f"{where}: unknown op {node.op!r}")
        in_types = [graph.nodes[j].type for j in node.inputs]
        try:
            expected = primitives.REGISTRY[node.op].infer(in_types, node.attr_dict)
        except Exception as error:  # the type rule's own error, re-raised with the node
            raise CompileError(f"{where}: {error}") from error
        if expected != node.type:
            raise CompileError(f"{where}: type is {node.type} but its rule gives {expected}")
    for j in graph.outputs:
        if not isinstance(j, int) or j < 0 or j >= len(graph.nodes):
            raise CompileError(f"output %{j} does not refer to a node")

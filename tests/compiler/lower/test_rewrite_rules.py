"""The rewrite rules (``lower/patterns.py``) and the passes written with them: the
optimized graphs of several workloads are exactly what the passes gave as if/elif chains
(``data/optimized_graphs.json``, captured from that code), and the engine itself matches,
binds and declines as documented."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from optimized_workloads import optimized_text, workloads

from tensorcode.compiler.core.ir import Node, Type
from tensorcode.compiler.lower import kernels, passes
from tensorcode.compiler.lower.patterns import Pat, Rules

EXPECTED = json.loads((pathlib.Path(__file__).parent / "data" / "optimized_graphs.json")
                      .read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def built():
    return workloads()


def test_every_pinned_workload_is_built(built):
    assert set(built) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_optimized_graph_is_unchanged(built, name):
    network, roots = built[name]
    assert optimized_text(network, roots) == EXPECTED[name]


F32 = Type((2,), "float32")


def _node(op, *inputs, **attrs):
    return Node(op, tuple(inputs), tuple(sorted(attrs.items())), F32)


def test_a_pattern_matches_op_inputs_and_binds_names():
    nodes = [_node("input"), _node("neg", 0), _node("neg", 1)]
    pattern = Pat("neg", src=(Pat("neg", src=(Pat(name="x"),), name="inner"),))
    bound: dict[str, int] = {}
    assert pattern.match(nodes[2], nodes, bound) and bound == {"x": 0, "inner": 1}
    assert not pattern.match(nodes[1], nodes, {})  # its input is no neg
    assert not Pat("neg", src=(Pat(), Pat())).match(nodes[1], nodes, {})  # arity
    assert Pat(frozenset({"add", "neg"})).match(nodes[1], nodes, {})
    assert not Pat(where=lambda node, nodes: node.op == "add").match(nodes[1], nodes, {})


def test_rules_run_in_order_and_a_declining_action_passes_to_the_next():
    nodes = [_node("input"), _node("neg", 0)]
    seen = []
    rules = Rules([
        (Pat("add"), lambda context, node: "add"),
        (Pat("neg", src=(Pat(name="x"),)), lambda context, node, x: seen.append(x)),
        (Pat(), lambda context, node: f"any {node.op} {context}"),
    ])
    assert rules.apply("ctx", nodes[1], nodes) == "any neg ctx"
    assert seen == [0]
    assert rules.apply("ctx", nodes[0], nodes) == "any input ctx"
    assert rules.ops() == {"add", "neg"}


def test_the_passes_and_kernel_builders_are_rule_tables():
    """Which ops each table rewrites is data: every view op has a view rule, and every
    index op a kernel rule."""
    assert {"detach", "mul", "add", "sub", "div", "neg", "reshape", "transpose",
            "broadcast_to", "leaf"} <= passes.SIMPLIFY.ops()
    assert kernels.VIEWS.ops() == {"detach", "reshape", "transpose", "broadcast_to", "slice"}
    assert {"take", "scatter_add", "one_hot", "concat", "pad"} <= kernels.INDEX_KERNELS.ops()


def test_a_uniform_leaf_becomes_a_broadcast_scalar():
    leaf = Node("leaf", (), (), Type((3,), "float32"), np.full(3, 2.0, np.float32))
    graph = passes.simplify(passes.Graph((leaf,), (0,)))
    assert [n.op for n in graph.nodes] == ["leaf", "broadcast_to"]


def test_sources_carry_their_network_node_through_the_passes(built):
    network, roots = built["mlp_embedding"]
    entry = network.entry(roots)
    graph, _ = entry.optimized()
    sources = {i: node.origin for i, node in enumerate(graph.nodes)
               if node.op in ("parameter", "input")}
    assert sources and entry.origins() == sources
    for i, origin in sources.items():
        recorded = network.graph.nodes[origin]
        assert (recorded.op, recorded.name, recorded.type) == \
            (graph.nodes[i].op, graph.nodes[i].name, graph.nodes[i].type)

"""Each graph pass alone: verified output, preserved values, and the rewrite it promises."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_graphs import TOLERANCE, random_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorcode as tc
from tensorcode.compiler.backends.reference import interpreter as reference
from tensorcode.compiler.core import ir
from tensorcode.compiler.core import registry as primitives
from tensorcode.compiler.core.verify import verify
from tensorcode.compiler.lower import passes
from tensorcode.compiler.lower.fusion import Fusion, fuse


def values_of(graph: ir.Graph) -> list[np.ndarray]:
    """Evaluate a graph's outputs with the reference interpreter (sources from the
    recorded initials and defaults)."""
    values = {i: n.value for i, n in enumerate(graph.nodes) if n.op in ("parameter", "input")}
    reference.evaluate(graph, values, graph.outputs)
    return [values[o] for o in graph.outputs]


def entry_graph(network, roots) -> ir.Graph:
    return ir.Graph(network.graph.nodes, tuple(network.node_of(r) for r in roots))


def ops_of(graph: ir.Graph) -> list[str]:
    return [n.op for n in graph.nodes]


def test_dce_drops_a_twin_the_entry_does_not_ask_for():
    tape = tc.Tape()
    w = tape.parameter(np.ones((3, 2), np.float32), name="w")
    x = tape.input(np.ones((4, 3), np.float32), name="x")
    grid = tape.input(np.ones((50, 3), np.float32), name="grid")
    loss = (x @ w).tanh().mean()
    twin = (grid @ w).tanh()  # the plotting twin
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    graph = passes.dce(entry_graph(network, adjoints.roots()))
    verify(graph)
    assert all(50 not in n.type.shape for n in graph.nodes), ir.describe(graph)
    assert not any(n.op == "input" and n.name == "grid" for n in graph.nodes)
    # asking for the twin keeps it
    graph = passes.dce(entry_graph(network, [twin]))
    assert any(n.op == "input" and n.name == "grid" for n in graph.nodes)


def test_cse_merges_equal_values_but_never_sources():
    tape = tc.Tape()
    a = tape.parameter(np.ones(3), name="a")
    b = tape.parameter(np.ones(3), name="b")  # same type and value as a: still distinct
    one = tape.leaf(np.ones(3))
    one_again = tape.leaf(np.ones(3))
    out = (a * one).exp() + (a * one_again).exp() + b
    network = tape.into_network()
    before = entry_graph(network, [out])
    after = passes.cse(before)
    verify(after)
    assert ops_of(after).count("exp") == 1
    assert ops_of(after).count("parameter") == 2
    np.testing.assert_allclose(values_of(after)[0], values_of(before)[0])


def test_fold_constants_evaluates_leaf_only_subgraphs():
    tape = tc.Tape()
    x = tape.input(np.ones(4), name="x")
    c = tape.leaf(np.arange(4.0))
    k = (c * 2.0 + 1.0).exp().sum()  # leaf only
    out = x * k
    network = tape.into_network()
    before = entry_graph(network, [out])
    after = passes.dce(passes.fold_constants(before))
    verify(after)
    assert "exp" not in ops_of(after) and "sum" not in ops_of(after)
    np.testing.assert_allclose(values_of(after)[0], values_of(before)[0])


def test_fold_constants_keeps_broadcasts_and_bad_indices():
    tape = tc.Tape()
    zero = tape.leaf(np.float64(0.0))
    big = zero.broadcast_to((100, 100))
    table = tape.leaf(np.arange(3.0))
    bad = table.take(tape.leaf(np.array([5])))  # out of range: the run reports it
    network = tape.into_network()
    after = passes.fold_constants(entry_graph(network, [big, bad]))
    verify(after)
    assert "broadcast_to" in ops_of(after) and "take" in ops_of(after)


@pytest.mark.parametrize("build, gone", [
    (lambda x: x * 1.0, "mul"),
    (lambda x: 1.0 * x, "mul"),
    (lambda x: x + 0.0, "add"),
    (lambda x: x - 0.0, "sub"),
    (lambda x: x / 1.0, "div"),
    (lambda x: -(-x), "neg"),  # noqa: B002 - negation twice, not a decrement
    (lambda x: x.reshape(6).reshape(2, 3), "reshape"),
    (lambda x: x.T.T, "transpose"),
    (lambda x: x.detach(), "detach"),
])
def test_simplify_removes_identities(build, gone):
    tape = tc.Tape()
    x = tape.input(np.arange(6.0).reshape(2, 3), name="x")
    y = build(x).exp()
    network = tape.into_network()
    before = entry_graph(network, [y])
    after = passes.dce(passes.simplify(before))
    verify(after)
    assert gone not in ops_of(after), ir.describe(after)
    np.testing.assert_allclose(values_of(after)[0], values_of(before)[0])


def test_simplify_merges_shape_chains_and_drops_identity_broadcasts():
    tape = tc.Tape()
    x = tape.input(np.arange(24.0).reshape(2, 3, 4), name="x")
    y = x.reshape(6, 4).reshape(4, 6)  # reshape of reshape
    z = x.transpose(1, 0, 2).transpose(2, 0, 1)  # transposes compose
    b = tape.input(np.ones(4), name="b")
    w = x + b.broadcast_to((2, 3, 4))  # the add broadcasts anyway
    v = b.broadcast_to((3, 4)).broadcast_to((2, 3, 4)) * 2.0
    network = tape.into_network()
    before = entry_graph(network, [y, z, w, v])
    after = passes.dce(passes.simplify(before))
    verify(after)
    assert ops_of(after).count("reshape") == 1
    assert ops_of(after).count("transpose") == 1
    assert ops_of(after).count("broadcast_to") <= 1
    for a, b_ in zip(values_of(after), values_of(before)):
        np.testing.assert_allclose(a, b_)


def test_simplify_turns_uniform_leaves_into_broadcast_scalars():
    tape = tc.Tape()
    x = tape.input(np.arange(6.0).reshape(2, 3), name="x")
    y = x * tape.leaf(np.full((2, 3), 3.0))
    network = tape.into_network()
    before = entry_graph(network, [y])
    after = passes.dce(passes.simplify(before))
    assert all(n.type.size == 1 for n in after.nodes if n.op == "leaf")
    np.testing.assert_allclose(values_of(after)[0], values_of(before)[0])


def test_optimize_is_idempotent_and_canonical_order_is_stable():
    network, loss, adjoints, _ = random_program(3, "float32", steps=10)
    graph = passes.optimize(entry_graph(network, adjoints.roots()))
    again = passes.optimize(graph)
    assert ir.describe(again) == ir.describe(graph)
    ordered = passes.canonical_order(graph)
    verify(ordered)
    kinds = [n.op for n in ordered.nodes]
    first_op = next(k for k, op in enumerate(kinds) if op not in ir.SOURCE_OPS)
    assert all(op not in ir.SOURCE_OPS for op in kinds[first_op:])


def test_fuse_groups_elementwise_chains_with_their_reductions():
    tape = tc.Tape()
    x = tape.input(np.ones((8, 4), np.float32), name="x")
    w = tape.parameter(np.ones((4, 4), np.float32), name="w")
    h = ((x @ w) + 1.0).tanh()
    loss = (h * h).sum() + h.mean()
    network = tape.into_network()
    graph = passes.optimize(entry_graph(network, [loss]))
    fusion = fuse(graph)
    tanh = next(i for i, n in enumerate(graph.nodes) if n.op == "tanh")
    group = fusion.groups[fusion.group_of[tanh]]
    fused_ops = {graph.nodes[i].op for i in group.members}
    assert {"add", "tanh", "mul", "sum", "mean"} <= fused_ops
    _check_fusion(graph, fusion)


def _check_fusion(graph: ir.Graph, fusion: Fusion) -> None:
    """Every member has its group's space; nothing reads a reduction of its own group;
    no group reads a value produced by a later group or kernel."""
    for k, group in enumerate(fusion.groups):
        for i in group.members:
            node = graph.nodes[i]
            space = (node.type.shape if not primitives.is_reduction(node.op)
                     else graph.nodes[node.inputs[0]].type.shape)
            assert space == group.space
            for j in node.inputs:
                base = j
                while primitives.is_view(graph.nodes[base].op):
                    base = graph.nodes[base].inputs[0]
                if base in fusion.group_of:
                    g = fusion.group_of[base]
                    if g == k:
                        assert base == j and not primitives.is_reduction(graph.nodes[j].op)
                    else:
                        assert g < k
                elif base in fusion.placed_after:
                    assert fusion.placed_after[base] <= k


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), dtype=st.sampled_from(["float32", "float64"]))
def test_every_pass_preserves_values_on_random_graphs(seed, dtype):
    network, loss, adjoints, extras = random_program(seed, dtype, steps=10)
    graph = entry_graph(network, adjoints.roots() + extras)
    expected = values_of(graph)
    for step in (passes.dce, passes.fold_constants, passes.simplify, passes.cse,
                 passes.canonical_order, passes.optimize):
        after = step(graph)
        verify(after)
        assert len(after.outputs) == len(graph.outputs)
        for k, (a, b) in enumerate(zip(values_of(after), expected)):
            np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                       err_msg=f"{step.__name__} output {k}",
                                       **TOLERANCE[dtype])
    _check_fusion(passes.optimize(graph), fuse(passes.optimize(graph)))

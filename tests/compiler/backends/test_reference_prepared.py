"""The prepared interpreter computes what the node-by-node interpreter computes, with
the graph resolved once."""

from __future__ import annotations

import numpy as np
import pytest
from compiler_graphs import random_program

from tensorcode.compiler.backends.reference import interpreter as reference
from tensorcode.compiler.core import registry as primitives


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_20_prepared_equals_evaluate_on_random_programs(seed, dtype):
    network, loss, adjoints, extras = random_program(seed, dtype, parts=2)
    graph = network.graph
    roots = [network.node_of(loss)] + [network.node_of(g) for _, g in adjoints] + [
        network.node_of(e) for e in extras]
    sources = {i: n.value for i, n in enumerate(graph.nodes)
               if n.op in ("parameter", "input")}
    expected = reference.evaluate(graph, dict(sources), roots)
    prepared = reference.Prepared(graph, roots)
    for _ in range(2):  # a prepared program is reusable
        got = prepared({i: sources[i] for i in prepared.sources})
        for root, value in zip(roots, got):
            want = expected[root]
            assert value.dtype == want.dtype and value.shape == want.shape
            np.testing.assert_array_equal(value, want)


def test_20_prepared_rules_are_the_reference_rules():
    """Each op with a prepared form gives, cast to the node's dtype, what its reference
    rule gives."""
    rng = np.random.default_rng(0)
    a, b, c = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4)) > 0
    cases = {"slice": ([a], {"axis": 1, "start": 1, "stop": 3}),
             "sum": ([a], {"axis": (0,), "keepdims": True}),
             "max": ([a], {"axis": (0, 1), "keepdims": False}),
             "where": ([c.astype(np.float64), a, b], {})}
    prepared_ops = [name for name, op in primitives.REGISTRY.items() if op.prepare]
    for name in prepared_ops:
        op = primitives.REGISTRY[name]
        fallback = (([a], {"axis": (1,), "keepdims": False}) if op.kind == "reduction"
                    else ([a, b], {}))
        arrays, attrs = cases.get(name, fallback)
        want = op.reference(arrays, attrs)
        with np.errstate(all="ignore"):
            got = np.asarray(op.prepare(attrs)(arrays)).astype(want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert {"add", "gt", "where", "sum", "slice"} <= set(prepared_ops)


def test_20_a_missing_source_is_named():
    network, loss, _, _ = random_program(3, "float64")
    prepared = reference.Prepared(network.graph, [network.node_of(loss)])
    with pytest.raises(KeyError, match="no value supplied"):
        prepared({})

"""The IR: the verifier rejects malformed graphs; the textual form is stable."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.core import ir
from tensorcode.compiler.core.verify import verify
from tensorcode.errors import CompileError


def small_network():
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [1, 16, 1], activation="tanh", init=tc.init.xavier(7))
    x = tape.input(np.zeros((48, 1), np.float32), name="x")
    y = mlp(x)
    return tape.into_network(), y


def test_describe_matches_the_design_form():
    network, _ = small_network()
    text = network.describe().splitlines()
    assert text[0] == '%0 = parameter "0.weights" : f32[1,16]'
    assert text[4] == '%4 = input "x" : f32[48,1]'
    assert text[5] == "%5 = matmul %4, %0 : f32[48,16]"
    assert text[6] == "%6 = add %5, %1 : f32[48,16]"
    assert text[7] == "%7 = tanh %6 : f32[48,16]"


def test_describe_is_stable_across_recordings_and_runs():
    first, _ = small_network()
    second, _ = small_network()
    assert first.describe() == second.describe()
    before = first.describe()
    first.forward(first.parameters())
    assert first.describe() == before


def test_describe_shows_attrs_and_leaves():
    tape = tc.Tape()
    x = tape.input(np.zeros((2, 3)))
    s = (x * 0.5).sum(axis=1, keepdims=True)
    big = tape.leaf(np.arange(20.0))
    network = tape.into_network()
    text = network.describe()
    assert "%1 = leaf 0.5 : f64[]" in text
    assert "sum %2 {axis=[1], keepdims=true} : f64[2,1]" in text
    assert "leaf dense<sha256:" in text
    del s, big


def _graph():
    network, _ = small_network()
    return network.graph


def _replace(graph, index, **changes):
    nodes = list(graph.nodes)
    nodes[index] = dataclasses.replace(nodes[index], **changes)
    return ir.Graph(tuple(nodes))


def test_verifier_accepts_recorded_graphs():
    verify(_graph())


@pytest.mark.parametrize("change, message", [
    (lambda g: _replace(g, 5, inputs=(4, 9)), "does not refer to an earlier node"),
    (lambda g: _replace(g, 5, op="frobnicate"), "unknown op 'frobnicate'"),
    (lambda g: _replace(g, 7, type=ir.Type((48, 15), "float32")), r"its rule gives f32\[48,16\]"),
    (lambda g: _replace(g, 4, inputs=(0,)), "takes no inputs"),
    (lambda g: _replace(g, 0, value=np.zeros((2, 2), np.float32)), "value has type"),
    (lambda g: _replace(g, 5, inputs=(4, 1)), "matmul"),
])
def test_verifier_rejects_malformed_graphs(change, message):
    with pytest.raises(CompileError, match=message):
        verify(change(_graph()))


def test_verifier_rejects_dangling_outputs():
    graph = _graph()
    with pytest.raises(CompileError, match="output %99"):
        verify(ir.Graph(graph.nodes, outputs=(99,)))


def test_unsupported_dtype_is_a_dtype_error():
    with pytest.raises(tc.DTypeError, match="complex128"):
        tc.Tape().parameter(np.zeros(2, np.complex128))


def test_dtypes_are_named_one_way_whatever_spelling_they_arrive_in():
    from tensorcode.compiler.core.dtypes import canonical_dtype
    from tensorcode.compiler.core.ir import Type

    for spelling in ("float32", "f4", np.float32, np.dtype("float32"), np.dtype(">f4")):
        assert canonical_dtype(spelling) == "float32"
    assert canonical_dtype("int64") == "int64" and canonical_dtype(np.int32) == "int32"
    for unsupported in ("int8", np.float16, "complex64", "not-a-dtype"):
        with pytest.raises(tc.DTypeError):
            canonical_dtype(unsupported)
    assert Type.of(np.zeros((2, 3), ">f4")) == Type((2, 3), "float32")
    assert Type.of(np.float64(1.0)) == Type((), "float64")
    with pytest.raises(tc.DTypeError, match="int8 is not supported"):
        Type.of(np.zeros(2, np.int8))

"""Reductions whose axis does not fit the operand's rank are refused at compile time and
when a saved algorithm is read, so the backends never disagree on whether a program is
valid (before, ``a.sum(axis=0)`` on a scalar ran on one backend and raised a raw
``AxisError`` on the other)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
import tensorcode.algorithm as algorithms
from tensorcode.algorithm import Algorithm
from tensorcode.errors import ArtifactError, CompileError, ShapeError

BACKENDS = ["reference", "numba"]


@pytest.mark.parametrize("op", ["sum", "mean", "min", "max"])
@pytest.mark.parametrize("executor", BACKENDS)
def test_axis_on_a_scalar_is_a_compile_error(op, executor):
    source = f"def run(x):\n    a = x.sum()\n    return {{'y': a.{op}(axis=0)}}\n"
    with pytest.raises(CompileError, match="does not exist on a scalar"):
        algorithms.compile(source, {"x": (3,)}, {"y": ()}, executor=executor)


@pytest.mark.parametrize("op", ["sum", "mean", "min", "max"])
def test_axis_on_a_recorded_scalar_is_a_shape_error(op):
    tape = tc.Tape()
    x = tape.input(np.float64(1.0))
    with pytest.raises(ShapeError, match="scalar"):
        getattr(x, op)(axis=0)
    with pytest.raises(ShapeError, match="scalar"):
        getattr(x, op)(axis=-1)
    assert getattr(x, op)().shape == ()  # no axis: every (no) axis, as NumPy


def _saved_with_reduce(tmp_path, edit):
    source = "def run(x):\n    return {'y': x.sum(axis=0)}\n"
    document = algorithms.compile(source, {"x": (3,)}, {"y": ()},
                                  executor="reference").to_document()
    reduce = next(n for n in document["ir"]["nodes"] if n["op"] == "sum")
    edit(reduce["attrs"])
    return document


@pytest.mark.parametrize("edit, fragment", [
    (lambda attrs: attrs.pop("keepdims"), "keepdims"),
    (lambda attrs: attrs.update(keepdims=1), "keepdims"),
    (lambda attrs: attrs.pop("axis"), "axis"),
    (lambda attrs: attrs.update(axis=[1]), "out of range"),
    (lambda attrs: attrs.update(axis=0), "axis"),
])
@pytest.mark.parametrize("executor", BACKENDS)
def test_saved_reduce_attrs_are_checked_against_the_rank(tmp_path, edit, fragment, executor):
    document = _saved_with_reduce(tmp_path, edit)
    with pytest.raises(ArtifactError, match=fragment):
        Algorithm.from_document(document, executor=executor)

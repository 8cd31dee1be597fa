"""Which ops the registry marks transcendental: the ones whose NumPy reference is a
CPU-dispatched math-library ufunc, so the reference is held to the compiled backends
within a few ulps rather than bit for bit (docs/compiler.md, "Which results are equal")."""

from __future__ import annotations

from tensorcode.compiler.core import registry

#: the ops that compute through exp, log, pow, tanh, sin, cos or erf
TRANSCENDENTAL = {"exp", "log", "log1p", "tanh", "sigmoid", "sin", "cos", "erf", "softplus",
                  "pow"}


def test_the_registry_marks_exactly_the_math_library_ops():
    marked = {name for name in registry.REGISTRY if registry.is_transcendental(name)}
    assert marked == TRANSCENDENTAL


def test_correctly_rounded_ops_are_not_marked():
    for name in ("add", "sub", "mul", "div", "sqrt", "abs", "neg", "maximum", "where",
                 "astype", "sum", "matmul", "take"):
        assert not registry.is_transcendental(name), name


def test_source_nodes_are_no_primitive():
    assert not registry.is_transcendental("parameter")

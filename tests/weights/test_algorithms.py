"""Patching an algorithm's named parameters: render, edit the rendered network, and the
patched algorithm computes with the edited values (checked against NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode.algorithm as algorithm_module
from tensorcode.errors import PatchError
from tensorcode.weights import (
    LowRank,
    Patch,
    algorithm_parameters,
    build,
    patch_algorithm,
    render,
    replace_parameters,
)

SOURCE = '''
def score(x, w, b):
    h = x @ w + b
    return {"scores": h}
'''
W0 = [[1.0, 2.0], [0.5, -1.0], [0.0, 3.0]]
B0 = [0.1, -0.2]


def _algorithm():
    return algorithm_module.compile(SOURCE, inputs={"x": (3,)}, outputs={"scores": (2,)},
                                    parameters={"w": W0, "b": B0}, executor="reference")


def test_algorithm_parameters_are_copies_by_name():
    algorithm = _algorithm()
    parameters = algorithm_parameters(algorithm)
    assert list(parameters) == ["w", "b"]
    assert np.array_equal(parameters["w"], W0) and parameters["w"].dtype == np.float64
    parameters["w"][0, 0] = 99.0
    assert algorithm.parameters["w"][0, 0] == 1.0


def test_the_guide_flow_render_replace_edit_patch():
    algorithm = _algorithm()
    shown = render(algorithm_parameters(algorithm), digits=3)
    base = replace_parameters(algorithm, shown.rounded)
    patch = Patch.from_edits(shown.rounded, "w[0, 1] = 0\nb[1] += 100\n", scales=shown.scales,
                             rationale="drop x0 from score 1", evidence=[{"source": "case:1"}])
    edited = patch_algorithm(base, patch)
    x = np.array([1.0, 2.0, -1.0])
    w = np.array(W0)
    w[0, 1] = 0.0
    b = np.array(B0) + np.array([0.0, 0.1])
    np.testing.assert_allclose(edited({"x": x})["scores"], x @ w + b, rtol=1e-12)
    np.testing.assert_allclose(base({"x": x})["scores"], x @ np.array(W0) + B0, rtol=1e-12)
    # The original algorithm is untouched and patch_algorithm checks hashes.
    assert algorithm.parameters["w"][0, 1] == 2.0
    assert np.array_equal(algorithm_parameters(edited)["w"], w)


def test_patch_algorithm_refuses_an_algorithm_whose_parameters_differ():
    algorithm = _algorithm()
    patch = Patch.from_edits(algorithm_parameters(algorithm), "b[0] = 5\n")
    other = algorithm.with_parameters({"b": np.array([0.2, -0.2])})
    with pytest.raises(PatchError, match="not the tensor this patch was made from"):
        patch_algorithm(other, patch)


def test_structured_forms_on_an_algorithm():
    algorithm = _algorithm()
    a, b = np.ones((3, 1)), np.array([[0.5, -0.5]])
    patched = patch_algorithm(algorithm, build(algorithm_parameters(algorithm),
                                               {"w": LowRank(a, b)}))
    np.testing.assert_allclose(algorithm_parameters(patched)["w"], np.array(W0) + a @ b)


def test_replace_parameters_checks_names_shapes_and_dtypes():
    algorithm = _algorithm()
    with pytest.raises(PatchError, match="not parameters of this algorithm"):
        replace_parameters(algorithm, {"zz": np.zeros(2)})
    with pytest.raises(PatchError, match="float64\\[2\\] but the replacement is float64\\[3\\]"):
        replace_parameters(algorithm, {"b": np.zeros(3)})
    with pytest.raises(PatchError, match="float32"):
        replace_parameters(algorithm, {"b": np.zeros(2, dtype=np.float32)})
    with pytest.raises(PatchError, match="no named parameters"):
        algorithm_parameters(object())

"""Routers of the guide's shape compile and agree with hand-written NumPy on all 4096
keyword vectors, through every executor, one case at a time and in batches."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from router_programs import INPUTS, OUTPUTS, ROUTERS, all_feature_vectors

import tensorcode.algorithm as algorithms
from tensorcode.errors import LoweringError

CASES = all_feature_vectors()


def expected_table(numpy_router) -> dict[str, np.ndarray]:
    rows = [numpy_router(row) for row in CASES]
    return {name: np.array([r[name] for r in rows]) for name in OUTPUTS}


@pytest.fixture(scope="module")
def compiled():
    """One compiled algorithm per router for the module (plans are part of TensorCode:
    a failure to build one is a test failure, never a skip)."""
    return {name: algorithms.compile(source, INPUTS, OUTPUTS, parameters, executor="numba")
            for name, (source, parameters, _) in ROUTERS.items()}


@pytest.mark.parametrize("name", list(ROUTERS))
def test_compiled_executor_matches_reference(name, compiled):
    source, parameters, numpy_router = ROUTERS[name]
    algorithm = compiled[name]
    assert algorithm.executor == "numba"
    expected = expected_table(numpy_router)
    batch = algorithm.batch({"features": CASES})
    for output in OUTPUTS:
        np.testing.assert_array_equal(batch[output], expected[output])
    small = algorithm.batch({"features": CASES[:3]})  # another N, same plan
    for output in OUTPUTS:
        np.testing.assert_array_equal(small[output], expected[output][:3])
    for index in range(0, len(CASES), 211):
        one = algorithm({"features": CASES[index]})
        for output in OUTPUTS:
            assert one[output] == expected[output][index]
    other = algorithm.with_parameters(threshold=100.0)
    assert other.executor == "numba"
    assert other.batch({"features": CASES[:8]})["covered"].sum() == 0


def test_compiled_executor_never_falls_back_to_the_reference(monkeypatch):
    """With its backend broken the compiled executor fails, saying so and keeping the
    import's own error as the cause; it never runs the reference interpreter under the
    compiled name."""
    source, parameters, _ = ROUTERS["groups"]
    for executor, module in (("llvm", "tensorcode.compiler.backends.llvm"),
                             ("numba", "tensorcode.compiler.backends.numba.backend")):
        monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(LoweringError, match="executor='reference'") as caught:
            algorithms.compile(source, INPUTS, OUTPUTS, parameters, executor=executor)
        assert isinstance(caught.value.__cause__, ImportError)
        assert module in str(caught.value.__cause__)


GENERAL = '''
def score(features, bias, w):
    rows = features.reshape(3, 4)
    scores = rows @ w + bias.reshape(3, 1)
    return {"scores": scores, "best": scores.max(), "rows": rows.sum(axis=1, keepdims=True)}
'''


def test_compiled_general_outputs_and_several_inputs_match_reference():
    """Vector and matrix outputs, two inputs and a parameter: the plan's public bound
    path rather than the scalar fast path."""
    contract = ({"features": (12,), "bias": (3,)},
                {"scores": (3, 2), "best": (), "rows": (3, 1)}, {"w": [[1, 2], [3, 4],
                                                                      [5, 6], [7, 8]]})
    compiled = algorithms.compile(GENERAL, *contract, executor="numba")
    reference = algorithms.compile(GENERAL, *contract, executor="reference")
    rng = np.random.default_rng(3)
    cases = [{"features": rng.normal(size=12), "bias": rng.normal(size=3)} for _ in range(20)]
    assert algorithms.compare(compiled, reference, cases, atol=1e-12, rtol=1e-12).ok
    batch = {"features": np.stack([c["features"] for c in cases]),
             "bias": np.stack([c["bias"] for c in cases])}
    a, b = compiled.batch(batch), reference.batch(batch)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-12)
    first = compiled(cases[0])
    first["scores"][0, 0] = 1e9  # results belong to the caller: the next call is fresh
    assert compiled(cases[0])["scores"][0, 0] != 1e9

"""Routers of the guide's shape compile and agree with hand-written NumPy on all 4096
keyword vectors, through every executor, one case at a time and in batches."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import tensorcode.algorithm as algorithms
from tensorcode.errors import CompileError

from router_programs import INPUTS, OUTPUTS, ROUTERS, all_feature_vectors

CASES = all_feature_vectors()


def expected_table(numpy_router) -> dict[str, np.ndarray]:
    rows = [numpy_router(row) for row in CASES]
    return {name: np.array([r[name] for r in rows]) for name in OUTPUTS}


@pytest.fixture(scope="module")
def compiled_or_reason():
    """One compiled algorithm per router for the module, or why plans are unavailable."""
    built, reason = {}, None
    for name, (source, parameters, _) in ROUTERS.items():
        try:
            built[name] = algorithms.compile(source, INPUTS, OUTPUTS, parameters,
                                             executor="compiled")
        except CompileError as error:
            reason = str(error)
            break
    return built, reason


@pytest.mark.parametrize("name", list(ROUTERS))
def test_reference_executor_matches_numpy_on_every_keyword_vector(name):
    source, parameters, numpy_router = ROUTERS[name]
    algorithm = algorithms.compile(source, INPUTS, OUTPUTS, parameters, executor="reference")
    expected = expected_table(numpy_router)
    batch = algorithm.batch({"features": CASES})
    for output in OUTPUTS:
        assert batch[output].shape == (len(CASES),)
        np.testing.assert_array_equal(batch[output], expected[output])
    for index in range(0, len(CASES), 97):  # single calls agree with the batch
        one = algorithm({"features": CASES[index]})
        for output in OUTPUTS:
            assert one[output].shape == ()
            assert one[output] == expected[output][index]


@pytest.mark.parametrize("name", list(ROUTERS))
def test_compiled_executor_matches_reference(name, compiled_or_reason):
    built, reason = compiled_or_reason
    if reason is not None:
        pytest.skip(f"compiled plans are not available here: {reason[:300]}")
    source, parameters, numpy_router = ROUTERS[name]
    algorithm = built[name]
    assert algorithm.executor == "compiled"
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
    assert other.executor == "compiled"
    assert other.batch({"features": CASES[:8]})["covered"].sum() == 0


def test_compiled_executor_never_falls_back_to_the_reference(monkeypatch):
    """Without plans the compiled executor refuses with an instruction; it does not run
    the reference interpreter under the compiled name."""
    monkeypatch.setitem(sys.modules, "tensorcode.compiler.plan", None)
    source, parameters, _ = ROUTERS["groups"]
    with pytest.raises(CompileError, match="executor='reference'"):
        algorithms.compile(source, INPUTS, OUTPUTS, parameters)
    with pytest.raises(CompileError, match="compiled plans"):
        algorithms.compile(source, INPUTS, OUTPUTS, parameters, executor="compiled")

"""The Algorithm surface: contracts, parameters, with_parameters, feeds and batches."""

from __future__ import annotations

import numpy as np
import pytest
from router_programs import INPUTS, OUTPUTS, SCORES, SCORES_PARAMETERS, WEIGHTS, scores_numpy

import tensorcode.algorithm as algorithms
from tensorcode.errors import CompileError, FeedError, TensorCodeError

ROW = np.array([1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0], dtype=np.float64)


@pytest.fixture(scope="module")
def router():
    return algorithms.compile(SCORES, INPUTS, OUTPUTS, SCORES_PARAMETERS, executor="reference")


def test_contracts_parameters_and_description(router):
    assert router.inputs == {"features": (12,)}
    assert router.outputs == {"route": (), "covered": ()}
    assert list(router.parameters) == ["w", "threshold"]
    np.testing.assert_array_equal(router.parameters["w"], WEIGHTS)
    assert router.parameters["threshold"].shape == ()
    assert router.executor == "reference"
    assert "matmul" in router.describe()
    assert len(router.source_sha256) == 64
    with pytest.raises(ValueError):
        router.parameters["w"][0, 0] = 5.0  # read-only: an algorithm is immutable


def test_one_case_returns_float64_values_of_the_contract_shapes(router):
    result = router({"features": ROW})
    assert set(result) == {"route", "covered"}
    for value in result.values():
        assert np.asarray(value).shape == () and np.asarray(value).dtype == np.float64
    expected = scores_numpy(ROW)
    assert float(result["route"]) == expected["route"]
    assert float(result["covered"]) == expected["covered"]


def test_feeds_are_converted_when_they_can_be(router):
    expected = router({"features": ROW})
    for feed in [ROW.tolist(), ROW.astype(np.float32), ROW.astype(np.int64),
                 ROW.astype(bool), np.ascontiguousarray(np.stack([ROW, ROW]).T)[:, 0]]:
        assert router({"features": feed}) == expected


@pytest.mark.parametrize("inputs,fragment", [
    ({}, "missing ['features']"),
    ({"features": ROW, "other": 1.0}, "unknown ['other']"),
    ({"feature": ROW}, "unknown ['feature']"),
    ({"features": ROW[:11]}, "expected shape [12]"),
    ({"features": ROW.reshape(3, 4)}, "expected shape [12]"),
    ({"features": "text"}, "cannot read"),
    ([ROW], "must be a mapping"),
])
def test_bad_feeds_are_feed_errors(router, inputs, fragment):
    with pytest.raises(FeedError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        router(inputs)


def test_batch_over_a_leading_case_axis(router):
    rows = np.stack([ROW, 1 - ROW, np.zeros(12)])
    batch = router.batch({"features": rows})
    assert batch["route"].shape == (3,) and batch["covered"].shape == (3,)
    for i, row in enumerate(rows):
        expected = scores_numpy(row)
        assert batch["route"][i] == expected["route"]
        assert batch["covered"][i] == expected["covered"]
    empty = router.batch({"features": np.zeros((0, 12))})
    assert empty["route"].shape == (0,)
    with pytest.raises(FeedError, match="batch needs shape"):
        router.batch({"features": ROW})


def test_batch_inputs_must_agree_on_the_case_count():
    source = "def f(a, b):\n    return {'y': a.sum() + b}\n"
    algorithm = algorithms.compile(source, {"a": (2,), "b": ()}, {"y": ()},
                                   executor="reference")
    result = algorithm.batch({"a": np.ones((4, 2)), "b": np.arange(4.0)})
    np.testing.assert_array_equal(result["y"], 2 + np.arange(4.0))
    with pytest.raises(FeedError, match="same number of cases"):
        algorithm.batch({"a": np.ones((4, 2)), "b": np.arange(3.0)})


def test_results_belong_to_the_caller(router):
    first = router.batch({"features": np.stack([ROW])})
    first["route"][0] = 99.0
    again = router.batch({"features": np.stack([ROW])})
    assert again["route"][0] != 99.0


def test_with_parameters_makes_a_new_algorithm(router):
    strict = router.with_parameters(threshold=100.0)
    assert strict({"features": ROW})["covered"] == 0.0
    assert router({"features": ROW})["covered"] == scores_numpy(ROW)["covered"]
    assert float(router.parameters["threshold"]) == 1.0
    swapped = router.with_parameters({"w": WEIGHTS[:, ::-1].copy()})
    expected = scores_numpy(ROW, w=WEIGHTS[:, ::-1])
    assert swapped({"features": ROW})["route"] == expected["route"]
    assert swapped.network is router.network  # same IR, same executor: nothing re-lowered
    with pytest.raises(TensorCodeError, match="not parameters"):
        router.with_parameters(bias=1.0)
    with pytest.raises(TensorCodeError, match="shape"):
        router.with_parameters(w=np.ones((3, 12)))
    with pytest.raises(TensorCodeError, match="non-finite"):
        router.with_parameters(threshold=float("inf"))


def test_unknown_executor_and_compile_errors_surface(router):
    with pytest.raises(TensorCodeError, match="executor must be one of"):
        algorithms.compile(SCORES, INPUTS, OUTPUTS, SCORES_PARAMETERS, executor="fast")
    with pytest.raises(CompileError, match="line 3"):
        algorithms.compile("def f(features, w, threshold):\n    x = 1\n    y = x[0]\n",
                           INPUTS, OUTPUTS, SCORES_PARAMETERS, executor="reference")


def test_parse_reply_is_exported():
    source, parameters = algorithms.parse_reply("```python\ndef f(x):\n    pass\n```\n"
                                                "```json\n{\"t\": 1}\n```")
    assert source.startswith("def f") and parameters == {"t": 1}

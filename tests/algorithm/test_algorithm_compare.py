"""compare: agreement, mismatches, errors, and step-by-step rollouts of stateful
algorithms."""

from __future__ import annotations

import numpy as np
import pytest
from router_programs import (
    GROUPS,
    GROUPS_PARAMETERS,
    INPUTS,
    OUTPUTS,
    all_feature_vectors,
    groups_numpy,
)

import tensorcode.algorithm as algorithms
from tensorcode.errors import TensorCodeError

CASES = [{"features": row} for row in all_feature_vectors()[::41]]


@pytest.fixture(scope="module")
def router():
    return algorithms.compile(GROUPS, INPUTS, OUTPUTS, GROUPS_PARAMETERS, executor="reference")


def test_agreement_with_a_hand_written_reference(router):
    report = algorithms.compare(router, lambda inputs: groups_numpy(inputs["features"]), CASES)
    assert report.ok and report.agreed == report.cases == len(CASES)
    assert report.mismatched == report.errors == 0
    assert report.max_abs_error == {"route": 0.0, "covered": 0.0}
    assert report.to_json()["agreement"] == 1.0


def test_mismatches_are_counted_and_shown(router):
    def off_by_one(inputs):
        result = groups_numpy(inputs["features"])
        if inputs["features"][0] == 1.0:
            result["route"] += 1.0
        return result
    report = algorithms.compare(router, off_by_one, CASES)
    wrong = sum(1 for c in CASES if c["features"][0] == 1.0)
    assert report.mismatched == wrong and report.agreed == len(CASES) - wrong
    assert report.max_abs_error["route"] == 1.0 and not report.ok
    failure = report.failures[0]
    assert failure["produced"]["route"] + 1.0 == failure["expected"]["route"]
    assert "mismatched" in str(report)


def test_tolerances_decide_agreement(router):
    def nudged(inputs):
        result = groups_numpy(inputs["features"])
        return {k: v + 1e-5 for k, v in result.items()}
    assert not algorithms.compare(router, nudged, CASES[:5]).ok
    assert algorithms.compare(router, nudged, CASES[:5], atol=1e-4).ok


def test_errors_never_count_as_agreement(router):
    def flaky(inputs):
        if inputs["features"].sum() > 6:
            raise RuntimeError("teacher unavailable")
        return groups_numpy(inputs["features"])
    report = algorithms.compare(router, flaky, CASES)
    failing = sum(1 for c in CASES if c["features"].sum() > 6)
    assert report.errors == failing and report.agreed == len(CASES) - failing
    assert any("teacher unavailable" in f.get("error", "") for f in report.failures)
    partial = algorithms.compare(router, lambda i: {"route": 0.0}, CASES[:3])
    assert partial.errors == 3
    only_route = algorithms.compare(router, lambda i: groups_numpy(i["features"]), CASES[:3],
                                    outputs=["route"])
    assert only_route.ok


COUNTER = '''
def step(total, steps, x):
    return {"total": total + x.sum(), "steps": steps + 1, "mean": (total + x.sum()) / (steps + 1)}
'''


def test_rollout_feeds_each_side_its_own_state():
    counter = algorithms.compile(COUNTER, {"total": (), "steps": (), "x": (2,)},
                                 {"total": (), "steps": (), "mean": ()}, executor="reference")
    xs = [np.array([float(i), 1.0]) for i in range(6)]
    cases = [{"total": 0.0, "steps": 0.0, "x": xs[0]}] + [{"x": x} for x in xs[1:]]

    def python_counter(inputs):
        total = inputs["total"] + inputs["x"].sum()
        return {"total": total, "steps": inputs["steps"] + 1,
                "mean": total / (inputs["steps"] + 1)}
    report = algorithms.compare(counter, python_counter, cases, rollout=True)
    assert report.ok and report.cases == 6 and report.rollout

    def drifting(inputs):
        result = python_counter(inputs)
        if inputs["steps"] == 3:
            result["total"] += 0.5  # drift starts at step 3 and persists
        return result
    report = algorithms.compare(counter, drifting, cases, rollout=True)
    assert report.agreed == 3 and report.mismatched == 3
    assert report.failures[0]["step"] == 3

    def broken(inputs):
        if inputs["steps"] == 2:
            raise ValueError("no state")
        return python_counter(inputs)
    report = algorithms.compare(counter, broken, cases, rollout=True)
    assert report.agreed == 2 and report.errors == 4 and report.cases == 6


def test_rollout_needs_state(router):
    with pytest.raises(TensorCodeError, match="stateful"):
        algorithms.compare(router, lambda i: groups_numpy(i["features"]), CASES, rollout=True)


def test_two_algorithms_compare_directly(router):
    other = algorithms.compile(GROUPS, INPUTS, OUTPUTS, {"threshold": 100.0},
                               executor="reference")
    report = algorithms.compare(router, other, CASES)
    assert report.mismatched > 0 and report.max_abs_error["covered"] == 1.0

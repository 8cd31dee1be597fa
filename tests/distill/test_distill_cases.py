"""Case validation, the seeded split and case identity."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode.distill.cases import (
    case_key,
    format_case,
    infer_contract,
    normalize_case,
    normalize_contract,
    split,
)
from tensorcode.errors import FeedError, TensorCodeError


def test_split_is_deterministic_per_seed_and_partitions_the_workload():
    design, acceptance = split(240, 0.5, seed=0)
    assert (design, acceptance) == split(240, 0.5, seed=0)
    assert len(design) == len(acceptance) == 120
    assert sorted(design + acceptance) == list(range(240))
    assert split(240, 0.5, seed=1) != (design, acceptance)
    d, a = split(10, 0.3, seed=5)
    assert len(a) == 3 and len(d) == 7


@pytest.mark.parametrize("holdout", [0.0, 1.0, -0.1, 2])
def test_split_refuses_degenerate_holdouts(holdout):
    with pytest.raises(TensorCodeError, match="holdout"):
        split(10, holdout, seed=0)


def test_split_keeps_one_case_on_each_side():
    design, acceptance = split(2, 0.01, seed=0)
    assert len(design) == 1 and len(acceptance) == 1
    with pytest.raises(TensorCodeError, match="at least 2"):
        split(1, 0.5, seed=0)


def test_cases_are_validated_against_the_contract():
    contract = normalize_contract({"features": (3,), "bias": ()}, "inputs")
    case = normalize_case({"features": [1, 0, 1], "bias": 2}, contract, "case")
    assert case["features"].dtype == np.float64 and case["bias"].shape == ()
    with pytest.raises(FeedError, match=r"missing \['bias'\]"):
        normalize_case({"features": [1, 0, 1]}, contract, "case")
    with pytest.raises(FeedError, match=r"unexpected \['extra'\]"):
        normalize_case({"features": [1, 0, 1], "bias": 0, "extra": 1}, contract, "case")
    with pytest.raises(FeedError, match=r"shape \[2\], the contract says \[3\]"):
        normalize_case({"features": [1, 0], "bias": 0}, contract, "case")
    with pytest.raises(FeedError, match="NaN"):
        normalize_case({"features": [1, np.nan, 0], "bias": 0}, contract, "case")
    with pytest.raises(FeedError, match="not numeric"):
        normalize_case({"features": ["a", "b", "c"], "bias": 0}, contract, "case")


def test_output_contract_reserves_covered():
    assert infer_contract([{"route": 1.0, "scores": [0.0, 1.0]}], "targets") == {
        "route": (), "scores": (2,)}
    with pytest.raises(TensorCodeError, match="reserved"):
        infer_contract([{"covered": 1.0}], "targets")


def test_case_identity_is_by_value():
    a = {"x": np.array([0.0, 1.0])}
    assert case_key(a) == case_key({"x": np.array([-0.0, 1.0])})
    assert case_key(a) != case_key({"x": np.array([0.0, 1.5])})
    assert case_key(a) != case_key({"y": np.array([0.0, 1.0])})


def test_format_case_is_compact():
    assert format_case({"features": np.array([1.0, 0.0, 0.25]), "route": 2.0}) == \
        "features=[1, 0, 0.25], route=2"

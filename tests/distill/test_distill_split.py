"""The acceptance split holds out distinct inputs by default, so "never shown" holds for
inputs even when the workload repeats them."""

from __future__ import annotations

import numpy as np
import pytest
from distill_fakes import install

from tensorcode.distill import distill
from tensorcode.distill.cases import case_key, split_by_input
from tensorcode.errors import TensorCodeError
from tensorcode.integrations import RecordedModel

RULES = {"exact": lambda c: {"route": float(c["x"][0] >= 5.0), "covered": 1.0}}


def repeated_workload():
    """120 cases over 20 distinct inputs, each input six times (as in ticket features)."""
    rng = np.random.default_rng(7)
    values = rng.permutation(np.repeat(np.arange(20.0) / 2, 6))
    workload = [{"x": np.array([x, 0.0])} for x in values]
    return workload, [{"route": float(x >= 5.0)} for x in values]


def run(**kwargs):
    workload, targets = repeated_workload()
    return distill("route by x", {"x": (2,)}, workload, targets=targets,
                   author=RecordedModel(["rule:exact"]), attempts=1, **kwargs)


def test_17_no_acceptance_input_is_among_the_design_cases(monkeypatch):
    install(monkeypatch, RULES)
    result = run()
    design = {case_key(c) for c in result.design.cases}
    acceptance = {case_key(c) for c in result.acceptance.cases}
    assert design and acceptance and not design & acceptance
    assert len(result.design) + len(result.acceptance) == 120
    split = result.report["split"]
    assert split["by"] == "input" and "distinct input" in split["rule"]
    assert split["distinct_inputs"] == {"design": 10, "acceptance": 10}
    assert result.settings["split"] == "input"


def test_17_the_positional_split_is_still_available_and_says_what_it_does(monkeypatch):
    install(monkeypatch, RULES)
    result = run(split="case")
    design = {case_key(c) for c in result.design.cases}
    assert any(case_key(c) in design for c in result.acceptance.cases)
    assert result.report["split"]["by"] == "case"
    with pytest.raises(TensorCodeError, match="split must be one of"):
        run(split="ticket")


def test_17_one_distinct_input_cannot_be_split():
    cases = [{"x": np.zeros(2)}] * 4
    with pytest.raises(TensorCodeError, match="distinct input"):
        split_by_input(cases, 0.5, 0)

"""The author loop with stand-in programs: the split, what the author is shown, the
selection rule, early acceptance, failures and the truth separation."""

from __future__ import annotations

import json

import pytest
from distill_fakes import install, threshold_workload

from tensorcode.distill import DistillationError, distill
from tensorcode.distill.attempts import Attempt, select
from tensorcode.distill.cases import format_case, split
from tensorcode.errors import TensorCodeError
from tensorcode.integrations import RecordedModel

RULES = {
    # right on every case it claims, claims x >= 6 or x < 4
    "careful": lambda c: {"route": float(c["x"][0] >= 5.0),
                          "covered": float(c["x"][0] >= 6.0 or c["x"][0] < 4.0)},
    # claims everything, wrong between 5 and 6
    "sloppy": lambda c: {"route": float(c["x"][0] >= 6.0), "covered": 1.0},
    # exactly the teacher
    "exact": lambda c: {"route": float(c["x"][0] >= 5.0), "covered": 1.0},
    # claims nothing
    "shy": lambda c: {"route": 0.0, "covered": 0.0},
    # raises on large x
    "fragile": lambda c: ({"route": 0.0, "covered": 1.0} if c["x"][0] < 5.0
                          else (_ for _ in ()).throw(ValueError("overflow"))),
}


@pytest.fixture
def fake_compiler(monkeypatch):
    install(monkeypatch, RULES)


def run(replies, **kwargs):
    workload, targets = threshold_workload()
    author = RecordedModel(replies)
    kwargs.setdefault("attempts", len(replies))
    result = distill("route by x", {"x": (2,)}, workload, targets=targets, author=author,
                     **kwargs)
    return result, author, workload


def test_the_author_never_sees_an_acceptance_case(fake_compiler):
    result, author, workload = run(["bad:indexing with [] does not compile", "rule:sloppy",
                                    "rule:fragile", "rule:careful"], feedback_cases=50)
    assert len(author.prompts) == 4
    design, acceptance = split(len(workload), 0.5, seed=0)
    assert result.design.indices == design and result.acceptance.indices == acceptance
    for i in acceptance:
        value = format_case({"v": workload[i]["x"][0]}).split("=")[1]
        for prompt in author.prompts:
            assert value not in prompt, f"acceptance case {i} leaked into a prompt"
    for i in design[:10]:  # design cases are shown
        assert format_case(workload[i]) in author.prompts[0]
    # the later prompts carry the feedback of the earlier attempts
    assert "indexing with [] does not compile" in author.prompts[1]
    assert "ValueError: overflow" in author.prompts[3]


def test_the_split_is_deterministic_per_seed(fake_compiler):
    first, _, _ = run(["rule:careful"], seed=7)
    second, _, _ = run(["rule:careful"], seed=7)
    third, _, _ = run(["rule:careful"], seed=8)
    assert first.acceptance.indices == second.acceptance.indices
    assert first.report["acceptance"] == second.report["acceptance"]
    assert first.acceptance.indices != third.acceptance.indices


def test_selection_prefers_fewer_wrong_then_fewer_errors_then_coverage():
    def attempt(number, wrong, errors, coverage, stage="scored"):
        a = Attempt(number=number, prompt="", stage=stage)
        if stage == "scored":
            a.design = {"wrong": wrong, "errors": errors, "coverage": coverage}
        return a

    crafted = [attempt(1, 2, 0, 1.0), attempt(2, 0, 3, 0.9), attempt(3, 0, 1, 0.5),
               attempt(4, 0, 1, 0.7), attempt(5, 0, 0, 0, stage="compile")]
    assert select(crafted, 0.0).number == 4          # 0 wrong, 1 error, most coverage
    assert select(crafted, 0.8).number == 2          # 4 and 3 lack the coverage
    assert select(crafted, 0.95).number == 1
    assert select(crafted, 1.0).number == 1
    tie = [attempt(1, 0, 0, 0.5), attempt(2, 0, 0, 0.5)]
    assert select(tie, 0.0).number == 1              # the earlier on a full tie
    assert select([attempt(1, 0, 0, 0, stage="parse")], 0.0) is None


def test_the_loop_stops_at_the_first_acceptable_attempt(fake_compiler):
    result, author, _ = run(["bad:no", "rule:careful", "rule:exact"], attempts=3)
    assert len(author.prompts) == 2
    assert result.report["selected_attempt"] == 2
    assert [a["stage"] for a in result.attempts] == ["compile", "scored"]
    design = result.report["design"]
    assert design["wrong"] == 0 and design["errors"] == 0 and 0 < design["coverage"] < 1
    acceptance = result.report["acceptance"]
    assert acceptance["cases"] == 20 and acceptance["wrong"] == 0
    assert acceptance["covered"] + acceptance["uncovered"] == 20


def test_best_attempt_is_selected_when_none_is_acceptable(fake_compiler):
    result, author, _ = run(["rule:sloppy", "rule:fragile", "bad:x"])
    assert len(author.prompts) == 3
    assert result.report["selected_attempt"] == 2  # 0 wrong beats 'sloppy's wrongs
    assert result.report["design"]["errors"] > 0
    assert result.report["acceptance"]["errors"] > 0


def test_min_coverage_is_respected(fake_compiler):
    # 'shy' claims nothing: acceptable without a minimum, ineligible with one
    result, _, _ = run(["rule:shy"])
    assert result.report["design"]["coverage"] == 0.0
    with pytest.raises(DistillationError, match=r"required design coverage of 0\.5"):
        run(["rule:shy", "rule:shy"], min_coverage=0.5)
    result, author, _ = run(["rule:shy", "rule:careful"], min_coverage=0.5)
    assert result.report["selected_attempt"] == 2
    assert "below the required 0.5" in author.prompts[1]


def test_no_compiling_attempt_raises_with_every_attempt(fake_compiler):
    with pytest.raises(DistillationError) as caught:
        run(["bad:first", "bad:second"])
    attempts = caught.value.attempts
    assert [a["reply"] for a in attempts] == ["bad:first", "bad:second"]
    assert all(a["prompt"] and "did not compile" in a["error"] for a in attempts)
    assert all(a["stage"] == "compile" for a in attempts)
    assert "no attempt produced a program that compiles" in str(caught.value)


def test_the_error_holds_its_attempts_as_the_result_does(fake_compiler):
    """``DistillationError.attempts`` and ``Distillation.attempts`` are the same
    records: JSON-ready dicts with the same keys."""
    result, _, _ = run(["bad:first", "rule:exact"])
    with pytest.raises(DistillationError) as caught:
        run(["bad:first", "bad:second"])
    assert all(type(a) is dict for a in caught.value.attempts + result.attempts)
    assert {frozenset(a) for a in caught.value.attempts} == {frozenset(result.attempts[0])}
    assert caught.value.attempts[0] == result.attempts[0]  # the same first reply
    json.dumps(caught.value.attempts)


def test_an_author_failure_ends_the_loop_and_keeps_earlier_attempts(fake_compiler):
    result, author, _ = run(["rule:sloppy"], attempts=3)  # the recording runs out
    assert [a["stage"] for a in result.attempts] == ["scored", "author"]
    assert "ModelError" in result.attempts[1]["error"]
    assert result.report["selected_attempt"] == 1


def test_oracle_is_called_once_per_case_and_exactly_one_source_is_required(fake_compiler):
    workload, _ = threshold_workload()
    calls = []

    def oracle(inputs):
        calls.append(inputs)
        return {"route": float(inputs["x"][0] >= 5.0)}

    result = distill("t", {"x": (2,)}, workload, oracle=oracle,
                     author=RecordedModel(["rule:exact"]))
    assert len(calls) == len(workload)
    assert result.report["acceptance"]["agreed"] == result.report["acceptance"]["cases"]
    with pytest.raises(TensorCodeError, match="exactly one"):
        distill("t", {"x": (2,)}, workload, author=RecordedModel([]))
    with pytest.raises(TensorCodeError, match="exactly one"):
        distill("t", {"x": (2,)}, workload, targets=[{"route": 0.0}] * 40, oracle=oracle,
                author=RecordedModel([]))
    with pytest.raises(TensorCodeError, match="39 entries"):
        distill("t", {"x": (2,)}, workload, targets=[{"route": 0.0}] * 39,
                author=RecordedModel([]))


def test_truth_separates_program_teacher_and_truth(fake_compiler):
    workload, targets = threshold_workload()
    # the truth disagrees with the teacher on x in [5, 6): a faithful program copies
    # the teacher's mistakes there
    truth = [{"route": float(c["x"][0] >= 6.0)} for c in workload]
    result = distill("t", {"x": (2,)}, workload, targets=targets, truth=truth,
                     author=RecordedModel(["rule:exact"]))
    separated = result.report["truth"]
    teacher_wrong = sum(1 for i in result.acceptance.indices if 5.0 <= workload[i]["x"][0] < 6.0)
    assert teacher_wrong > 0
    assert separated["program_vs_teacher"]["wrong"] == 0
    assert separated["program_vs_truth"]["wrong"] == teacher_wrong
    assert separated["teacher_vs_truth"]["wrong"] == teacher_wrong
    assert separated["program_vs_teacher"] == result.report["acceptance"]


def test_report_has_the_documented_fields(fake_compiler):
    result, _, _ = run(["rule:careful"])
    fields = ["cases", "covered", "uncovered", "agreed", "wrong", "errors", "coverage",
              "precision", "agreement", "failures", "abstains"]
    assert list(result.report["design"]) == fields
    assert list(result.report["acceptance"]) == fields
    policy = result.report["feedback_policy"]
    assert "never shown" in policy and "fewest wrong" in policy

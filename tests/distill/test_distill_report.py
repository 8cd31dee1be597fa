"""Report arithmetic: one verdict per case, the fields and their relations."""

from __future__ import annotations

import numpy as np

from tensorcode.distill.report import FIELDS, judge, summarize, teacher_vs_truth

OUTPUTS = {"route": ()}


def case(x):
    return {"x": np.array([float(x)])}


def target(r):
    return {"route": np.array(float(r))}


def test_verdicts():
    t = target(2.0)
    assert judge({"route": 2.0, "covered": 1.0}, t, OUTPUTS, 1e-6, 1e-6).kind == "agreed"
    assert judge({"route": 2.0 + 1e-9, "covered": 1.0}, t, OUTPUTS, 1e-6, 1e-6).kind == "agreed"
    assert judge({"route": 3.0, "covered": 1.0}, t, OUTPUTS, 1e-6, 1e-6).kind == "wrong"
    assert judge({"route": 3.0, "covered": 0.0}, t, OUTPUTS, 1e-6, 1e-6).kind == "uncovered"
    assert judge({"route": 2.0}, t, OUTPUTS, 1e-6, 1e-6).kind == "agreed"  # claims all
    error = judge(RuntimeError("boom"), t, OUTPUTS, 1e-6, 1e-6)
    assert error.kind == "error" and "boom" in error.error
    # runtime failures never count as agreement, even when the value would match
    assert judge({"route": np.nan, "covered": 1.0}, t, OUTPUTS, 1e-6, 1e-6).kind == "error"
    assert judge({"route": 2.0, "covered": np.nan}, t, OUTPUTS, 1e-6, 1e-6).kind == "error"
    # a non-finite output while abstaining is not the program's answer: still uncovered
    assert judge({"route": np.inf, "covered": 0.0}, t, OUTPUTS, 1e-6, 1e-6).kind == "uncovered"


def test_report_arithmetic_and_fields():
    produced = [
        {"route": 1.0, "covered": 1.0},   # agreed
        {"route": 1.0, "covered": 1.0},   # agreed
        {"route": 0.0, "covered": 1.0},   # wrong
        {"route": 0.0, "covered": 0.0},   # uncovered
        {"route": 0.0, "covered": 0.0},   # uncovered
        ValueError("bad"),                # error
    ]
    cases = [case(i) for i in range(6)]
    targets = [target(1.0)] * 6
    verdicts = [judge(p, t, OUTPUTS, 1e-6, 1e-6) for p, t in zip(produced, targets)]
    report = summarize(verdicts, cases, targets, [10, 11, 12, 13, 14, 15], feedback_cases=8,
                       abstains=True)
    assert tuple(report) == FIELDS
    assert (report["cases"], report["covered"], report["uncovered"], report["agreed"],
            report["wrong"], report["errors"]) == (6, 3, 2, 2, 1, 1)
    assert report["cases"] == report["covered"] + report["uncovered"] + report["errors"]
    assert report["coverage"] == 3 / 6
    assert report["precision"] == 2 / 3
    assert report["agreement"] == 2 / 6
    assert report["abstains"] is True
    assert [f["case"] for f in report["failures"]] == [12, 15]
    wrong = report["failures"][0]
    assert wrong["inputs"] == {"x": [2.0]} and wrong["expected"] == {"route": 1.0}
    assert wrong["produced"] == {"route": 0.0, "covered": 1.0} and wrong["error"] is None
    assert report["failures"][1]["produced"] is None and "bad" in report["failures"][1]["error"]


def test_failures_are_capped_and_precision_undefined_without_claims():
    targets = [target(1.0)] * 5
    verdicts = [judge({"route": 0.0, "covered": 1.0}, t, OUTPUTS, 0, 0) for t in targets]
    report = summarize(verdicts, [case(i) for i in range(5)], targets, range(5), 2, True)
    assert len(report["failures"]) == 2 and report["wrong"] == 5
    none = [judge({"route": 0.0, "covered": 0.0}, t, OUTPUTS, 0, 0) for t in targets]
    report = summarize(none, [case(i) for i in range(5)], targets, range(5), 2, True)
    assert report["precision"] is None and report["coverage"] == 0.0


def test_teacher_vs_truth():
    teacher = [target(1), target(2), target(3), target(4)]
    truth = [target(1), target(2), target(0), target(4)]
    assert teacher_vs_truth(teacher, truth, OUTPUTS, 1e-6, 1e-6) == {
        "cases": 4, "agreed": 3, "wrong": 1, "agreement": 0.75}


def test_non_finite_outputs_are_reported_as_strict_json():
    import json

    verdict = judge({"route": np.nan, "covered": 1.0}, target(1.0), OUTPUTS, 1e-6, 1e-6)
    report = summarize([verdict], [case(0)], [target(1.0)], [0], 8, True)
    assert report["failures"][0]["produced"] == {"route": "nan", "covered": 1.0}
    json.dumps(report, allow_nan=False)

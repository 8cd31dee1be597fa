"""Distillation with real compiled subset programs: recorded replies, save and load,
tampered files, repair's hidden-case exclusion and the gradient fit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensorcode.distill import Distillation, distill, fit, repair
from tensorcode.errors import ArtifactError, TensorCodeError, TrainingError
from tensorcode.integrations import RecordedModel

INDEXING = """```python
def program(x):
    covered = where(x[0] > 0.5, 1.0, 0.0)
    return {"route": x[0], "covered": covered}
```"""

LINEAR = """Here is the program.
```python
def program(x, slope, offset):
    value = x.slice(0, 1).reshape()
    covered = where(value < 8.0, 1.0, 0.0)
    return {"route": value * slope + offset, "covered": covered}
```
```json
{"slope": %s, "offset": 0.0}
```"""


def workload(count=30, seed=4):
    rng = np.random.default_rng(seed)
    xs = rng.permutation(count) * (10.0 / count) + 0.01
    cases = [{"x": np.array([x, 1.0])} for x in xs]
    targets = [{"route": 2.0 * x + 1.0} for x in xs]
    return cases, targets


def run(replies, executor="reference", **kwargs):
    cases, targets = workload()
    author = RecordedModel(replies)
    result = distill("predict the route from x", {"x": (2,)}, cases, targets=targets,
                     author=author, attempts=len(replies), executor=executor, atol=1e-6,
                     **kwargs)
    return result, author


def test_a_reply_that_indexes_fails_and_the_next_is_accepted():
    result, author = run([INDEXING, (LINEAR % "2.0").replace("0.0}", "1.0}")])
    assert len(author.prompts) == 2
    first = result.attempts[0]
    assert first["stage"] == "compile" and "slice" in first["error"]
    assert "slice" in author.prompts[1]  # the instruction reaches the author
    assert result.report["selected_attempt"] == 2
    design = result.report["design"]
    assert design["wrong"] == 0 and design["errors"] == 0 and design["uncovered"] > 0
    assert result.parameters == {"slope": 2.0, "offset": 1.0}


def test_save_and_load_round_trip(tmp_path):
    result, _ = run([(LINEAR % "2.0").replace("0.0}", "1.0}")])
    directory = result.save(tmp_path / "router")
    assert sorted(p.name for p in directory.iterdir()) == ["algorithm.json",
                                                           "distillation.json"]
    loaded = Distillation.load(directory, executor="reference")
    assert loaded.report == json.loads(json.dumps(result.report))
    assert loaded.source == result.source and loaded.task == result.task
    assert loaded.design.indices == result.design.indices
    assert loaded.acceptance.indices == result.acceptance.indices
    assert all(np.array_equal(a["x"], b["x"]) for a, b in
               zip(loaded.acceptance.cases, result.acceptance.cases))
    assert loaded.attempts[0]["prompt"] == result.attempts[0]["prompt"]
    for case in result.acceptance.cases:
        assert loaded(case) == result(case)


def test_loading_never_evaluates_or_parses_the_source(tmp_path, monkeypatch):
    from tensorcode.compiler import subset
    from tensorcode.compiler.subset import syntax as subset_syntax
    from tensorcode.compiler.subset import walker

    result, _ = run([(LINEAR % "2.0").replace("0.0}", "1.0}")])
    directory = result.save(tmp_path / "router")

    def refuse(*args, **kwargs):
        raise AssertionError("the source was parsed during load")

    monkeypatch.setattr(subset_syntax, "parse", refuse)
    monkeypatch.setattr(walker, "parse", refuse)
    monkeypatch.setattr(walker, "compile_program", refuse)
    monkeypatch.setattr(subset, "compile_program", refuse)
    loaded = Distillation.load(directory, executor="reference")
    case = {"x": [3.0, 1.0]}
    assert loaded(case)["route"] == result(case)["route"] == 7.0


@pytest.mark.parametrize("tamper, message", [
    ("artifact_bytes", "SHA-256"),
    ("record_parameters", "parameters differ"),
    ("parameter_string", "parameters differ"),
    ("parameter_ragged", "parameters differ"),
    ("parameter_object", "parameters differ"),
    ("record_format", "format"),
    ("record_cases", "acceptance"),
    ("artifact_op", "op"),
    ("record_source", "source"),
    ("missing_record", "distillation.json"),
])
def test_tampered_directories_are_refused(tmp_path, tamper, message):
    import hashlib

    result, _ = run([(LINEAR % "2.0").replace("0.0}", "1.0}")])
    directory = result.save(tmp_path / "router")
    artifact = directory / "algorithm.json"
    record_path = directory / "distillation.json"
    record = json.loads(record_path.read_text())
    if tamper == "artifact_bytes":
        artifact.write_bytes(artifact.read_bytes().replace(b"2.0", b"3.0", 1))
    elif tamper == "record_parameters":
        record["parameters"]["slope"] = 5.0
    elif tamper == "parameter_string":
        record["parameters"]["slope"] = "2.0x"
    elif tamper == "parameter_ragged":
        record["parameters"]["slope"] = [[1.0], [1.0, 2.0]]
    elif tamper == "parameter_object":
        record["parameters"]["slope"] = {"v": 2.0}
    elif tamper == "record_format":
        record["format"] = "something.else"
    elif tamper == "record_cases":
        record["acceptance"]["cases"][0] = {"x": [1.0]}
    elif tamper == "artifact_op":
        text = artifact.read_text()
        document = json.loads(text)
        for node in document["ir"]["nodes"]:
            if node.get("op") not in ("parameter", "input", "leaf"):
                node["op"] = "system"
                break
        data = json.dumps(document).encode()
        artifact.write_bytes(data)
        record["artifact_sha256"] = hashlib.sha256(data).hexdigest()
    elif tamper == "record_source":
        record["source"] = record["source"].replace("8.0", "9.0")
    elif tamper == "missing_record":
        record_path.unlink()
    if record_path.exists():
        record_path.write_text(json.dumps(record))
    with pytest.raises(ArtifactError, match=message):
        Distillation.load(directory, executor="reference")


def test_repair_excludes_hidden_cases_and_keeps_the_acceptance_set():
    result, _ = run([(LINEAR % "2.0").replace("0.0}", "1.0}")])
    hidden = result.acceptance.cases[:3]
    fresh = [{"x": np.array([8.5, 1.0])}, {"x": np.array([9.5, 1.0])}]
    cases = [*hidden, *fresh]
    targets = [{"route": 2.0 * c["x"][0] + 1.0} for c in cases]
    revision = LINEAR.replace("value < 8.0", "value < 100.0") % "2.0"
    author = RecordedModel([revision.replace('"offset": 0.0', '"offset": 1.0')])
    revised = repair(result, author=author, cases=cases, targets=targets, attempts=1)
    assert revised.report["repair"]["excluded_hidden"] == 3
    assert revised.report["repair"]["added"] == 2
    assert len(revised.design) == len(result.design) + 2
    assert revised.acceptance.indices == result.acceptance.indices
    prompt = author.prompts[0]
    assert "value < 8.0" in prompt  # the deployed program is the starting point
    for case in hidden:
        assert f"x=[{case['x'][0]:.6g}" not in prompt
    assert "x=[8.5, 1]" in prompt
    assert revised.report["repair"]["selected"] == "attempt 2"
    assert revised.report["design"]["uncovered"] == 0
    assert revised.report["acceptance"]["covered"] >= result.report["acceptance"]["covered"]


def test_repair_keeps_the_deployed_program_when_revisions_are_worse():
    result, _ = run([(LINEAR % "2.0").replace("0.0}", "1.0}")])
    worse = LINEAR.replace("value < 8.0", "value < 100.0") % "3.0"
    revised = repair(result, author=RecordedModel([worse]), cases=[{"x": [8.5, 1.0]}],
                     targets=[{"route": 18.0}], attempts=1)
    assert revised.report["repair"]["selected"] == "deployed"
    assert revised.source == result.source


@pytest.mark.parametrize("executor", ["reference", "numba"])
def test_fit_improves_a_mistuned_parameter(executor):
    result, _ = run([LINEAR % "1.2"], executor=executor, rtol=0.0)
    result.settings["atol"] = 0.05  # agree within 0.05, the fit's target precision
    before = result.report["design"]
    assert before["wrong"] > 0
    tuned = fit(result, result.design.cases, result.design.targets, steps=300, lr=0.05)
    assert tuned.report["fit"]["executor"] == executor
    assert tuned.report["fit"]["loss_after"] < 0.01 * tuned.report["fit"]["loss_before"]
    assert abs(tuned.parameters["slope"] - 2.0) < 0.05
    assert tuned.report["design"]["wrong"] < before["wrong"]
    assert tuned.report["acceptance"]["wrong"] < tuned.report["fit"]["acceptance_before"]["wrong"]
    assert tuned.source == result.source and result.parameters["slope"] == 1.2


def test_fit_excludes_hidden_cases_and_needs_parameters():
    result, _ = run([LINEAR % "1.2"])
    hidden = result.acceptance.cases[:2]
    tuned = fit(result, [*hidden, *result.design.cases[:4]],
                [*result.acceptance.targets[:2], *result.design.targets[:4]], steps=2)
    assert tuned.report["fit"]["excluded_hidden"] == 2 and tuned.report["fit"]["cases"] == 4
    with pytest.raises(TensorCodeError, match="hidden"):
        fit(result, hidden, result.acceptance.targets[:2], steps=1)
    plain = """```python
def program(x):
    return {"route": x.slice(0, 1).reshape() * 2.0 + 1.0, "covered": 1.0 + 0.0 * x.sum()}
```"""
    plain_result, _ = run([plain])
    with pytest.raises(TrainingError, match="no parameters"):
        fit(plain_result, plain_result.design.cases, plain_result.design.targets)


def test_router_escalations_feed_repair_and_fitted_programs_save(tmp_path):
    result, _ = run([(LINEAR % "2.0").replace("0.0}", "1.0}")])
    directory = result.save(tmp_path / "deployed")
    program = Distillation.load(directory, executor="reference")
    router = program.router(lambda inputs: {"route": 2.0 * float(inputs["x"][0]) + 1.0})
    xs = [1.5, 8.25, 9.75, 3.0]
    answers = [router({"x": np.array([x, 1.0])}) for x in xs]
    assert [a["escalated"] for a in answers] == [False, True, True, False]
    assert router.rate() == 0.5
    cases, targets = router.cases()
    assert [c["x"][0] for c in cases] == [8.25, 9.75]
    revision = LINEAR.replace("value < 8.0", "value < 100.0").replace(
        '"offset": 0.0', '"offset": 1.0') % "2.0"
    revised = repair(program, author=RecordedModel([revision]), cases=cases,
                     targets=targets, attempts=1)
    assert revised.report["repair"]["added"] == 2
    assert revised.report["repair"]["excluded_hidden"] == 0
    assert revised({"x": [9.75, 1.0]})["covered"] == 1.0
    saved = Distillation.load(revised.save(tmp_path / "revised"), executor="reference")
    assert saved.report["repair"] == revised.report["repair"]
    assert len(saved.attempts) == len(program.attempts) + 1

    mistuned, _ = run([LINEAR % "1.5"])
    tuned = fit(mistuned, mistuned.design.cases, mistuned.design.targets, steps=50)
    loaded = Distillation.load(tuned.save(tmp_path / "tuned"), executor="reference")
    assert loaded.parameters == tuned.parameters != mistuned.parameters
    assert loaded.report["fit"]["steps"] == 50

    # a record written when the numba executor was called "compiled" still loads,
    # with the executor under its backend name
    record_path = tmp_path / "tuned" / "distillation.json"
    record = json.loads(record_path.read_text())
    record["report"]["fit"]["executor"] = "compiled"
    record_path.write_text(json.dumps(record))
    old = Distillation.load(tmp_path / "tuned", executor="reference")
    assert old.report["fit"]["executor"] == "numba"


def test_fit_reports_parameters_only_comparisons_reach():
    from tensorcode.distill import tickets
    from tensorcode.integrations import load_replies

    generated = tickets.generate(40, 3)
    cases = [{"features": tickets.features(t.text)} for t in generated]
    targets = [{"route": tickets.teacher(t.text)} for t in generated]
    result = distill(tickets.TASK, {"features": (12,)}, cases, targets=targets,
                     author=RecordedModel([load_replies(tickets.replies_path())[-1]]),
                     attempts=1, executor="reference")
    tuned = fit(result, result.design.cases, result.design.targets, steps=5)
    assert tuned.report["fit"]["no_gradient"] == ["threshold"]  # used only in >=
    assert tuned.parameters == result.parameters

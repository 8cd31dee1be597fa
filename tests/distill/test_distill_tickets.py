"""The measured ticket example and serving its saved program with `tensorcode route`."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest

from tensorcode.cli import main as cli_main
from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.distill import Distillation, tickets


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ticket-router")
    lines = tickets.run_example(directory)
    return directory, lines


def test_the_example_prints_its_measured_values(example):
    directory, lines = example
    program = Distillation.load(directory, executor="reference")
    report = program.report
    text = "\n".join(lines)
    design, acceptance = report["design"], report["acceptance"]
    assert (f"{design['cases']}: {design['covered']}, {design['wrong']}, "
            f"{design['uncovered']}") in text
    assert (f"{acceptance['cases']}: {acceptance['covered']}, {acceptance['wrong']}, "
            f"{acceptance['uncovered']}") in text
    size = (directory / "algorithm.json").stat().st_size
    assert f"{size:,} bytes" in text
    assert re.search(r"200: \d+%, \d+%", text)
    assert re.search(r"about [\d.]+ microseconds per call", text)
    assert design["cases"] + acceptance["cases"] == 240


def test_21_6_the_table_has_the_guides_rows_with_the_reference_executor(example):
    _, lines = example
    names = [line.split("  ")[0] for line in lines]
    for row in ("Design cases: covered, wrong, uncovered",
                "Acceptance cases (never shown): covered, wrong, uncovered",
                "Fresh tickets served: escalated, agreement with the teacher", "Artifact",
                "CPU reference executor", f"CPU {DEFAULT_BACKEND} executor"):
        assert row in names, row
    text = "\n".join(lines)
    assert re.search(r"CPU reference executor +about [\d.]+ microseconds per call", text)


def test_17_the_example_holds_out_distinct_inputs(example):
    directory, _ = example
    program = Distillation.load(directory, executor="reference")
    split = program.report["split"]
    assert split["by"] == "input"
    shown = {tuple(c["features"].tolist()) for c in program.design.cases}
    assert not any(tuple(c["features"].tolist()) in shown for c in program.acceptance.cases)


def test_the_recorded_replies_fail_then_succeed(example):
    directory, _ = example
    program = Distillation.load(directory, executor="reference")
    first, second = program.attempts
    assert first["stage"] == "compile" and "indexing with [] does not compile" in first["error"]
    assert second["stage"] == "scored" and program.report["selected_attempt"] == 2
    assert "indexing with [] does not compile" in second["prompt"]
    assert program.report["design"]["wrong"] == 0
    assert program.report["acceptance"]["wrong"] == 0
    assert "truth" in program.report


def test_the_program_abstains_exactly_on_tickets_without_a_keyword(example):
    directory, _ = example
    program = Distillation.load(directory, executor="reference")
    rows = np.array([tickets.features(t.text) for t in tickets.generate(240, 99)])
    covered = program.batch({"features": rows})["covered"]
    assert np.array_equal(covered != 0, rows.any(axis=1))
    assert 0 < (covered == 0).sum() < 240


def test_the_teacher_reads_text_the_program_cannot_see():
    silent = "hello please my order money pay"
    assert not tickets.features(silent).any()
    assert tickets.teacher(silent) == 0.0
    assert tickets.teacher("hello slow broken") == 1.0
    assert tickets.teacher("my login failed and refund") == 0.0  # tie: the lower route


def test_route_command_serves_the_saved_program(example, monkeypatch, capsys):
    directory, _ = example
    lines = [
        json.dumps({"features": [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]}),
        json.dumps({"features": [0] * 12}),
        "not json",
        json.dumps({"features": [1, 0]}),
        json.dumps({"features": [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0]}),
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    status = cli_main(["route", str(directory), "--backend", "reference"])
    captured = capsys.readouterr()
    answers = [json.loads(line) for line in captured.out.splitlines()]
    assert status == 1  # two lines were refused
    assert answers[0] == {"route": 1.0, "escalated": False, "path": "program"}
    assert answers[1] == {"route": None, "escalated": True, "reason": "abstained",
                          "path": "fallback_abstained"}
    assert "not JSON" in answers[2]["error"]["message"] and answers[2]["error"]["kind"] == "json"
    assert answers[2]["error"]["message"].startswith("line 3: ")
    assert "shape [2]" in answers[3]["error"]["message"] and answers[3]["path"] == "refused"
    assert (answers[3]["error"]["kind"], answers[3]["error"]["field"]) == ("shape", "features")
    assert answers[4] == {"route": 3.0, "escalated": False, "path": "program"}
    assert "5 lines, 2 answered, 1 escalated" in captured.err


def test_route_command_refuses_a_directory_without_a_program(tmp_path, capsys):
    status = cli_main(["route", str(tmp_path)])
    assert status == 1
    assert "distillation.json" in capsys.readouterr().err

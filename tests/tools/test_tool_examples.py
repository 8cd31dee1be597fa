"""The tools' example programs (``examples/tools/``, which ``tensorcode demo`` runs) run
end to end and show what they claim; the data they generate is the same on every
machine."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys
from types import ModuleType

import pytest

from tensorcode.errors import ArtifactError
from tensorcode.tools import Chatbot
from tensorcode.tools.investigator import LABELS

ROOT = pathlib.Path(__file__).resolve().parents[2]


def example_module(name: str) -> ModuleType:
    """``examples/tools/<name>.py`` loaded as a module (its data generators)."""
    spec = importlib.util.spec_from_file_location(f"tools_example_{name}",
                                                  ROOT / "examples" / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    result = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_decision_example_trains_and_resumes_exactly():
    out = run("tools/decision.py", "--backend", "reference")
    assert "training mode after from_tool: True" in out
    assert "captured 1 call, steps still 0" in out
    assert "resumed at step 20 with progress {'next_example': 4}" in out
    assert "resumed losses equal the uninterrupted run: True" in out
    assert "chose disk" in out and "chose cert" in out


def test_scene_and_planner_example():
    out = run("tools/scene_and_planner.py", "--backend", "reference")
    assert "observation [1.0, 0.0, 0.0]: 'the light is red'" in out
    assert "'everything is quiet': wait" in out
    assert "reloaded planner ranks identically: True" in out


def test_owned_vector_lifecycle():
    out = run("owned_vector_lifecycle.py", "--backend", "reference")
    assert "reloaded Latent equals the original: True" in out
    assert "predicts 'fault'" in out
    assert "a CandidateSet with latent_codecs() only is refused" in out
    assert "'candidate-set' is not allowlisted" in out
    assert "with its own entry it round-trips: True" in out


def test_the_authored_data_is_the_same_on_every_machine():
    """The demos train on data generated from templates with fixed seeds, not shipped:
    these digests pin it (they equal the files the package once shipped)."""
    out = run("tools/authored.py")
    assert "decision: 320 examples, sha256 ad1e6eb4861ac6629e2217fb995482715fcadf3b58fc9e9602" \
        "a42a3910876bf3" in out
    assert "planner: 320 examples, sha256 7c000274734834f2fce9a8e445e20db9f18f8a64d1c060e59594" \
        "9699f9758c4e" in out
    out = run("tools/authored_investigator.py")
    assert "240 verification pairs, 288 documents, 72 queries, sha256 476c3cbb9124977bc1bb12a" \
        "70b223d79ea7cc4442777ca5c615134693c771073" in out


def test_the_investigator_data_is_well_formed():
    data = example_module("authored_investigator")
    pairs = data.verification_pairs()
    assert {p["label"] for p in pairs} == set(LABELS)
    documents, queries = data.retrieval_set()
    ids = {d["id"] for d in documents}
    assert len(ids) == len(documents) == 288 and len(queries) == 72
    assert all(q["relevant"] and set(q["relevant"]) <= ids for q in queries)


def test_decision_and_planner_reload_in_a_fresh_process_with_identical_predictions(
        tmp_path):
    out = run("tools/decision_and_planner.py", "--backend", "reference", "--epochs", "3",
              "--kind", "planner", "--output", str(tmp_path))
    lines = out.splitlines()
    assert "3 full-batch Adam steps" in lines[0]
    assert "predictions identical" in lines[2]
    assert (tmp_path / "planner" / "tool.json").is_file()


def test_investigator_example_calibrates_and_refuses_the_stale_index():
    out = run("tools/investigator.py", "--backend", "reference", "--epochs", "2")
    assert "4 Adam steps" in out
    assert "after calibration (temperature" in out
    assert "the index built before training: refused (stale fingerprint)" in out


def test_chatbot_example():
    out = run("tools/chatbot.py", "--backend", "reference")
    assert "  > bye\n  < goodbye!" in out
    assert "the same generator state replays the same replies: True" in out
    assert "refused: text holds 'H' at position 0" in out
    assert "reloaded session: 6 messages, equal: True" in out
    assert "reloaded model, same session and seed: same reply" in out
    assert "session now 8 messages" in out


def test_chatbot_dialogue_summarizes_the_loss_and_replays_its_sample(tmp_path):
    out = run("tools/chatbot_dialogue.py", "--backend", "reference", "--epochs", "8",
              "--output", str(tmp_path / "bot"))
    lines = out.splitlines()
    assert "8 full-batch Adam steps" in lines[0] and "written for TensorCode" in lines[0]
    assert lines[1].startswith("  loss curve: step 1: ") and "step 8: " in lines[1]
    assert "(generator seed 7)" in lines[2]
    assert lines[3].endswith("same seed: same reply")
    assert (tmp_path / "bot" / "tool.json").is_file()


def test_the_written_dialogue_parses_and_fits_the_alphabet():
    dialogue = example_module("chatbot_dialogue")
    inputs, targets = dialogue.load_dialogue()
    assert len(inputs) == len(targets) >= 10
    bot = Chatbot()  # the configuration the program trains
    for text in inputs + targets:
        bot.encode(text)
    with pytest.raises(ArtifactError, match="line 2"):
        dialogue.parse_dialogue("> hi\n> again\n")
    with pytest.raises(ArtifactError, match="at least one"):
        dialogue.parse_dialogue("")

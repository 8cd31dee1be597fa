"""The tools' examples and demo section run end to end and show what they claim; the
shipped data sets are exactly what their generator makes."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from tensorcode.tools import authored, example

ROOT = pathlib.Path(__file__).resolve().parents[2]


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


def test_shipped_data_is_what_the_generator_makes():
    for name, generate in authored.GENERATORS.items():
        assert authored.load(name) == json.loads(json.dumps(generate())), name
    readme = (authored.DATA / "README.md").read_text()
    assert "python -m tensorcode.tools.authored" in readme


def test_demo_section_reloads_in_a_fresh_process_with_identical_predictions(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    lines = example.run_example(tmp_path, backend="reference", epochs=3, kinds=("planner",))
    assert "3 full-batch Adam steps" in lines[0]
    assert "predictions identical" in lines[2]


def test_chatbot_example():
    out = run("tools/chatbot.py", "--backend", "reference")
    assert "  > bye\n  < goodbye!" in out
    assert "the same generator state replays the same replies: True" in out
    assert "refused: text holds 'H' at position 0" in out
    assert "reloaded session: 6 messages, equal: True" in out
    assert "reloaded model, same session and seed: same reply" in out
    assert "session now 8 messages" in out


def test_chatbot_demo_section_summarizes_the_loss_and_replays_its_sample(tmp_path):
    from tensorcode.tools import chat_example

    lines = chat_example.run_example(tmp_path / "bot", backend="reference", epochs=8)
    assert "8 full-batch Adam steps" in lines[0] and "written for TensorCode" in lines[0]
    assert lines[1].startswith("  loss curve: step 1: ") and "step 8: " in lines[1]
    assert "(generator seed 7)" in lines[2]
    assert lines[3].endswith("same seed: same reply")
    assert (tmp_path / "bot" / "tool.json").is_file()

"""Exact resume with randomness inside plans: dropout masks, shuffled minibatches and
sampled tokens continue bit for bit after a checkpoint, in a fresh process."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

PROGRAM = pathlib.Path(__file__).with_name("random_resume_program.py")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(mode: str, directory: pathlib.Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    result = subprocess.run([sys.executable, str(PROGRAM), mode, str(directory)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((directory / f"{mode}.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("resume")
    return {mode: _run(mode, directory) for mode in ("straight", "first", "resume", "sample")}


def test_losses_parameters_and_generator_match_an_uninterrupted_run(runs):
    straight, first, resumed = runs["straight"], runs["first"], runs["resume"]
    assert first["losses"] + resumed["losses"] == straight["losses"]
    assert resumed["parameters"] == straight["parameters"]
    assert resumed["generator"] == straight["generator"]
    assert int(straight["generator"]["philox"]["counter"], 16) > 0  # dropout drew


def test_sampled_tokens_continue_exactly(runs):
    # the resumed run samples from its resumed weights, the last run from a checkpoint
    # taken in the middle of the sampling loop
    tokens = runs["straight"]["tokens"]
    assert runs["resume"]["tokens"] == tokens[:12]
    assert runs["sample"]["tokens"] == tokens[12:]
    assert len(set(tokens)) > 1  # the loop really samples

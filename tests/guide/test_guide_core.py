"""The guide's examples reproduce their claims."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tensorcode.guide import load

# the example programs of examples/guide, loaded as modules
learning_rates, named_checkpoint, noisy_sine, spec_and_state, two_moons, xor = (
    load(name) for name in ("learning_rates", "named_checkpoint", "noisy_sine",
                            "spec_and_state", "two_moons", "xor"))

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_spec_and_state():
    result = spec_and_state.run()
    assert result.claims["unchanged"] is True
    assert result.claims["initial"] == 0.0
    assert result.claims["stepped"] == pytest.approx(2.0, abs=1e-8)
    assert result.lines[0] == "network.describe() unchanged after 100 steps: True"
    assert result.lines[3].endswith("costing 1 payloads")


def test_learning_rates_from_clones():
    result = learning_rates.run()
    finals = result.claims["finals"]
    for rate, final in finals.items():
        assert final["last_loss"] < final["first_loss"] / 1e4, rate
    assert finals[0.05]["w"] == pytest.approx(2.0, abs=1e-3)
    assert finals[0.05]["b"] == pytest.approx(1.0, abs=1e-3)
    # a larger rate converges further in the same number of steps
    assert finals[0.05]["last_loss"] < finals[0.02]["last_loss"] < finals[0.005]["last_loss"]
    assert len(result.data["curves"]) == 3
    assert result.lines[-1] == "initial table untouched: w 0, b 0"


def test_xor_signs_right_and_surface_through_two_row_expression():
    result = xor.run()
    assert result.claims["signs_right"]
    for value, want in zip(result.claims["answers"], [-1, 1, 1, -1]):
        assert value * want > 0.9
    assert len(result.data["surface"]) == 12 and len(result.data["surface"][0]) == 24


def test_noisy_sine_fit():
    result = noisy_sine.run(backend="network")
    assert result.claims["last_loss"] < result.claims["first_loss"] / 50
    assert result.claims["worst_inner_error"] < 0.35
    assert len(result.data["fit"]) == 96


def test_two_moons_separated():
    result = two_moons.run(backend="network")
    assert result.claims["last_loss"] < result.claims["first_loss"] / 20
    assert result.claims["accuracy"] >= 0.97
    assert len(result.data["surface"]) == 16 and len(result.data["surface"][0]) == 48


def test_named_checkpoint_lines():
    result = named_checkpoint.run()
    assert result.lines[:4] == ["0.weights    [3, 4]", "0.bias       [4]",
                                "1.weights    [4, 2]", "1.bias       [2]"]
    assert result.lines[-1] == "restored == original, payload for payload: True"
    # the positional form, side by side
    assert result.claims["positional_shapes"] == [[3, 4], [4], [4, 2], [2]]
    assert "restored by position == original: True" in result.lines


def test_example_script_runs_and_prints_its_lines():
    out = subprocess.run([sys.executable, str(ROOT / "examples/guide/named_checkpoint.py")],
                         capture_output=True, text=True, check=True)
    assert "restored == original, payload for payload: True" in out.stdout


@pytest.mark.parametrize("example", [noisy_sine, two_moons])
def test_compiled_training_matches_the_interpreter(example):
    """The guide's compiled-training examples run on a forward-only plan by default; a
    short run agrees with the reference interpreter's (float32 rounding aside)."""
    compiled = example.run(steps=60)
    interpreted = example.run(steps=60, backend="network")
    assert "forward-only plan" in compiled.lines[0]
    np.testing.assert_allclose(compiled.data["losses"], interpreted.data["losses"], rtol=2e-4)

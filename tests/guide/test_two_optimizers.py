"""The guide's "two optimizers, one recorded gradient" example."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tensorcode.guide import load

two_optimizers = load("two_optimizers")  # examples/guide/two_optimizers.py

ROOT = pathlib.Path(__file__).resolve().parents[2]
LABELS = ["sgd, lr 0.003", "adam, lr 0.005"]


@pytest.fixture(scope="module")
def result():
    return two_optimizers.run(backend="network")


def test_both_optimizers_descend_from_the_same_start(result):
    curves = result.data["curves"]
    assert list(curves) == LABELS
    assert all(len(curve) == 400 for curve in curves.values())
    # one initial table and one recorded gradient: the first losses are the same number
    assert curves[LABELS[0]][0] == curves[LABELS[1]][0]
    for label in LABELS:
        claim = result.claims[label]
        assert claim["last_loss"] < claim["first_loss"] / 50, label
        assert np.all(np.isfinite(curves[label]))
    # SGD's first step is lr * gradient; Adam's first step moves every weight by ~lr
    assert curves[LABELS[0]][1] != curves[LABELS[1]][1]


def test_lines_print_each_curve_start_and_end(result):
    assert result.title == "two optimizers, one recorded gradient"
    assert len(result.lines) == 3
    for line, label in zip(result.lines[1:], LABELS):
        curve = result.data["curves"][label]
        assert line.startswith(label)
        assert f"{curve[0]:.3f} -> {curve[-1]:.4f} over 400 steps" in line


def test_compiled_plan_reads_the_same_gradients():
    planned = two_optimizers.run(quick=True)
    reference = two_optimizers.run(quick=True, backend="network")
    assert "plan" in planned.lines[0]
    for label in LABELS:
        np.testing.assert_allclose(planned.data["curves"][label],
                                   reference.data["curves"][label], rtol=1e-4)


def test_example_script_prints_the_lines():
    completed = subprocess.run([sys.executable, str(ROOT / "examples" / "guide" /
                                                    "two_optimizers.py")],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.strip().splitlines()
    assert lines[1].startswith("sgd, lr 0.003: sum of squared errors")
    assert lines[2].startswith("adam, lr 0.005: sum of squared errors")

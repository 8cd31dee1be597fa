"""Calibration against hand-computed values and a synthetic overconfident model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorcode.errors import ShapeError
from tensorcode.training import TemperatureCalibration, evaluate_calibration, fit_threshold

REF = "reference"


def test_metrics_on_a_hand_computed_case():
    logits = np.array([[2.0, 0.0], [0.0, 1.0]])
    labels = np.array([0, 0])
    p1 = math.exp(2) / (math.exp(2) + 1)   # example 1: confident and right
    p2 = math.exp(1) / (math.exp(1) + 1)   # example 2: predicts class 1, wrong
    metrics = evaluate_calibration(logits, labels, bins=10)
    assert metrics["accuracy"] == 0.5
    # bins (0.8, 0.9] and (0.7, 0.8] each hold one example
    assert metrics["ece"] == pytest.approx(0.5 * (1 - p1) + 0.5 * p2, rel=1e-12)
    assert metrics["mce"] == pytest.approx(p2, rel=1e-12)
    assert metrics["nll"] == pytest.approx((-math.log(p1) - math.log(1 - p2)) / 2, rel=1e-12)
    brier = (2 * (1 - p1) ** 2 + 2 * p2 ** 2) / 2
    assert metrics["brier"] == pytest.approx(brier, rel=1e-12)


def test_one_bin_ece_is_the_confidence_accuracy_gap():
    logits = np.array([[3.0, 0.0], [0.0, 3.0], [3.0, 0.0]])
    labels = np.array([0, 0, 0])
    confidence = math.exp(3) / (math.exp(3) + 1)
    metrics = evaluate_calibration(logits, labels, bins=1)
    assert metrics["ece"] == pytest.approx(abs(2 / 3 - confidence), rel=1e-12)


def test_temperature_fit_matches_the_closed_form():
    # three examples [1, 0] labelled 0 and one labelled 1: the NLL is minimized where
    # sigmoid(1 / T) = 3 / 4, i.e. T = 1 / ln 3
    logits = np.array([[1.0, 0.0]] * 4)
    labels = np.array([0, 0, 0, 1])
    calibration = TemperatureCalibration(backend=REF)
    report = calibration.fit(logits, labels)
    assert report["temperature"] == pytest.approx(1 / math.log(3), rel=1e-6)
    assert calibration.temperature == pytest.approx(1 / math.log(3), rel=1e-6)
    assert report["nll_after"] <= report["nll_before"]
    expected = -(3 * math.log(0.75) + math.log(0.25)) / 4
    assert report["nll_after"] == pytest.approx(expected, rel=1e-9)


def test_temperature_recovers_the_overconfidence_factor():
    rng = np.random.default_rng(11)
    n, classes = 20000, 5
    true_logits = rng.normal(0.0, 1.5, size=(n, classes))
    probabilities = np.exp(true_logits) / np.exp(true_logits).sum(axis=1, keepdims=True)
    labels = (rng.random(n)[:, None] > np.cumsum(probabilities, axis=1)).sum(axis=1)
    overconfident = 3.0 * true_logits
    calibration = TemperatureCalibration(backend=REF)
    report = calibration.fit(overconfident[: n // 2], labels[: n // 2])
    assert report["temperature"] == pytest.approx(3.0, rel=0.05)
    held_out = overconfident[n // 2:], labels[n // 2:]
    before = evaluate_calibration(*held_out)
    calibrated = calibration.forward(held_out[0].astype(np.float32))
    np.testing.assert_allclose(calibrated, held_out[0] / calibration.temperature, rtol=1e-5,
                               atol=1e-5)
    after = evaluate_calibration(calibrated, held_out[1])
    assert before["ece"] > 0.1 and after["ece"] < 0.02
    assert after["nll"] < before["nll"] and after["brier"] < before["brier"]
    assert after["accuracy"] == before["accuracy"]  # scaling never changes the argmax


def test_temperature_lives_in_the_parameter_table():
    calibration = TemperatureCalibration(backend=REF)
    assert [name for name, _ in calibration.named_parameters()] == ["temperature"]
    calibration.fit(np.array([[2.0, 0.0], [0.0, 2.0]]), np.array([0, 1]))
    fresh = TemperatureCalibration(backend=REF)
    fresh.parameters = calibration.parameters
    assert fresh.temperature == calibration.temperature
    assert fresh.fingerprint() == TemperatureCalibration().fingerprint()


def test_fit_threshold_by_hand():
    confidences = [0.9, 0.8, 0.7, 0.6]
    correct = [True, True, False, True]
    loose = fit_threshold(confidences, correct, max_error=0.25)
    assert (loose.threshold, loose.coverage, loose.error, loose.accepted) == (0.6, 1.0, 0.25, 4)
    strict = fit_threshold(confidences, correct, max_error=0.2)
    assert (strict.threshold, strict.coverage, strict.error) == (0.8, 0.5, 0.0)
    none = fit_threshold([0.9, 0.5], [False, True], max_error=0.1)
    assert none.threshold == math.inf and none.coverage == 0.0 and none.accepted == 0


def test_fit_threshold_keeps_ties_together():
    result = fit_threshold([0.9, 0.7, 0.7, 0.5], [1, 1, 0, 1], max_error=0.0)
    assert result.threshold == 0.9 and result.accepted == 1


def test_bad_inputs_are_refused():
    with pytest.raises(ShapeError):
        evaluate_calibration(np.zeros(3), np.zeros(3, int))
    with pytest.raises(ValueError):
        evaluate_calibration(np.zeros((2, 2)), np.array([0, 2]))
    with pytest.raises(ValueError):
        TemperatureCalibration(backend=REF).fit(np.array([[np.nan, 0.0]]), np.array([0]))
    with pytest.raises(ValueError):
        fit_threshold([0.5], [2], max_error=0.1)
    with pytest.raises(ValueError):
        fit_threshold([0.5], [1], max_error=1.5)


CHECK_NUMBA = """
import numpy as np
from tensorcode.training import TemperatureCalibration
logits = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
compiled, reference = TemperatureCalibration(), TemperatureCalibration(backend="reference")
for calibration in (compiled, reference):
    calibration.load_payloads([np.float32(2.5)])
np.testing.assert_allclose(compiled.forward(logits), reference.forward(logits), rtol=1e-6)
np.testing.assert_allclose(compiled.forward(logits), logits / 2.5, rtol=1e-6)
"""


def test_compiled_forward_matches_the_reference():
    # in a child process: a wrong compiled kernel may corrupt memory, not just values
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", CHECK_NUMBA], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-2000:]

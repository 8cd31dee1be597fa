"""Cross-entropy on distribution targets and the Planner's tried-candidate loss: values
and gradients against float64 finite differences, and malformed distributions refused."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import TrainingError
from tensorcode.operations import LinearOperation
from tensorcode.tools.planner import candidate_mse
from tensorcode.training import Trainer
from tensorcode.training.losses import (
    DISTRIBUTION_TOLERANCE,
    check_distribution,
    soft_cross_entropy,
)

EPS = 1e-6


def gradient_check(loss_fn, logits, target):
    """The recorded gradient of ``loss_fn(param, target)`` against central differences."""
    tape = tc.Tape()
    param = tape.parameter(np.asarray(logits, np.float64))
    loss = loss_fn(param, tape.leaf(np.asarray(target, np.float64)))
    adjoints = tape.differentiate(loss, [param])
    network = tape.into_network()
    table = network.parameters()
    recorded = network.forward(table).recorded_gradients(adjoints).of(param)
    base = np.array(table.of(param))
    numeric = np.zeros_like(base)
    for k in range(base.size):
        for sign in (1.0, -1.0):
            bumped = base.copy().reshape(-1)
            bumped[k] += sign * EPS
            value = float(network.forward(table.replace({param: bumped.reshape(base.shape)}))
                          .of(loss))
            numeric.reshape(-1)[k] += sign * value / (2 * EPS)
    np.testing.assert_allclose(recorded, numeric, rtol=1e-6, atol=1e-8)
    return float(network.forward(table).of(loss)), recorded


def test_soft_cross_entropy_value_and_gradient():
    logits = np.array([[0.3, -1.2, 2.0], [1.0, 0.5, -0.5]])
    target = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    value, gradient = gradient_check(soft_cross_entropy, logits, target)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    assert value == pytest.approx(-(target * log_p).sum() / 2, rel=1e-12)
    np.testing.assert_allclose(gradient, (np.exp(log_p) - target) / 2, rtol=1e-9)


def test_masked_logits_keep_a_finite_loss_and_zero_gradient():
    logits = np.array([[0.3, -1.2, -1e9]])
    value, gradient = gradient_check(soft_cross_entropy, logits, [[0.4, 0.6, 0.0]])
    assert np.isfinite(value) and gradient[0, 2] == 0.0


def test_candidate_mse_reads_only_the_tried_candidate():
    outputs = np.array([[0.5, -0.3, 0.9, 0.0]])
    target = np.zeros((1, 2, 4))
    target[0, 0, 1], target[0, 1, 1] = 1.0, 2.0
    value, gradient = gradient_check(candidate_mse, outputs, target)
    assert value == pytest.approx((-0.3 - 2.0) ** 2)
    assert np.count_nonzero(gradient) == 1


@pytest.mark.parametrize("values, message", [
    ([0.5, -0.1, 0.6], r"\[1\] = -0.1"),
    ([0.5, float("nan"), 0.5], r"\[1\] = nan"),
    ([0.5, float("inf"), 0.5], r"\[1\] = inf"),
    ([0.5, 0.6, 0.0], "sums to 1.1"),
    ([1.0, 0.0], "needs 3 entries"),
    ("abc", "list of numbers"),
])
def test_malformed_distributions_name_the_offending_values(values, message):
    with pytest.raises(TrainingError, match=message):
        check_distribution(values, 3)


def test_the_tolerance_is_stated_and_applied():
    assert DISTRIBUTION_TOLERANCE == 1e-6
    check_distribution([1 / 3, 1 / 3, 1 / 3], 3)
    check_distribution(np.full(3, 1 / 3, np.float32), 3)
    with pytest.raises(TrainingError):
        check_distribution([1 / 3, 1 / 3, 1 / 3 + 2e-6], 3)


def test_an_operation_trainer_takes_distribution_targets():
    layer = LinearOperation(3, 3, seed=1, backend="reference")
    session = tc.trace()
    out = session.run(lambda: layer(np.ones((2, 3))))
    session.supervise(out, np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]), source="test")
    trainer = Trainer.from_ops({"layer": layer}, lr=0.5, backend="reference")
    losses = [trainer.step(session) for _ in range(5)]
    assert losses[-1] < losses[0]
    bad = tc.trace()
    out = bad.run(lambda: layer(np.ones(3)))
    bad.supervise(out, np.array([0.5, 0.6, 0.0]), source="test")
    with pytest.raises(TrainingError, match="sums to"):
        trainer.step(bad)
    assert trainer.steps == 5


@pytest.mark.parametrize("values", [
    ["0.2", "0.3", "0.5"], [True, False, False], ["1", 0, 0], [0.5, True, 0.5 - 1.0 + 1.0],
    np.array([True, False, False]), np.array(["0.2", "0.3", "0.5"]),
])
def test_distribution_entries_are_numbers_not_strings_or_booleans(values):
    with pytest.raises(TrainingError, match="must hold numbers"):
        check_distribution(values, 3)


@pytest.mark.parametrize("target", [
    [["0.5", "0.5", "0"], [0.0, 0.0, 1.0]], [[True, False, False], [0.0, 0.0, 1.0]],
    [[0.5, 0.5, False], [0.0, 0.0, 1.0]],
])
def test_a_trainer_refuses_string_and_boolean_distribution_targets(target):
    layer = LinearOperation(3, 3, seed=1, backend="reference")
    session = tc.trace()
    out = session.run(lambda: layer(np.ones((2, 3))))
    session.supervise(out, target, source="test")
    trainer = Trainer.from_ops({"layer": layer}, lr=0.5, backend="reference")
    with pytest.raises(TrainingError, match="target"):
        trainer.step(session)
    assert trainer.steps == 0


@pytest.mark.parametrize("index", [10 ** 30, -(10 ** 30), 2 ** 63])
def test_a_class_index_beyond_int64_is_a_training_error(index):
    layer = LinearOperation(3, 3, seed=1, backend="reference")
    session = tc.trace()
    out = session.run(lambda: layer(np.ones(3)))
    session.supervise(out, index, source="test")
    trainer = Trainer.from_ops({"layer": layer}, lr=0.5, backend="reference")
    with pytest.raises(TrainingError, match="out of range"):
        trainer.step(session)

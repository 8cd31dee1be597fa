"""``Tape(broadcast="explicit")`` reaches the step rules: a rule that multiplies a
``[3, 4]`` gradient by a ``[4]`` learning rate is refused like the same product on the
tape; scalars, equal shapes and ``np.broadcast_to`` still work, and the default mode is
unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ShapeError


def _tables(broadcast):
    tape = tc.Tape(broadcast=broadcast)
    w = tape.parameter(np.ones((3, 4)))
    loss = (w * w).sum()
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    parameters = network.parameters()
    gradients = network.forward(parameters).recorded_gradients(adjoints)
    return w, parameters, gradients


RATES = np.array([0.1, 0.2, 0.3, 0.4])


@pytest.mark.parametrize("rule", [
    lambda p, g: p - g * RATES,
    lambda p, g: p - RATES * g,
    lambda p, g: p - (g * 0.5) * RATES,
    lambda p, g: p - g * RATES.tolist(),
    lambda p, g: p - np.multiply(g, RATES),
    lambda p, g: p + np.ones((1, 4)),
])
def test_implicit_broadcasts_in_a_rule_are_refused(rule):
    w, parameters, gradients = _tables("explicit")
    with pytest.raises(ShapeError, match="broadcasts nothing by accident"):
        parameters.step(gradients, rule)
    with pytest.raises(ShapeError, match=r"\[3, 4\] and \[4\]|\[3, 4\] and \[1, 4\]"
                                         r"|\[4\] and \[3, 4\]"):
        parameters.step_each(gradients, lambda symbol, p, g: rule(p, g))


def test_scalars_equal_shapes_and_stated_broadcasts_are_fine():
    w, parameters, gradients = _tables("explicit")
    stepped = parameters.step(gradients, lambda p, g: p - 0.1 * g)
    np.testing.assert_allclose(stepped.of(w), np.full((3, 4), 0.8))
    rates = np.broadcast_to(RATES, (3, 4))
    stepped = parameters.step(gradients, lambda p, g: p - g * rates + np.float64(0.0))
    np.testing.assert_allclose(stepped.of(w), 1.0 - 2.0 * rates)
    assert type(stepped.of(w)) is np.ndarray  # the table holds plain arrays
    stepped = parameters.step(gradients, lambda p, g: p - g.mean(axis=0) @ np.eye(4)[0])
    assert stepped.of(w).shape == (3, 4)


def test_the_default_mode_still_broadcasts_as_numpy():
    w, parameters, gradients = _tables("numpy")
    stepped = parameters.step(gradients, lambda p, g: p - g * RATES)
    np.testing.assert_allclose(stepped.of(w), 1.0 - 2.0 * np.broadcast_to(RATES, (3, 4)))

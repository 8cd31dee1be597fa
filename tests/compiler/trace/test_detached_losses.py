"""``tape.differentiate`` refuses a loss no parameter reaches through a differentiable
path: a literal translation of the Rust guide's ``(error * error).detach()`` (there a
handle, here JAX's ``stop_gradient``) would otherwise train on zero gradients without a
word."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import TrainingError


def _error():
    tape = tc.Tape()
    w = tape.parameter(0.0)
    x = tape.input(2.0)
    y = tape.input(4.0)
    return tape, w, x, y, w * x - y


@pytest.mark.parametrize("detach", [lambda e: (e * e).detach(),
                                    lambda e: tc.stop_gradient(e * e),
                                    lambda e: e.detach() * e.detach(),
                                    lambda e: (e.detach() * 2.0).sum()])
def test_a_detached_loss_is_refused_naming_detach(detach):
    tape, w, x, y, error = _error()
    with pytest.raises(TrainingError, match="detach/stop_gradient"):
        tape.differentiate(detach(error), [w])


def test_a_loss_through_comparisons_only_is_refused_as_nondifferentiable():
    tape, w, x, y, error = _error()
    with pytest.raises(TrainingError, match="without gradients"):
        tape.differentiate((w > 0.5) * x, [w])


def test_a_disconnected_loss_is_refused():
    tape, w, x, y, error = _error()
    with pytest.raises(TrainingError, match="disconnected"):
        tape.differentiate(x * y, [w])


def test_a_partly_detached_loss_still_trains_and_allow_disconnected_is_explicit():
    tape, w, x, y, error = _error()
    loss = error * error + error.detach()  # one live path is enough
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    gradient = network.forward(network.parameters()).recorded_gradients(adjoints).of(w)
    assert float(gradient) == pytest.approx(2 * (0.0 * 2.0 - 4.0) * 2.0)

    tape, w, x, y, error = _error()
    zeros = tape.differentiate((error * error).detach(), [w], allow_disconnected=True)
    network = tape.into_network()
    table = network.forward(network.parameters()).recorded_gradients(zeros)
    assert np.all(table.of(w) == 0.0)

"""Networks, runs, feeds and the runtime backward."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import FeedError, TensorCodeError, TrainingError


def regression(tape):
    w = tape.parameter(0.0)
    x = tape.input(0.0, name="x")
    y = tape.input(0.0)
    error = w * x - y
    return w, x, y, error * error


def test_spec_and_state_loop():
    network, (w, x, y, loss) = tc.Tape.record(regression)
    before = network.describe()
    parameters = network.parameters()
    for step in range(100):
        sx, sy = [(1.0, 2.0), (2.0, 4.0), (3.0, 6.0)][step % 3]
        run = network.forward(parameters, {x: sx, y: sy})
        gradients = run.backward(loss).parameters(parameters)
        parameters = parameters.step(gradients, lambda p, g: p - g * 0.02)
    assert network.describe() == before
    assert float(network.parameters().of(w)) == 0.0
    assert float(parameters.of(w)) == pytest.approx(2.0, abs=1e-8)


@pytest.mark.parametrize("feed, message", [
    (np.zeros(2), r'input "x": expected float64\[\], got float64\[2\]'),
    (np.float32(1.0), r'input "x": expected float64\[\], got float32\[\].*astype'),
    ("text", 'input "x": expected float64'),
])
def test_feed_type_errors_name_the_input(feed, message):
    network, (w, x, y, loss) = tc.Tape.record(regression)
    with pytest.raises(FeedError, match=message):
        network.forward(network.parameters(), {x: feed})


def test_feeding_a_non_input_or_foreign_symbol_is_rejected():
    network, (w, x, y, loss) = tc.Tape.record(regression)
    other, (_, ox, _, _) = tc.Tape.record(regression)
    with pytest.raises(FeedError, match="parameter, not an input"):
        network.forward(network.parameters(), {w: 1.0})
    with pytest.raises(FeedError, match="another network"):
        network.forward(network.parameters(), {ox: 1.0})
    with pytest.raises(FeedError, match="feed keys must be input symbols"):
        network.forward(network.parameters(), {"x": 1.0})


def test_python_ints_are_weak_feeds_for_float_inputs():
    network, (w, x, y, loss) = tc.Tape.record(regression)
    run = network.forward(network.parameters().replace({w: 3.0}), {x: 2, y: 1})
    assert float(run.of(loss)) == 25.0


def test_run_values_are_read_only():
    network, (w, x, y, loss) = tc.Tape.record(regression)
    value = network.forward(network.parameters(), {x: 1.0}).of(loss)
    with pytest.raises(ValueError):
        value[...] = 3.0


def test_parameters_from_another_network_are_rejected():
    network, _ = tc.Tape.record(regression)
    other, _ = tc.Tape.record(regression)
    with pytest.raises(TensorCodeError, match="belongs to another network"):
        network.forward(other.parameters())


def test_backward_matches_recorded_gradients_for_inputs_too():
    tape = tc.Tape()
    w = tape.parameter(np.array([1.0, -2.0]))
    x = tape.input(np.array([3.0, 0.5]))
    loss = (w * x).tanh().sum()
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    run = network.forward(network.parameters())
    np.testing.assert_allclose(run.backward(loss).of(w), run.of(adjoints.of(w)))
    expected_dx = (1 - np.tanh(np.array([3.0, -1.0])) ** 2) * np.array([1.0, -2.0])
    np.testing.assert_allclose(run.backward(loss).of(x), expected_dx)


def test_twin_expressions_share_parameters():
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [2, 3, 1], init=tc.init.xavier(1))
    batch = mlp(tape.input(np.ones((4, 2), np.float32)))
    single = mlp(tape.input(np.ones((1, 2), np.float32)))
    network = tape.into_network()
    run = network.forward(network.parameters())
    np.testing.assert_allclose(run.of(batch)[0], run.of(single)[0])


def _error_network(loss_of):
    tape = tc.Tape()
    w = tape.parameter(0.0)
    x = tape.input(2.0)
    y = tape.input(4.0)
    loss = loss_of(w, x, y, w * x - y)
    network = tape.into_network()
    return network, w, loss


@pytest.mark.parametrize("loss_of, match", [
    (lambda w, x, y, e: (e * e).detach(), "detach/stop_gradient"),
    (lambda w, x, y, e: tc.stop_gradient(e * e), "detach/stop_gradient"),
    (lambda w, x, y, e: e.detach() * e.detach(), "detach/stop_gradient"),
    (lambda w, x, y, e: (w > 0.5) * x, "without gradients"),
    (lambda w, x, y, e: x * y, "disconnected")])
def test_run_backward_refuses_what_differentiate_refuses(loss_of, match):
    """``(e * e).detach()`` as a loss: ``tape.differentiate`` refuses it, and so does its
    runtime twin, rather than handing back zeros to train on."""
    network, w, loss = _error_network(loss_of)
    parameters = network.parameters()
    backward = network.forward(parameters).backward(loss)
    with pytest.raises(TrainingError, match=f"run.backward: .*{match}"):
        backward.parameters(parameters)
    with pytest.raises(TrainingError, match=match):
        backward.of(w)
    zeros = network.forward(parameters).backward(loss, allow_disconnected=True)
    assert np.all(zeros.parameters(parameters).of(w) == 0.0)


def test_run_backward_through_one_live_path_still_gives_the_gradient():
    network, w, loss = _error_network(lambda w, x, y, e: e * e + e.detach())
    parameters = network.parameters()
    gradient = network.forward(parameters).backward(loss).parameters(parameters).of(w)
    assert float(gradient) == pytest.approx(2 * (0.0 * 2.0 - 4.0) * 2.0)

"""``record_backward``: a backward program of its own that reads the forward's values
as inputs gives the gradients ``differentiate`` records on the forward's tape."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.trace.backward import record_backward
from tensorcode.errors import TrainingError


def record(tape: tc.Tape, x_value: np.ndarray) -> tuple:
    w = tape.parameter(np.linspace(-1.0, 1.0, 12).reshape(3, 4), name="w")
    b = tape.parameter(np.array([0.1, -0.2, 0.3, 0.4]), name="b")
    x = tape.input(x_value, name="x")
    y = ((x @ w + b).tanh() * 2.0).softmax(axis=-1)
    return x, y, [w, b]


def test_the_backward_program_reads_saved_values_and_matches_differentiate():
    rng = np.random.default_rng(0)
    x_value, dy = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    forward = tc.Tape()
    x, y, params = record(forward, x_value)
    upstream = forward.input(dy, name="dy")
    surrogate = (y * upstream).sum()
    expected = forward.differentiate(surrogate, params, inputs=[x])
    network = forward.into_network()
    run = network.forward(network.parameters())

    backward = tc.Tape()
    record(backward, np.zeros((2, 3)))  # the same parameters, standing for forward's
    grads, saved = record_backward(forward, surrogate, [x], backward)
    assert saved and all(e.builder is backward for e in saved.values())
    assert not any(network.graph.nodes[i].op == "parameter" for i in saved)
    program = backward.into_network()
    feeds = {e: run.value(i) for i, e in saved.items()}  # the forward's values, fed
    again = program.forward(program.parameters(), feeds)
    for got, want in zip(grads, [*expected.gradients, *expected.input_gradients]):
        np.testing.assert_allclose(again.of(got), run.of(want), rtol=1e-13)


def test_the_backward_tape_must_hold_the_same_parameters():
    forward = tc.Tape()
    x, y, _ = record(forward, np.ones((2, 3)))
    with pytest.raises(TrainingError, match="parameters must match"):
        record_backward(forward, y.sum(), [x], tc.Tape())

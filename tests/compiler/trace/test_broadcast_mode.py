"""``Tape(broadcast=...)``: NumPy broadcasting by default; under ``"explicit"`` nothing
broadcasts by accident (the Topos guide's rule), only what ``broadcast_to`` spread."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ShapeError

X = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
B = np.array([0.5, -1.0, 2.0], np.float32)


def test_numpy_is_the_default():
    tape = tc.Tape()
    assert tape.broadcast == "numpy"
    total = tape.input(X) + tape.input(B)
    network = tape.into_network()
    np.testing.assert_array_equal(network.forward(network.parameters()).of(total), X + B)


def test_explicit_refuses_differing_shapes_and_says_what_to_do():
    tape = tc.Tape(broadcast="explicit")
    assert tape.broadcast == "explicit"
    x, b = tape.input(X), tape.input(B)
    column = tape.input(np.ones((4, 1), np.float32))
    with pytest.raises(ShapeError, match=r"add: shapes \[4, 3\] and \[3\] differ.*"
                                         r"broadcast_to\(\[4, 3\]\)"):
        x + b
    with pytest.raises(ShapeError, match=r"broadcast_to\(\[4, 3\]\)"):
        column * x
    with pytest.raises(ShapeError, match="differ"):
        x.__gt__(b)
    with pytest.raises(ShapeError, match="differ"):
        tc.maximum(x, b)
    with pytest.raises(ShapeError, match="differ"):
        tc.where(column, x, x)
    with pytest.raises(ShapeError, match="differ"):
        x * tape.leaf(np.float32(2.0))  # a recorded scalar tensor is a shape like any other
    with pytest.raises(ShapeError, match="differ"):
        tc.mse(column, tape.input(np.ones(4, np.float32)))


def test_explicit_accepts_broadcast_to_equal_shapes_and_literals():
    tape = tc.Tape(broadcast="explicit")
    x, b = tape.input(X), tape.input(B)
    rate = tape.input(np.float32(0.5))
    spread = x + b.broadcast_to((4, 3))
    like = x - b.broadcast_like(x)
    partial = x + b.broadcast_to((1, 3))  # one side came from broadcast_to
    scaled = x * 2.0 + 1  # Python numbers are weak literals
    stepped = x - x * rate.broadcast_like(x)  # the guide's learning-rate idiom
    with tape.broadcasting("numpy"):  # a block that opts into NumPy's rule
        implicit = x + b
    with pytest.raises(ShapeError, match="differ"):
        x + b  # the block ended: the tape's own mode is back
    network = tape.into_network()
    run = network.forward(network.parameters())
    np.testing.assert_array_equal(run.of(spread), X + B)
    np.testing.assert_array_equal(run.of(like), X - B)
    np.testing.assert_array_equal(run.of(partial), X + B)
    np.testing.assert_array_equal(run.of(scaled), X * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(run.of(stepped), X - X * np.float32(0.5))
    np.testing.assert_array_equal(run.of(implicit), X + B)


def record_model(tape):
    """An MLP, a layer norm, softmax and cross-entropy with its recorded gradients: every
    library broadcast (bias rows, kept reductions, gradient rules) in one program."""
    mlp = tc.nn.Mlp(tape, [3, 5, 4], activation="gelu", init=tc.init.xavier(3))
    norm = tc.nn.LayerNorm(tape, 4)
    logits = norm(mlp(tape.input(X, name="x")))
    labels = tape.input(np.array([0, 3, 1, 2]), name="labels")
    loss = tc.cross_entropy(logits, labels) + tc.softmax(logits).max() + \
        tc.logsumexp(logits, axis=1).mean() + tc.layer_norm(logits).sum()
    parameters = mlp.parameters() + norm.parameters()
    adjoints = tape.differentiate(loss, parameters)
    return tape.into_network(), loss, adjoints


def test_library_composites_layers_and_gradients_work_on_an_explicit_tape():
    results = []
    for mode in ("numpy", "explicit"):
        network, loss, adjoints = record_model(tc.Tape(broadcast=mode))
        run = network.forward(network.parameters())
        results.append((run.of(loss), run.recorded_gradients(adjoints).payloads(),
                        network.describe()))
    (loss_a, grads_a, text_a), (loss_b, grads_b, text_b) = results
    assert text_a == text_b  # the same graph, node for node
    np.testing.assert_array_equal(loss_a, loss_b)
    for a, b in zip(grads_a, grads_b):
        np.testing.assert_array_equal(a, b)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match=r"numpy.*explicit"):
        tc.Tape(broadcast="jax")
    mode = tc.Tape().broadcasting("torch")
    with pytest.raises(ValueError, match=r"numpy.*explicit"):
        mode.__enter__()

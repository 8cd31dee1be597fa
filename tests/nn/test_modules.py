"""Modules, initializers and named snapshots."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError, ShapeError


def test_mlp_paths_shapes_and_visit_order():
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [3, 4, 2], activation="relu", init=tc.init.xavier(11))
    named = mlp.named_parameters()
    assert [(p, s.shape) for p, s in named] == [("0.weights", (3, 4)), ("0.bias", (4,)),
                                                ("1.weights", (4, 2)), ("1.bias", (2,))]
    assert mlp.parameters() == [s for _, s in named]
    network = tape.into_network()
    assert '%0 = parameter "0.weights" : f32[3,4]' in network.describe()


def test_nested_module_names():
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [2, 2], name="encoder")
    assert [p for p, _ in mlp.named_parameters()] == ["0.weights", "0.bias"]
    assert tape._nodes[0].name == "encoder.0.weights"


@pytest.mark.parametrize("make", [
    lambda: tc.init.uniform(3, 2.0), lambda: tc.init.normal(5, 0.1), lambda: tc.init.xavier(7)])
def test_initializers_are_deterministic_per_seed(make):
    first, second = make(), make()
    a1, a2 = first((4, 3)), first((4, 3))
    b1 = second((4, 3))
    np.testing.assert_array_equal(a1, b1)
    assert not np.array_equal(a1, a2)  # successive draws differ
    assert a1.dtype == np.float32


def test_uniform_and_xavier_ranges():
    assert np.abs(tc.init.uniform(0, 0.5)((1000,))).max() <= 0.5
    limit = np.sqrt(6.0 / (10 + 20))
    assert np.abs(tc.init.xavier(0)((10, 20))).max() <= limit
    assert not tc.init.zeros()((3,)).any()


def test_linear_embedding_layernorm_compute_what_they_say():
    tape = tc.Tape()
    linear = tc.nn.Linear(tape, 3, 2, init=tc.init.uniform(1, 1.0))
    embedding = tc.nn.Embedding(tape, 5, 3, init=tc.init.normal(2, 1.0))
    norm = tc.nn.LayerNorm(tape, 3)
    indices = tape.input(np.array([4, 0, 4]))
    out = linear(norm(embedding(indices)))
    network = tape.into_network()
    table = network.parameters()
    got = network.forward(table, {indices: np.array([1, 2, 1])}).of(out)
    rows = table.of(embedding.weights)[[1, 2, 1]]
    normed = (rows - rows.mean(-1, keepdims=True)) / np.sqrt(rows.var(-1, keepdims=True) + 1e-5)
    expected = normed @ table.of(linear.weights) + table.of(linear.bias)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_module_input_shape_errors():
    tape = tc.Tape()
    linear = tc.nn.Linear(tape, 3, 2)
    with pytest.raises(ShapeError, match=r"Linear\(3, 2\): input last axis must be 3"):
        linear(tape.input(np.zeros((2, 4), np.float32)))
    with pytest.raises(ValueError, match="unknown activation"):
        tc.nn.Mlp(tape, [1, 1], activation="swish")


def _mlp():
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [3, 4, 2], activation="relu", init=tc.init.xavier(11))
    return tape.into_network(), mlp


def test_named_snapshot_round_trip():
    network, mlp = _mlp()
    parameters = network.parameters()
    snapshot = tc.checkpoint.named_snapshot(parameters, mlp)
    assert list(snapshot) == ["0.weights", "0.bias", "1.weights", "1.bias"]
    changed = {k: v + 1 for k, v in snapshot.items()}
    restored = tc.checkpoint.named_restore(parameters, mlp, changed)
    np.testing.assert_array_equal(restored.of(mlp.layers[0].weights), changed["0.weights"])
    assert tc.checkpoint.named_restore(parameters, mlp, snapshot).equals(parameters)


@pytest.mark.parametrize("edit, error, message", [
    (lambda s: s.pop("1.bias"), ArtifactError, r"missing paths \['1.bias'\]"),
    (lambda s: s.update({"2.weights": np.zeros(1)}), ArtifactError, "unexpected paths"),
    (lambda s: s.update({"0.bias": np.zeros(5, np.float32)}), ShapeError,
     r"'0.bias': expected shape \[4\], got \[5\]"),
    (lambda s: s.update({"0.bias": np.zeros(4, np.float64)}), tc.DTypeError, "float64"),
])
def test_named_restore_rejects_bad_snapshots_and_changes_nothing(edit, error, message):
    network, mlp = _mlp()
    parameters = network.parameters()
    before = parameters.clone()
    snapshot = tc.checkpoint.named_snapshot(parameters, mlp)
    edit(snapshot)
    with pytest.raises(error, match=message):
        tc.checkpoint.named_restore(parameters, mlp, snapshot)
    assert parameters.equals(before)


def test_unnamed_modules_get_paths_unique_within_their_tape(tmp_path):
    tape = tc.Tape()
    first = tc.nn.Linear(tape, 3, 4, init=tc.init.xavier(1))      # the root: bare paths
    second = tc.nn.Linear(tape, 4, 2, init=tc.init.xavier(2))
    mlp = tc.nn.Mlp(tape, [2, 2], init=tc.init.xavier(3))
    third = tc.nn.Linear(tape, 2, 1, init=tc.init.xavier(4))
    named = tc.nn.Linear(tape, 1, 1, name="linear4")
    after = tc.nn.Linear(tape, 1, 1)
    names = [node.name for node in tape.nodes() if node.op == "parameter"]
    assert names == ["weights", "bias", "linear1.weights", "linear1.bias",
                     "mlp1.0.weights", "mlp1.0.bias", "linear2.weights", "linear2.bias",
                     "linear4.weights", "linear4.bias", "linear3.weights", "linear3.bias"]
    assert len(set(names)) == len(names)
    # module-relative paths stay as PyTorch's named_parameters() gives them
    assert [p for p, _ in second.named_parameters()] == ["weights", "bias"]
    assert [p for p, _ in mlp.named_parameters()] == ["0.weights", "0.bias"]
    x = tape.input(np.ones((5, 3), np.float32), name="x")
    loss = third(mlp(second((first(x)).tanh()))).sum() + named(after(x.slice(0, 1, axis=1))).sum()
    adjoints = tape.differentiate(loss, tape.parameters())
    network = tape.into_network()
    parameters = network.parameters()
    adam = tc.optim.Adam()
    gradients = network.forward(parameters).recorded_gradients(adjoints)
    parameters = adam.step(parameters, gradients, 0.01)
    # a model built without names saves and loads
    tc.checkpoint.save(tmp_path / "ckpt", parameters, optimizer=adam, steps=1)
    restored_adam = tc.optim.Adam()
    restored = tc.checkpoint.load(tmp_path / "ckpt", network.parameters(),
                                  optimizer=restored_adam)
    assert restored.parameters.equals(parameters)
    assert restored_adam.state_dict()["state"].keys() == adam.state_dict()["state"].keys()


def test_the_first_unnamed_module_on_a_tape_keeps_root_paths():
    tape = tc.Tape()
    tape.input(np.zeros(3, np.float32), name="x")      # inputs do not name anything
    linear = tc.nn.Linear(tape, 3, 2)
    assert [node.name for node in tape.nodes() if node.op == "parameter"] == \
        ["weights", "bias"]
    assert linear.name is None

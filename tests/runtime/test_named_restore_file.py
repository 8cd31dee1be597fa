"""``named_restore_file``: a named restore read straight from a tensor file into the new
table, refused from the header alone (with ``named_restore``'s errors) before anything is
read, and leaving slots the module does not name as they were."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError, DTypeError, ShapeError
from tensorcode.files.tensorfile import TensorFile, save_tensors
from tensorcode.runtime.checkpoint import named_restore_file


def _model():
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [3, 4, 2], activation="relu", init=tc.init.xavier(11))
    other = tape.parameter(np.arange(5, dtype=np.float64))  # a slot the module does not name
    return tape.into_network(), mlp, other


def _changed(parameters, mlp):
    return {k: v + 1 for k, v in tc.checkpoint.named_snapshot(parameters, mlp).items()}


def test_a_file_restores_like_named_restore_and_keeps_other_slots(tmp_path):
    network, mlp, other = _model()
    parameters = network.parameters()
    snapshot = _changed(parameters, mlp)
    path = tmp_path / "w.safetensors"
    save_tensors(path, {"model." + k: v for k, v in snapshot.items()} |
                 {"unused": np.ones(7, np.float32)})
    entries = {k: "model." + k for k in snapshot}
    restored = named_restore_file(parameters, mlp, TensorFile(path), entries)
    assert restored.equals(tc.checkpoint.named_restore(parameters, mlp, snapshot))
    np.testing.assert_array_equal(restored.of(other), np.arange(5))
    assert restored.buffers()["float32"] is not parameters.buffers()["float32"]
    # every tensor under its own name is the default
    save_tensors(path, snapshot)
    assert named_restore_file(parameters, mlp, TensorFile(path)).equals(restored)


@pytest.mark.parametrize("edit, error, message", [
    (lambda s: s.pop("1.bias"), ArtifactError, r"missing paths \['1.bias'\]"),
    (lambda s: s.update({"2.weights": np.zeros(1)}), ArtifactError, "unexpected paths"),
    (lambda s: s.update({"0.bias": np.zeros(5, np.float32)}), ShapeError,
     r"'0.bias': expected shape \[4\], got \[5\]"),
    (lambda s: s.update({"0.bias": np.zeros(4, np.float64)}), DTypeError, "float64"),
])
def test_a_bad_file_is_refused_from_its_header_and_nothing_changes(tmp_path, edit, error,
                                                                   message):
    network, mlp, _ = _model()
    parameters = network.parameters()
    before = parameters.clone()
    snapshot = _changed(parameters, mlp)
    edit(snapshot)
    path = tmp_path / "w.safetensors"
    save_tensors(path, snapshot)
    with pytest.raises(error, match=message):
        named_restore_file(parameters, mlp, TensorFile(path))
    assert parameters.equals(before)


def test_entries_naming_a_missing_or_shared_tensor_are_refused(tmp_path):
    network, mlp, _ = _model()
    parameters = network.parameters()
    snapshot = _changed(parameters, mlp)
    path = tmp_path / "w.safetensors"
    save_tensors(path, snapshot)
    source = TensorFile(path)
    with pytest.raises(ArtifactError, match=r"no tensors \['nope'\]"):
        named_restore_file(parameters, mlp, source, {k: k for k in snapshot} | {"0.bias": "nope"})
    with pytest.raises(ArtifactError, match=r"\['1.bias'\] are named for more than one path"):
        named_restore_file(parameters, mlp, source, {k: k for k in snapshot} | {"0.bias": "1.bias"})


def test_a_file_cut_short_after_its_header_was_read_changes_nothing(tmp_path):
    network, mlp, _ = _model()
    parameters = network.parameters()
    before = parameters.clone()
    path = tmp_path / "w.safetensors"
    save_tensors(path, _changed(parameters, mlp))
    source = TensorFile(path)  # the header is valid ...
    os.truncate(path, path.stat().st_size - 4)  # ... and then the file changes underneath
    with pytest.raises(ArtifactError, match="ended early"):
        named_restore_file(parameters, mlp, source)
    assert parameters.equals(before)


def test_read_into_checks_every_target_before_reading(tmp_path):
    path = tmp_path / "t.safetensors"
    save_tensors(path, {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
                        "b": np.arange(4, dtype=np.int64)})
    source = TensorFile(path)
    a = np.full((2, 3), -1, np.float32)
    with pytest.raises(ValueError, match="writable C-order int64"):
        source.read_into({"a": a, "b": np.zeros(4, np.int32)})
    assert (a == -1).all()  # nothing was read
    with pytest.raises(ValueError, match="no tensor 'c'"):
        source.read_into({"c": a})
    b = np.zeros(4, np.int64)
    source.read_into({"b": b})  # one entry alone, the other skipped
    np.testing.assert_array_equal(b, np.arange(4))
    source.read_into({"a": a})
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))


def test_a_file_in_the_tables_order_maps_as_the_table_copy_on_write(tmp_path):
    network, mlp, other = _model()
    parameters = network.parameters()
    snapshot = _changed(parameters, mlp)
    path = tmp_path / "w.safetensors"
    save_tensors(path, snapshot)  # the float32 slots, back to back in the table's order
    on_disk = path.read_bytes()
    restored = named_restore_file(parameters, mlp, TensorFile(path), mapped=True)
    assert restored.equals(tc.checkpoint.named_restore(parameters, mlp, snapshot))
    assert not restored.buffers()["float32"].flags.owndata  # the file, not a copy
    assert restored.buffers()["float64"].flags.owndata  # (``other`` is not in the file)
    np.testing.assert_array_equal(restored.of(other), np.arange(5))
    views = restored.donate()  # a step plan may write it: a private copy of the page
    views["float32"][:] = 7
    assert path.read_bytes() == on_disk
    # another order cannot be the table: it is read into place instead
    save_tensors(path, dict(reversed(list(snapshot.items()))))
    again = named_restore_file(parameters, mlp, TensorFile(path), mapped=True)
    assert again.buffers()["float32"].flags.owndata
    assert again.equals(tc.checkpoint.named_restore(parameters, mlp, snapshot))

"""tensorfile: the one safetensors reader and writer."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tensorcode import files
from tensorcode.errors import ArtifactError


def test_save_and_load_round_trip_and_agree_with_safetensors(tmp_path):
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.array(3.5),
              "i": np.array([1, -2], dtype=np.int64)}
    path = tmp_path / "t.safetensors"
    files.save_tensors(path, arrays, {"k": "v"})
    loaded, metadata = files.load_tensors(path)
    assert metadata == {"k": "v"}
    for name, array in arrays.items():
        assert loaded[name].dtype == array.dtype and np.array_equal(loaded[name], array)
    assert set(load_file(str(path))) == set(arrays)
    save_file({"x": np.ones(3, dtype=np.float64)}, str(tmp_path / "theirs.safetensors"))
    theirs, metadata = files.load_tensors(tmp_path / "theirs.safetensors")
    assert np.array_equal(theirs["x"], np.ones(3)) and metadata == {}
    assert sorted(os.listdir(tmp_path)) == ["t.safetensors", "theirs.safetensors"]


def _with_header(tmp_path, header: bytes, data: bytes = b""):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


@pytest.mark.parametrize("header, words", [
    (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
     b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', "duplicate key"),
    (b'{"a": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 4]}}', "NaN"),
    (b'{"a": {"dtype": "X9", "shape": [1], "data_offsets": [0, 4]}}', "unknown dtype"),
    (b'[' * 100 + b']' * 100, "deeper"),
])
def test_bad_headers_are_refused_naming_the_file(tmp_path, header, words):
    path = _with_header(tmp_path, header, b"\x00" * 4)
    with pytest.raises(ArtifactError, match=words) as caught:
        files.load_tensors(path)
    assert caught.value.path == str(path)


def test_missing_and_truncated_files(tmp_path):
    with pytest.raises(ArtifactError, match="no such file"):
        files.load_tensors(tmp_path / "absent.safetensors")
    header = json.dumps({"a": {"dtype": "F64", "shape": [4], "data_offsets": [0, 32]}})
    path = _with_header(tmp_path, header.encode(), b"\x00" * 8)
    with pytest.raises(ArtifactError, match="data section"):
        files.load_tensors(path)


def test_a_failed_save_leaves_the_old_file(tmp_path):
    path = tmp_path / "t.safetensors"
    files.save_tensors(path, {"a": np.zeros(2)})
    before = path.read_bytes()
    with pytest.raises(TypeError):
        files.save_tensors(path, {"a": np.zeros(2, dtype=np.complex128)})
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["t.safetensors"]


GOOD_ENTRY = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}


@pytest.mark.parametrize("entry, field", [
    ({**GOOD_ENTRY, "dtype": ["F32"]}, "tensor a.dtype"),       # unhashable
    ({**GOOD_ENTRY, "dtype": {"F32": 1}}, "tensor a.dtype"),
    ({**GOOD_ENTRY, "dtype": 32}, "tensor a.dtype"),
    ({**GOOD_ENTRY, "dtype": None}, "tensor a.dtype"),
    ({**GOOD_ENTRY, "shape": "1"}, "tensor a.shape"),
    ({**GOOD_ENTRY, "shape": [1.0]}, "tensor a.shape"),
    ({**GOOD_ENTRY, "shape": [True]}, "tensor a.shape"),
    ({**GOOD_ENTRY, "shape": [-1, -4]}, "tensor a.shape"),
    ({**GOOD_ENTRY, "shape": [[1]]}, "tensor a.shape"),
    ({**GOOD_ENTRY, "data_offsets": [0.0, 4.0]}, "tensor a.data_offsets"),
    ({**GOOD_ENTRY, "data_offsets": [-4, 0]}, "tensor a.data_offsets"),
    ({**GOOD_ENTRY, "data_offsets": {"0": 4}}, "tensor a.data_offsets"),
    ({**GOOD_ENTRY, "data_offsets": [0, 4, 8]}, "tensor a.data_offsets"),
    ({**GOOD_ENTRY, "extra": 1}, "tensor a"),
    (["F32", [1], [0, 4]], "tensor a"),
])
def test_every_header_field_is_type_checked_before_use(tmp_path, entry, field):
    """One header rule for every reader: a field of the wrong JSON type is an
    ``ArtifactError`` naming the entry and field, never a ``TypeError``."""
    path = _with_header(tmp_path, json.dumps({"a": entry}).encode(), b"\x00" * 4)
    with pytest.raises(ArtifactError) as caught:
        files.TensorFile(path)
    assert caught.value.field == field


@pytest.mark.parametrize("metadata", [["x"], {"k": 1}, {"k": ["v"]}, "text"])
def test_metadata_must_map_strings_to_strings(tmp_path, metadata):
    header = json.dumps({"__metadata__": metadata, "a": GOOD_ENTRY}).encode()
    with pytest.raises(ArtifactError) as caught:
        files.TensorFile(_with_header(tmp_path, header, b"\x00" * 4))
    assert caught.value.field == "__metadata__"


def test_a_map_is_made_only_of_the_file_whose_header_was_read(tmp_path):
    """``map_run`` maps the file as its header was read: one rewritten since (same
    size, another modification time) or truncated is an ``ArtifactError``, never a map
    of other bytes or past the file's end."""
    path = tmp_path / "w.safetensors"
    files.save_tensors(path, {"a": np.arange(6, dtype=np.float32),
                              "b": np.ones(4, np.float32)})
    source = files.TensorFile(path)
    mapped = source.map_run(["a", "b"])
    assert mapped is not None and mapped.tolist() == [0, 1, 2, 3, 4, 5, 1, 1, 1, 1]
    os.utime(path, ns=(0, 0))
    with pytest.raises(ArtifactError, match="changed since its header was read"):
        source.map_run(["a", "b"])
    again = files.TensorFile(path)
    os.truncate(path, path.stat().st_size - 8)
    with pytest.raises(ArtifactError, match="changed since its header was read") as caught:
        again.map_run(["a", "b"])
    assert caught.value.field == "data"

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

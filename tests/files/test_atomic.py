"""Atomic writes and bounded JSON reads."""

from __future__ import annotations

import os

import pytest

from tensorcode import files
from tensorcode.errors import ArtifactError


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")

    def explode(handle):
        handle.write(b"half")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        files.atomic_write(path, explode)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.json"]


def test_json_round_trip_is_strict(tmp_path):
    path = files.atomic_write_json(tmp_path / "d.json", {"a": [1, 2.5]})
    assert files.read_json(path) == {"a": [1, 2.5]}
    with pytest.raises(ValueError):
        files.atomic_write_json(tmp_path / "n.json", {"a": float("nan")})
    (tmp_path / "bad.json").write_text('{"a": NaN}')
    with pytest.raises(ArtifactError, match="NaN is not a JSON number"):
        files.read_json(tmp_path / "bad.json")


def test_read_json_refuses_large_binary_and_missing_files(tmp_path):
    (tmp_path / "big.json").write_text("[" + "0," * 100 + "0]")
    with pytest.raises(ArtifactError, match="more than the 50 allowed"):
        files.read_json(tmp_path / "big.json", limit=50)
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe")
    with pytest.raises(ArtifactError, match="not UTF-8"):
        files.read_json(tmp_path / "bin.json")
    with pytest.raises(ArtifactError, match="cannot read"):
        files.read_json(tmp_path / "missing.json")

"""Saved episodic indexes: the data section's SHA-256 travels in the header, so a
flipped byte in the vectors (or the ids) is refused instead of loaded."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from tensorcode.errors import ArtifactError
from tensorcode.tools.episodic import EpisodicIndex


@pytest.fixture()
def saved(tmp_path):
    vectors = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    index = EpisodicIndex.from_vectors([f"doc {k}" for k in range(5)], vectors)
    return index, index.save(tmp_path / "index.safetensors")


def _data_start(raw: bytes) -> int:
    return 8 + struct.unpack("<Q", raw[:8])[0]


def test_a_saved_index_round_trips_with_its_checksum(saved):
    index, path = saved
    loaded = EpisodicIndex.load(path)
    assert loaded.ids == index.ids
    np.testing.assert_array_equal(loaded.vectors, index.vectors)
    raw = path.read_bytes()
    header = json.loads(json.loads(raw[8:_data_start(raw)])["__metadata__"]["index"])
    assert len(header["sha256"]) == 64 and header["version"] == 2


@pytest.mark.parametrize("where", [0, 9, 79, -1])  # vectors (first, middle, last); ids
def test_a_flipped_byte_in_the_data_is_refused(saved, where, tmp_path):
    _, path = saved
    raw = bytearray(path.read_bytes())
    start = _data_start(raw)
    raw[start + where if where >= 0 else where] ^= 0x01
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match=r"index\.sha256.*changed or damaged"):
        EpisodicIndex.load(damaged)


def test_an_index_without_a_checksum_is_refused_with_what_to_do(saved, tmp_path):
    _, path = saved
    raw = path.read_bytes()
    document = json.loads(raw[8:_data_start(raw)])
    header = json.loads(document["__metadata__"]["index"])
    header["version"] = 1
    del header["sha256"]
    document["__metadata__"]["index"] = json.dumps(header)
    text = json.dumps(document).encode()
    text += b" " * (-(8 + len(text)) % 8)
    old = tmp_path / "old.safetensors"
    old.write_bytes(struct.pack("<Q", len(text)) + text + raw[_data_start(raw):])
    with pytest.raises(ArtifactError, match="carries no checksum; rebuild the index"):
        EpisodicIndex.load(old)

"""Odd shapes, retyped step counts and oversized manifests end in ``ArtifactError``
naming the field, never in a raw NumPy error or a silently wrong number."""

from __future__ import annotations

import hashlib
import json
import pathlib
import struct

import numpy as np
import pytest

import tensorcode as tc
from tensorcode import optim, trace
from tensorcode.errors import ArtifactError
from tensorcode.files import TensorFile
from tensorcode.operations import LinearOperation
from tensorcode.runtime.experience_codecs import validate
from tensorcode.training import Trainer

SHAPES = [[0, 2 ** 63], [2 ** 40, 2 ** 40], [1] * 70, [0, 2 ** 62, 2 ** 62]]


def _tensor_file(path: pathlib.Path, shape, dtype="F32", nbytes=0) -> pathlib.Path:
    header = json.dumps({"a": {"dtype": dtype, "shape": shape,
                               "data_offsets": [0, nbytes]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * nbytes)
    return path


@pytest.mark.parametrize("shape", SHAPES, ids=["2**63", "wraps-to-0", "70-dims", "2**62x2"])
def test_tensor_file_shapes(tmp_path, shape):
    with pytest.raises(ArtifactError, match=r"tensor a\.shape"):
        TensorFile(_tensor_file(tmp_path / "t.safetensors", shape)).read({})


@pytest.mark.parametrize("shape", SHAPES, ids=["2**63", "wraps-to-0", "70-dims", "2**62x2"])
def test_experience_array_shapes(shape):
    node = {"t": "array", "dtype": "float32", "shape": shape, "v": []}
    with pytest.raises(ArtifactError, match="array shape"):
        validate(node, {}, None, "value")


def test_a_plan_with_seventy_dimensions_is_refused(tmp_path):
    tape = tc.Tape()
    x = tape.input(np.ones((1, 2), np.float32), name="x")
    y = x * 2.0
    network = tape.into_network()
    network.entry([y]).lower("reference").save(tmp_path / "plan")
    path = tmp_path / "plan" / "plan.json"
    document = json.loads(path.read_text())
    document["graph"]["nodes"][0]["shape"] = [1] * 70
    path.write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match=r"nodes\[0\]\.shape"):
        tc.Plan.load(tmp_path / "plan")


@pytest.fixture
def checkpoint(tmp_path):
    layer = LinearOperation(2, 1, seed=0, backend="reference")
    session = trace()
    out = session.run(lambda: layer(np.ones(2, np.float32)))
    session.supervise(out, np.zeros(1, np.float32), loss="mse", source="test")
    trainer = Trainer.from_ops({"layer": layer}, lr=0.1, backend="reference",
                               optimizer=lambda p: optim.Adam())
    trainer.step(session)
    trainer.save_checkpoint(tmp_path / "ckpt")
    return trainer, tmp_path / "ckpt"


def test_a_step_tensor_retyped_to_int32_is_refused(checkpoint):
    trainer, directory = checkpoint
    manifest_path = directory / "training.json"
    manifest = json.loads(manifest_path.read_text())
    tensors = directory / manifest["tensors"]["file"]
    raw = bytearray(tensors.read_bytes())
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    key = next(k for k in header if k.endswith("/step"))
    header[key]["dtype"] = "I32"  # same bytes, reread as an integer count
    text = json.dumps(header, separators=(",", ":")).encode().ljust(length)
    assert len(text) == length
    raw[8:8 + length] = text
    tensors.write_bytes(bytes(raw))
    manifest["tensors"]["sha256"] = hashlib.sha256(bytes(raw)).hexdigest()  # recomputed
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="dtype int32, expected float32") as caught:
        trainer.load_checkpoint(directory)
    assert caught.value.field == key


def test_an_oversized_training_json_is_refused_before_reading(checkpoint):
    trainer, directory = checkpoint
    manifest_path = directory / "training.json"
    text = manifest_path.read_text()
    manifest_path.write_text(text + " " * (17 * 1024 * 1024))
    with pytest.raises(ArtifactError, match=r"more than the .* allowed"):
        trainer.load_checkpoint(directory)

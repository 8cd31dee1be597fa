"""Trainer rules: a nonfinite update changes nothing; checkpoints are read once; the
single-file form works through the trainer; device generator states are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensorcode import optim, trace
from tensorcode.errors import ArtifactError, TrainingError
from tensorcode.files import TensorFile
from tensorcode.operations import LinearOperation
from tensorcode.training import Trainer

REF = "reference"


def make(seed=0, optimizer=None):
    layer = LinearOperation(3, 2, seed=seed, backend=REF)
    x = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]], np.float32)
    target = np.array([[1.0, 0.0], [0.0, -1.0]], np.float32)
    session = trace()
    out = session.run(lambda: layer(x))
    session.supervise(out, target, loss="mse", source="test")
    trainer = Trainer.from_ops({"layer": layer}, lr=0.1, backend=REF,
                               optimizer=optimizer, seed=seed)
    return trainer, session


def _state(trainer):
    state = trainer.optimizer.state_dict()
    return (trainer.steps, [p.copy() for p in trainer.parameters.payloads()],
            {k: {n: np.array(v, copy=True) for n, v in e.items()}
             for k, e in state["state"].items()}, state["param_groups"])


def _same(a, b):
    return a[0] == b[0] and a[3] == b[3] and all(
        np.array_equal(x, y) for x, y in zip(a[1], b[1])) and a[2].keys() == b[2].keys() \
        and all(np.array_equal(a[2][k][n], b[2][k][n]) for k in a[2] for n in a[2][k])


@pytest.mark.parametrize("optimizer", [None, lambda p: optim.Adam()], ids=["sgd", "adam"])
def test_an_update_that_leaves_nonfinite_values_changes_nothing(optimizer):
    trainer, session = make(optimizer=optimizer)
    trainer.step(session)
    before = _state(trainer)
    trainer.lr = 1e39  # finite as a Python float, infinite once cast to float32
    with pytest.raises(TrainingError, match=r"update leaves .*\(nonfinite\)"):
        trainer.step(session)
    assert _same(_state(trainer), before)
    trainer.lr = 0.1
    trainer.step(session)
    assert trainer.steps == before[0] + 1


def test_load_checkpoint_reads_and_hashes_once(tmp_path, monkeypatch):
    trainer, session = make()
    trainer.step(session)
    trainer.save_checkpoint(tmp_path / "ckpt", progress={"n": 1})
    reads = []
    original = TensorFile.read

    def counting(self, *args, **kwargs):
        reads.append(self.path)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TensorFile, "read", counting)
    target, _ = make(seed=3)
    assert target.load_checkpoint(tmp_path / "ckpt") == {"n": 1}
    assert len(reads) == 1
    assert all(np.array_equal(a, b) for a, b in zip(target.parameters.payloads(),
                                                      trainer.parameters.payloads()))


def test_bad_modes_still_change_nothing(tmp_path):
    trainer, session = make()
    trainer.step(session)
    trainer.save_checkpoint(tmp_path / "ckpt")
    manifest = tmp_path / "ckpt" / "training.json"
    document = json.loads(manifest.read_text())
    document["modes"] = {"other": True}
    manifest.write_text(json.dumps(document))
    target, other = make(seed=3)
    target.step(other)
    before, state = _state(target), target.generator.get_state()
    with pytest.raises(ArtifactError, match="modes"):
        target.load_checkpoint(tmp_path / "ckpt")
    assert _same(_state(target), before) and target.generator.get_state() == state


def test_a_standalone_checkpoint_file_round_trips(tmp_path):
    trainer, session = make(optimizer=lambda p: optim.Adam())
    trainer.step(session)
    path = trainer.save_checkpoint(tmp_path / "run.safetensors", progress={"epoch": 1})
    assert (tmp_path / "run.safetensors").is_file() and path == tmp_path / "run.safetensors"
    target, _ = make(seed=4, optimizer=lambda p: optim.Adam())
    assert target.load_checkpoint(tmp_path / "run.safetensors") == {"epoch": 1}
    assert _same(_state(target), _state(trainer))
    assert target.generator.get_state() == trainer.generator.get_state()
    # the same validation and rollback: a damaged file changes nothing
    raw = bytearray((tmp_path / "run.safetensors").read_bytes())
    raw[-1] ^= 0xFF
    (tmp_path / "bad.safetensors").write_bytes(bytes(raw))
    fresh, _ = make(seed=5, optimizer=lambda p: optim.Adam())
    before = _state(fresh)
    with pytest.raises(ArtifactError, match="checksum"):
        fresh.load_checkpoint(tmp_path / "bad.safetensors")
    assert _same(_state(fresh), before)


@pytest.mark.parametrize("generator", [
    {"device": "cuda:0", "state": "00ff"},
    {"cpu": {"algorithm": "PCG64"}, "cuda": [{"seed": 1}]},
    {"cuda_states": []},
])
def test_a_generator_state_from_another_device_is_refused_as_such(tmp_path, generator):
    trainer, session = make()
    trainer.save_checkpoint(tmp_path / "ckpt")
    manifest = tmp_path / "ckpt" / "training.json"
    document = json.loads(manifest.read_text())
    document["generator"] = generator
    manifest.write_text(json.dumps(document))
    target, _ = make(seed=2)
    before = target.generator.get_state()
    with pytest.raises(ArtifactError, match=r"generator state for device .*CUDA") as caught:
        target.load_checkpoint(tmp_path / "ckpt")
    assert caught.value.field == "generator" and "exactly the keys" not in str(caught.value)
    assert target.generator.get_state() == before

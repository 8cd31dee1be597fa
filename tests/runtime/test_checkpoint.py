"""Directory and single-file checkpoints: round trips, resume exactness in a fresh
process, crash safety under SIGKILL, and every kind of bad file rejected with nothing
changed."""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import tensorcode as tc
from tensorcode import files
from tensorcode.compiler.plans.tables import Gradients
from tensorcode.files import tensorfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def trained(steps=3, optimizer=None, names=True):
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [2, 5, 1], "tanh", tc.init.xavier(3))
    if not names:
        tape.parameter(np.ones((2,), np.float64))
    x = tape.input(np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2), name="x")
    loss = (mlp(x) * mlp(x)).sum()
    adjoints = tape.differentiate(loss, mlp.parameters())
    network = tape.into_network()
    optimizer = optimizer or tc.optim.Adam(amsgrad=True)
    parameters = network.parameters()
    for _ in range(steps):
        parameters = optimizer.step(parameters, network.forward(parameters)
                                    .recorded_gradients(adjoints), 0.05)
    return network, parameters, optimizer


def optimizer_snapshot(optimizer):
    state = optimizer.state_dict()
    return repr(state["param_groups"]), {k: {n: v.copy() for n, v in e.items()}
                                         for k, e in state["state"].items()}


def same_snapshot(a, b):
    return a[0] == b[0] and a[1].keys() == b[1].keys() and all(
        np.array_equal(a[1][k][n], b[1][k][n]) for k in a[1] for n in a[1][k])


@pytest.mark.parametrize("single_file", [False, True], ids=["directory", "single-file"])
def test_round_trip_restores_everything(tmp_path, single_file):
    network, parameters, optimizer = trained()
    generator = tc.random.Generator(11)
    generator.normal(0, 1, (5,))
    target = tmp_path / ("one.safetensors" if single_file else "ckpt")
    writer = tc.checkpoint.save_file if single_file else tc.checkpoint.save
    writer(target, parameters, optimizer, steps=3, progress={"epoch": 2, "cursor": [1, 2]},
           generator=generator, modes={"encoder": "eval", "head": "train"})
    fresh_optimizer, fresh_generator = tc.optim.Adam(), tc.random.Generator(0)
    restored = tc.checkpoint.load(target, network.parameters(), fresh_optimizer,
                                  fresh_generator)
    assert restored.parameters.equals(parameters)
    assert restored.steps == 3
    assert restored.progress == {"epoch": 2, "cursor": [1, 2]}
    assert restored.modes == {"encoder": "eval", "head": "train"}
    assert restored.optimizer_type == "Adam" and restored.generator_restored
    assert same_snapshot(optimizer_snapshot(fresh_optimizer), optimizer_snapshot(optimizer))
    assert fresh_optimizer.amsgrad
    np.testing.assert_array_equal(fresh_generator.uniform(0, 1, (4,)),
                                  generator.uniform(0, 1, (4,)))


def test_directory_layout_and_foreign_readers(tmp_path):
    network, parameters, optimizer = trained()
    manifest_path = tc.checkpoint.save(tmp_path, parameters, optimizer, steps=3)
    manifest = json.loads(manifest_path.read_text())
    assert manifest["format"] == "tensorcode.checkpoint" and manifest["version"] == 1
    assert manifest["optimizer"]["type"] == "Adam"
    assert manifest["optimizer"]["param_groups"][0]["betas"] == [0.9, 0.999]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [manifest["tensors"]["file"], "training.json"]
    # the tensor file is plain safetensors under structured names
    tensors = load_file(str(tmp_path / manifest["tensors"]["file"]))
    assert "parameters/0.weights" in tensors and "optimizer/0/exp_avg" in tensors
    assert tensors["optimizer/0/step"].shape == ()
    for key, payload in zip(tc.checkpoint.parameter_keys(parameters.layout),
                            parameters.payloads()):
        np.testing.assert_array_equal(tensors[key], payload)
    # saving again replaces the tensor file and leaves no other behind
    tc.checkpoint.save(tmp_path, parameters, optimizer, steps=4)
    assert len(list(tmp_path.glob("tensors-*.safetensors"))) == 1
    assert not list(tmp_path.glob(".*"))


def test_unnamed_parameters_use_their_slot_index(tmp_path):
    network, parameters, _ = trained(names=False)
    keys = tc.checkpoint.parameter_keys(parameters.layout)
    assert keys[-1] == f"parameters/%{len(keys) - 1}"
    tc.checkpoint.save(tmp_path, parameters)
    assert tc.checkpoint.load(tmp_path, network.parameters()).parameters.equals(parameters)


def test_tensor_file_reader_agrees_with_safetensors(tmp_path):
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array(3.5),
              "c": np.array([True, False]), "d": np.zeros((0, 4), np.int64)}
    save_file(arrays, str(tmp_path / "theirs.safetensors"), metadata={"k": "v"})
    ours, metadata, _, _ = tensorfile.read_tensors(tmp_path / "theirs.safetensors")
    assert metadata == {"k": "v"} and sorted(ours) == sorted(arrays)
    for name in arrays:
        assert ours[name].dtype == arrays[name].dtype
        np.testing.assert_array_equal(ours[name], arrays[name])
    files.atomic_write(tmp_path / "ours.safetensors",
                            lambda f: tensorfile.write_tensors(f, arrays, {"k": "v"}))
    theirs = load_file(str(tmp_path / "ours.safetensors"))
    for name in arrays:
        assert theirs[name].shape == arrays[name].shape
        np.testing.assert_array_equal(theirs[name], arrays[name])


def test_optimizer_that_never_stepped_and_sgd_without_state(tmp_path):
    network, parameters, _ = trained(steps=0)
    tc.checkpoint.save(tmp_path, parameters, tc.optim.Sgd(momentum=0.9), steps=0)
    sgd = tc.optim.Sgd(momentum=0.9)
    tc.checkpoint.load(tmp_path, network.parameters(), sgd)
    assert sgd.state_dict()["state"] == {} and sgd.layout is parameters.layout


class Doubling(tc.optim.Optimizer):
    """A custom optimizer whose state is a running sum of gradients."""

    kind = "Doubling"
    state_keys = ("total",)

    def update(self, parameters, gradients, lr):
        totals = [t + g for t, g in zip(self.state_table("total").payloads(),
                                        gradients.payloads())]
        self.set_state("total", totals)
        self.present[:] = 1
        return parameters.step(gradients, lambda p, g: p - lr * g)


def test_custom_optimizer_checkpoints_like_a_built_in(tmp_path):
    network, parameters, optimizer = trained(optimizer=Doubling())
    tc.checkpoint.save(tmp_path, parameters, optimizer, steps=3)
    again = Doubling()
    restored = tc.checkpoint.load(tmp_path, network.parameters(), again)
    assert restored.optimizer_type == "Doubling"
    assert again.state_table("total").equals(optimizer.state_table("total"))
    with pytest.raises(tc.ArtifactError, match="rebuild the same optimizer type"):
        tc.checkpoint.load(tmp_path, network.parameters(), tc.optim.Adam())


def test_resume_in_a_fresh_process_is_bit_identical():
    """The example trains N steps, is killed with SIGKILL, resumes from its checkpoint
    in a fresh process and compares against the uninterrupted run (parameters, optimizer
    state and the generator's next draws)."""
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "resume.py"),
                             "--steps", "40"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parameters bit-identical: True" in result.stdout
    assert "generator draws the same next numbers: True" in result.stdout


# -- crash safety ---------------------------------------------------------------------------
def _writer(directory: pathlib.Path, parameters, start: int) -> None:
    """Save forever: checkpoint ``k`` holds parameters all equal to ``k``."""
    optimizer = tc.optim.Sgd(momentum=0.9)
    optimizer.bind(parameters.layout)
    k = start
    while True:
        k += 1
        table = parameters.step(Gradients.from_payloads(
            parameters.layout, [np.zeros(p.shape, p.dtype) for p in parameters.payloads()]),
            lambda p, g, k=k: np.full(p.shape, k, p.dtype))
        tc.checkpoint.save(directory, table, optimizer, steps=k, progress={"k": k})


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_during_saves_never_leaves_an_unloadable_checkpoint(tmp_path):
    tape = tc.Tape()
    tape.parameter(np.zeros((256, 256), np.float64), name="big")  # 512 KiB per save
    tape.parameter(np.zeros((7,), np.float32), name="small")
    network = tape.into_network()
    parameters = network.parameters()
    # Kill at random points within a few save times (measured here, so a loaded machine
    # still lets some saves finish); every tenth child lives long enough to finish one.
    started = time.monotonic()
    tc.checkpoint.save(tmp_path, parameters, steps=0, progress={"k": 0})
    pause = max(0.03, 3 * (time.monotonic() - started))
    rng = random.Random(0)
    last = 0
    kills = 0
    deadline = time.monotonic() + 120
    while kills < 60 and time.monotonic() < deadline:
        pid = os.fork()
        if pid == 0:  # the child saves until it is killed
            try:
                _writer(tmp_path, parameters, last)
            finally:
                os._exit(1)
        time.sleep(4 * pause if kills % 10 == 9 else rng.uniform(0.0, pause))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        kills += 1
        restored = tc.checkpoint.load(tmp_path, network.parameters())  # never raises
        k = restored.steps
        assert restored.progress == {"k": k}
        for payload in restored.parameters.payloads():
            assert np.all(payload == k), "a checkpoint mixed two saves"
        assert k >= last
        last = k
    assert kills >= 50
    assert last > 0  # some saves did complete between kills
    tc.checkpoint.save(tmp_path, parameters, steps=last + 1, progress={"k": last + 1})
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == [], "the next save removes the temporaries of killed writers"


# -- bad files ------------------------------------------------------------------------------
@pytest.fixture()
def saved(tmp_path):
    network, parameters, optimizer = trained()
    generator = tc.random.Generator(5)
    manifest_path = tc.checkpoint.save(tmp_path, parameters, optimizer, steps=3,
                                       progress={"epoch": 1}, generator=generator)
    manifest = json.loads(manifest_path.read_text())
    return network, tmp_path, manifest_path, manifest


def rewrite_tensors(directory, manifest, change):
    """Rewrite the tensor file through ``change(dict)`` and fix the recorded checksum so
    the later checks, not the checksum, must catch the change."""
    path = directory / manifest["tensors"]["file"]
    tensors = {k: np.array(v) for k, v in load_file(str(path)).items()}
    change(tensors)
    digest = files.atomic_write(path, lambda f: tensorfile.write_tensors(f, tensors))
    manifest["tensors"]["sha256"] = digest
    (directory / "training.json").write_text(json.dumps(manifest))


def truncate(d, m):
    path = d / m["tensors"]["file"]
    path.write_bytes(path.read_bytes()[:-100])


def flip_byte(d, m):
    path = d / m["tensors"]["file"]
    data = bytearray(path.read_bytes())
    data[-17] ^= 0x40
    path.write_bytes(bytes(data))


def wrong_checksum(d, m):
    m["tensors"]["sha256"] = "0" * 64
    (d / "training.json").write_text(json.dumps(m))


def renamed_tensor(d, m):
    rewrite_tensors(d, m, lambda t: t.__setitem__("parameters/0.weightz",
                                                  t.pop("parameters/0.weights")))


def renamed_optimizer_tensor(d, m):
    rewrite_tensors(d, m, lambda t: t.__setitem__("optimizer/0/exp_avgg",
                                                  t.pop("optimizer/0/exp_avg")))


def wrong_shape(d, m):
    rewrite_tensors(d, m, lambda t: t.__setitem__("parameters/0.bias", np.zeros((3,),
                                                                              np.float32)))


def wrong_dtype(d, m):
    rewrite_tensors(d, m, lambda t: t.__setitem__(
        "parameters/0.bias", t["parameters/0.bias"].astype(np.float64)))


def wrong_optimizer_shape(d, m):
    rewrite_tensors(d, m, lambda t: t.__setitem__("optimizer/1/exp_avg_sq", np.zeros(2)))


def extra_field(d, m):
    m["comment"] = "hello"
    (d / "training.json").write_text(json.dumps(m))


def missing_field(d, m):
    del m["generator"]
    (d / "training.json").write_text(json.dumps(m))


def wrong_format(d, m):
    m["format"] = "something.else"
    (d / "training.json").write_text(json.dumps(m))


def future_version(d, m):
    m["version"] = 2
    (d / "training.json").write_text(json.dumps(m))


def bad_generator(d, m):
    m["generator"]["state"] = -1
    (d / "training.json").write_text(json.dumps(m))


def bad_hyperparameter(d, m):
    m["optimizer"]["param_groups"][0]["eps"] = -1.0
    (d / "training.json").write_text(json.dumps(m))


def escaping_file_name(d, m):
    m["tensors"]["file"] = "../tensors-x.safetensors"
    (d / "training.json").write_text(json.dumps(m))


def missing_tensor_file(d, m):
    (d / m["tensors"]["file"]).unlink()


def json_garbage(d, m):
    (d / "training.json").write_text("{\"format\": ")


def nan_in_json(d, m):
    (d / "training.json").write_text(json.dumps(m).replace('"steps": 3', '"steps": NaN'))


BAD = [(truncate, "sha256|data|header"), (flip_byte, "sha256"), (wrong_checksum, "sha256"),
       (renamed_tensor, "parameters/0.weights"), (renamed_optimizer_tensor, "optimizer/0/"),
       (wrong_shape, "parameters/0.bias"), (wrong_dtype, "parameters/0.bias"),
       (wrong_optimizer_shape, "optimizer"), (extra_field, "comment"),
       (missing_field, "generator"), (wrong_format, "format"), (future_version, "version"),
       (bad_generator, "generator.state"), (bad_hyperparameter, "optimizer"),
       (escaping_file_name, "tensors.file"), (missing_tensor_file, "safetensors"),
       (json_garbage, "training.json"), (nan_in_json, "training.json")]


@pytest.mark.parametrize("damage,named", BAD, ids=[f.__name__ for f, _ in BAD])
def test_bad_checkpoint_raises_artifact_error_and_changes_nothing(saved, damage, named):
    network, directory, _, manifest = saved
    damage(directory, manifest)
    _, _, optimizer = trained(steps=1)
    optimizer_before = optimizer_snapshot(optimizer)
    generator = tc.random.Generator(99)
    generator_before = generator.get_state()
    with pytest.raises(tc.ArtifactError) as caught:
        tc.checkpoint.load(directory, network.parameters(), optimizer, generator)
    message = str(caught.value)
    assert caught.value.path is not None
    assert any(part in message for part in named.split("|")), message
    assert same_snapshot(optimizer_snapshot(optimizer), optimizer_before)
    assert generator.get_state() == generator_before


def test_bad_single_files(tmp_path):
    network, parameters, optimizer = trained()
    path = tc.checkpoint.save_file(tmp_path / "c.safetensors", parameters, optimizer, steps=3)
    data = bytearray(path.read_bytes())
    data[-5] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(tc.ArtifactError, match="checksum"):
        tc.checkpoint.load(path, network.parameters())
    save_file({"x": np.zeros(2)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(tc.ArtifactError, match="not a TensorCode checkpoint"):
        tc.checkpoint.load(tmp_path / "plain.safetensors", network.parameters())
    (tmp_path / "short.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(tc.ArtifactError, match="truncated"):
        tc.checkpoint.load(tmp_path / "short.safetensors", network.parameters())
    with pytest.raises(tc.ArtifactError, match="no checkpoint here"):
        tc.checkpoint.load(tmp_path / "absent", network.parameters())


def test_mismatched_program_and_missing_parts(saved, tmp_path):
    network, directory, _, _ = saved
    other_tape = tc.Tape()
    tc.nn.Mlp(other_tape, [2, 6, 1], "tanh", tc.init.xavier(3))
    other = other_tape.into_network()
    with pytest.raises(tc.ArtifactError, match="shape"):
        tc.checkpoint.load(directory, other.parameters())
    with pytest.raises(tc.ArtifactError, match="rebuild the same optimizer type"):
        tc.checkpoint.load(directory, network.parameters(), tc.optim.Sgd())
    bare = tmp_path / "bare"
    tc.checkpoint.save(bare, network.parameters())
    with pytest.raises(tc.ArtifactError, match="no optimizer state"):
        tc.checkpoint.load(bare, network.parameters(), tc.optim.Adam())
    with pytest.raises(tc.ArtifactError, match="no generator state"):
        tc.checkpoint.load(bare, network.parameters(), generator=tc.random.Generator(1))


def test_bad_save_arguments_write_nothing(tmp_path):
    network, parameters, optimizer = trained()
    target = tmp_path / "never"
    with pytest.raises(tc.TensorCodeError, match="JSON"):
        tc.checkpoint.save(target, parameters, progress={"f": object()})
    with pytest.raises(tc.TensorCodeError, match="JSON"):
        tc.checkpoint.save(target, parameters, progress={"x": float("nan")})
    with pytest.raises(ValueError, match="steps"):
        tc.checkpoint.save(target, parameters, steps=-1)
    assert not target.exists()


@pytest.mark.parametrize("single_file", [False, True], ids=["directory", "single-file"])
def test_large_tensors_hash_while_streaming(tmp_path, single_file):
    """Above a few MiB the checksum runs beside the reads and writes; it must still see
    every byte."""
    tape = tc.Tape()
    tape.parameter(np.random.default_rng(0).standard_normal(1_500_000), name="big")
    network = tape.into_network()
    parameters = network.parameters()
    target = tmp_path / ("c.safetensors" if single_file else "c")
    (tc.checkpoint.save_file if single_file else tc.checkpoint.save)(target, parameters)
    assert tc.checkpoint.load(target, network.parameters()).parameters.equals(parameters)
    path = target if single_file else next(target.glob("tensors-*.safetensors"))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(tc.ArtifactError, match="checksum mismatch"):
        tc.checkpoint.load(target, network.parameters())

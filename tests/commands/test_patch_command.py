"""``tensorcode patch`` on real safetensors files: render, edit, diff, apply, show."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from tensorcode.commands import patch as patch_command
from tensorcode.errors import TensorCodeError
from tensorcode.weights import Patch, render, tensor_sha256


def run(*argv: str) -> int:
    """The subcommand exactly as ``tensorcode patch`` wires it, errors included."""
    parser = argparse.ArgumentParser(prog="tensorcode patch")
    patch_command.configure(parser)
    args = parser.parse_args([str(a) for a in argv])
    try:
        return patch_command.main(args)
    except TensorCodeError as error:
        print(f"tensorcode patch: {error}")
        return 1


@pytest.fixture
def checkpoint(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {"layer.weight": rng.normal(size=(3, 5)).astype(np.float32),
               "layer.bias": rng.normal(size=5).astype(np.float32),
               "steps": np.array([3], dtype=np.int64)}
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path), metadata={"origin": "test"})
    return path, tensors


def test_render_edit_apply_round_trip(tmp_path, checkpoint, capsys):
    path, tensors = checkpoint
    rounded, scales = tmp_path / "shown.safetensors", tmp_path / "scales.json"
    assert run("render", path, "--rounded", rounded, "--scales", scales) == 0
    text = capsys.readouterr().out
    expected = render(dict(sorted(tensors.items())), digits=3)  # safetensors sorts names
    assert text == expected.text
    shown = load_file(str(rounded))
    for name in tensors:
        assert tensor_sha256(shown[name]) == tensor_sha256(expected.rounded[name])
    assert json.loads(scales.read_text())["scales"] == expected.scales

    edits = tmp_path / "reply.txt"
    edits.write_text("layer.weight[0, 1] = 250\nlayer.bias[:] += 1\nsteps[0] = 4\n")
    patch_path = tmp_path / "fix.patch.json"
    assert run("edit", rounded, edits, "--scales", scales, "-o", patch_path,
               "--rationale", "test fix", "--author", "reviewer",
               "--evidence", '{"source": "eval:3"}') == 0
    patch = Patch.load(patch_path)
    assert patch.rationale == "test fix" and patch.evidence == [{"source": "eval:3"}]

    out = tmp_path / "patched.safetensors"
    assert run("apply", rounded, patch_path, "-o", out) == 0
    report = capsys.readouterr().out
    assert "fraction of" in report and "wrote" in report
    patched = load_file(str(out))
    assert patched["layer.weight"][0, 1] == np.float32(2.5)
    np.testing.assert_array_equal(patched["layer.bias"],
                                  (shown["layer.bias"].astype(np.float64) + 0.01)
                                  .astype(np.float32))
    assert patched["steps"].tolist() == [4]
    with safe_open(str(out), framework="np") as handle:
        assert handle.metadata() == {"origin": "test", "tensorcode.rendered_digits": "3"}


def test_apply_refuses_the_unrounded_checkpoint_and_writes_nothing(tmp_path, checkpoint,
                                                                   capsys):
    path, tensors = checkpoint
    shown = render(tensors)
    patch = Patch.from_edits(shown.rounded, "layer.bias[0] += 1\n", scales=shown.scales)
    patch.save(tmp_path / "p.json")
    out = tmp_path / "out.safetensors"
    assert run("apply", path, tmp_path / "p.json", "-o", out) == 1
    message = capsys.readouterr().out
    assert "'layer.bias'" in message and patch.changes["layer.bias"].base_sha256 in message
    assert not out.exists()


def test_diff_then_apply_reproduces_the_edited_checkpoint(tmp_path, checkpoint, capsys):
    path, tensors = checkpoint
    edited = {name: array.copy() for name, array in tensors.items()}
    edited["layer.weight"][2, 4] = 7.0
    edited_path = tmp_path / "edited.safetensors"
    save_file(edited, str(edited_path))
    patch_path = tmp_path / "d.json"
    assert run("diff", path, edited_path, "-o", patch_path) == 0
    out = tmp_path / "out.safetensors"
    assert run("apply", path, patch_path, "-o", out) == 0
    result = load_file(str(out))
    for name in tensors:
        assert tensor_sha256(result[name]) == tensor_sha256(edited[name])
    with safe_open(str(out), framework="np") as handle:
        assert handle.metadata() == {"origin": "test"}
    capsys.readouterr()
    assert run("show", patch_path, "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["elements_changed"] == 1 and summary["forms"] == {"sparse": 1}


def test_render_subset_to_a_file(tmp_path, checkpoint):
    path, tensors = checkpoint
    out = tmp_path / "text.txt"
    assert run("render", path, "--names", "layer.bias", "--digits", "2", "-o", out) == 0
    text = out.read_text()
    assert "layer.bias = [" in text and "layer.weight" not in text


@pytest.mark.parametrize("make_args, words", [
    (lambda d, p: ["render", d / "absent.safetensors"], "no such file"),
    (lambda d, p: ["render", d / "junk.safetensors"], "not a readable safetensors file"),
    (lambda d, p: ["render", p, "--names", "nope"], "['nope'] are not in"),
    (lambda d, p: ["edit", p, d / "bad.txt", "-o", d / "x.json"], "line 1, column 16"),
    (lambda d, p: ["edit", p, d / "ok.txt", "--scales", d / "junk.safetensors", "-o",
                   d / "x.json"], "not valid JSON"),
    (lambda d, p: ["edit", p, d / "ok.txt", "-o", d / "x.json", "--evidence", "[1]"],
     "must be a JSON object"),
    (lambda d, p: ["apply", p, d / "junk.safetensors", "-o", d / "x.safetensors"],
     "not valid JSON"),
])
def test_bad_input_is_a_clear_error(tmp_path, checkpoint, capsys, make_args, words):
    path, _ = checkpoint
    (tmp_path / "junk.safetensors").write_bytes(b"\x00\x01 not safetensors")
    (tmp_path / "bad.txt").write_text("layer.weight[0 = 1\n")
    (tmp_path / "ok.txt").write_text("layer.bias[0] = 1\n")
    assert run(*make_args(tmp_path, path)) == 1
    assert words in capsys.readouterr().out
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "x.safetensors").exists()


def test_the_tensorcode_command_dispatches_to_patch(tmp_path, checkpoint, capsys):
    from tensorcode import cli

    path, _ = checkpoint
    assert cli.main(["patch", "render", str(path), "--names", "steps"]) == 0
    assert "steps = [3]" in capsys.readouterr().out


def test_19_render_rounded_keeps_the_checkpoints_metadata(tmp_path, checkpoint, capsys):
    path, _ = checkpoint
    rounded = tmp_path / "shown.safetensors"
    assert run("render", path, "--rounded", rounded, "--digits", "2") == 0
    with safe_open(str(rounded), framework="np") as handle:
        assert handle.metadata() == {"origin": "test", "tensorcode.rendered_digits": "2"}


def test_19_patch_show_into_a_closed_pipe_ends_without_a_traceback(tmp_path, checkpoint):
    import os
    import pathlib
    import subprocess
    import sys

    path, tensors = checkpoint
    edited = {name: np.array(value) for name, value in tensors.items()}
    edited["layer.weight"] = edited["layer.weight"] + 1.0
    patch_path = tmp_path / "fix.patch.json"
    from tensorcode.weights import diff
    diff(tensors, edited).save(patch_path)
    root = str(pathlib.Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen([sys.executable, "-m", "tensorcode.cli", "patch", "show",
                                "--json", str(patch_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    process.stdout.close()  # the reader is gone before anything is written (`| head -0`)
    error = process.stderr.read().decode()
    process.wait(timeout=120)
    assert "Traceback" not in error and "BrokenPipeError" not in error, error

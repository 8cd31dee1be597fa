"""``tensorcode.aot.load``: every hash checked before the library is opened, the export
pinned by its SHA-256, a directory another user could write refused, and no llvmlite
or numba in the loading process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tensorcode as tc
from tensorcode import aot
from tensorcode.errors import ArtifactError, FeedError


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tape = tc.Tape()
    w = tape.parameter(np.linspace(-1, 1, 8).reshape(2, 4), name="w")
    x = tape.input(np.ones(2), name="x")
    root = (x @ w).tanh()
    network = tape.into_network()
    plan = network.entry([root]).lower("llvm")
    directory = tmp_path_factory.mktemp("export") / "lib"
    document = plan.export(directory, name="small")
    expected = plan.bind(network.parameters())(np.array([0.25, -2.0]))[0]
    return directory, document, expected


def _copy(exported, tmp_path):
    directory = tmp_path / "copy"
    shutil.copytree(exported[0], directory)
    directory.chmod(0o755)
    return directory


def test_it_loads_and_answers(exported):
    directory, document, expected = exported
    loaded = aot.load(directory, sha256=document["export_sha256"])
    assert loaded.kind == "plan" and loaded.output_names == ["output_0"]
    (got,) = loaded(np.array([0.25, -2.0]))
    assert got.tobytes() == expected.tobytes()
    assert loaded.content_hash == document["content_hash"]


@pytest.mark.parametrize("file", ["libsmall.so", "small.h", "manifest.json"])
def test_a_changed_byte_in_any_file_is_refused(exported, tmp_path, file):
    directory = _copy(exported, tmp_path)
    path = directory / file
    data = bytearray(path.read_bytes())
    at = len(data) // 2
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError):
        aot.load(directory)


def test_a_manifest_rewritten_with_new_hashes_fails_the_pin(exported, tmp_path):
    from tensorcode.aot import manifest as manifests

    directory = _copy(exported, tmp_path)
    header = directory / "small.h"
    header.write_text(header.read_text() + "/* changed */\n")
    document = json.loads((directory / "manifest.json").read_text())
    document["files"]["small.h"] = manifests.file_hash(header)
    document["export_sha256"] = manifests.export_hash(document)
    (directory / "manifest.json").write_bytes(manifests.canonical(document))
    aot.load(directory)  # consistent again: only a pin can tell
    with pytest.raises(ArtifactError, match="not the library this service was deployed"):
        aot.load(directory, sha256=exported[1]["export_sha256"])


def test_a_directory_others_can_write_is_refused(exported, tmp_path):
    directory = _copy(exported, tmp_path)
    directory.chmod(0o777)
    with pytest.raises(ArtifactError, match="writable by its group or by others"):
        aot.load(directory)
    directory.chmod(0o755)
    (directory / "libsmall.so").chmod(0o666)
    with pytest.raises(ArtifactError, match="writable by its group or by others"):
        aot.load(directory)


def test_a_missing_file_or_manifest_is_refused(exported, tmp_path):
    directory = _copy(exported, tmp_path)
    (directory / "small.h").unlink()
    with pytest.raises(ArtifactError):
        aot.load(directory)
    with pytest.raises(ArtifactError):
        aot.load(tmp_path / "nowhere")


def test_wrong_inputs_are_feed_errors(exported):
    loaded = aot.load(exported[0])
    with pytest.raises(FeedError, match="takes 1 inputs"):
        loaded()
    with pytest.raises(FeedError, match="expected shape"):
        loaded(np.zeros(3))
    with pytest.raises(FeedError, match="a batch needs shape"):
        loaded.batch(np.zeros(2))


def test_loading_imports_neither_llvmlite_nor_numba(exported):
    directory, _, expected = exported
    code = ("import sys, json, numpy as np\n"
            "from tensorcode import aot\n"
            f"loaded = aot.load({str(directory)!r})\n"
            "(got,) = loaded(np.array([0.25, -2.0]))\n"
            "print(json.dumps({'heavy': sorted(m for m in sys.modules if m.split('.')[0] in "
            "('llvmlite', 'numba')), 'got': got.tolist()}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    assert result["got"] == expected.tolist()


def test_a_manifest_naming_a_path_is_refused(exported, tmp_path):
    from tensorcode.aot import manifest as manifests

    directory = _copy(exported, tmp_path)
    document = json.loads((directory / "manifest.json").read_text())
    document["name"] = "small/../small"
    document["export_sha256"] = manifests.export_hash(document)
    (directory / "manifest.json").write_bytes(manifests.canonical(document))
    with pytest.raises(ArtifactError, match="name"):
        aot.load(directory)

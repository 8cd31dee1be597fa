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


def test_a_failed_replace_leaves_the_old_file(tmp_path, monkeypatch):
    """A crash at the commit (simulated: os.replace fails) keeps the old bytes whole."""
    path = tmp_path / "a.bin"
    path.write_bytes(b"old contents")

    def refuse(*args, **kwargs):
        raise OSError("simulated crash at the rename")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="simulated"):
        files.atomic_write_bytes(path, b"new contents")
    assert path.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == ["a.bin"]


def test_text_and_bytes_writers(tmp_path):
    assert files.atomic_write_text(tmp_path / "t.txt", "héllo").read_bytes() == \
        "héllo".encode()
    assert files.atomic_write_bytes(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"


def _fill(text):
    def fill(directory):
        (directory / "values.bin").write_text(text)
        (directory / "record.json").write_text(text)
    return fill


def test_replace_directory_swaps_a_whole_artifact(tmp_path):
    target = tmp_path / "artifact"
    files.replace_directory(target, _fill("one"), owned=("values.bin", "record.json"))
    files.replace_directory(target, _fill("two"), owned=("values.bin", "record.json"))
    assert sorted(os.listdir(tmp_path)) == ["artifact"]
    assert {p.name: p.read_text() for p in target.iterdir()} == {"values.bin": "two",
                                                                  "record.json": "two"}


def test_replace_directory_failure_keeps_the_old_artifact(tmp_path):
    target = tmp_path / "artifact"
    files.replace_directory(target, _fill("old"), owned=("values.bin", "record.json"))

    def half(directory):
        (directory / "values.bin").write_text("new")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        files.replace_directory(target, half, owned=("values.bin", "record.json"))
    assert sorted(os.listdir(tmp_path)) == ["artifact"]
    assert {p.read_text() for p in target.iterdir()} == {"old"}


def test_replace_directory_leaves_files_it_does_not_own(tmp_path):
    target = tmp_path / "artifact"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    files.replace_directory(target, _fill("new"), owned=("values.bin", "record.json"))
    assert (target / "notes.txt").read_text() == "mine"
    assert (target / "record.json").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["artifact"]


def _dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_the_next_save_removes_temporaries_of_dead_writers_only(tmp_path):
    dead, live = _dead_pid(), os.getppid()
    (tmp_path / f".a.json.tmp-{dead}-0123abcd").write_text("half")
    (tmp_path / f".tool.tmp-{dead}-89abcdef").mkdir()  # a directory being filled
    (tmp_path / f".tool.tmp-{dead}-89abcdef" / "tool.json").write_text("{}")
    (tmp_path / f".tool.old-{dead}-00000000").mkdir()  # a directory renamed aside
    (tmp_path / f".a.json.tmp-{live}-0123abcd").write_text("a live writer's")
    (tmp_path / f".b.json.tmp-{dead}-0123abcd").write_text("another target's")
    files.atomic_write_json(tmp_path / "a.json", [1])
    assert sorted(os.listdir(tmp_path)) == sorted([
        "a.json", f".tool.tmp-{dead}-89abcdef", f".tool.old-{dead}-00000000",
        f".a.json.tmp-{live}-0123abcd", f".b.json.tmp-{dead}-0123abcd"])
    files.replace_directory(tmp_path / "tool", lambda d: (d / "x").write_text("1"), ["x"])
    assert sorted(os.listdir(tmp_path)) == sorted([
        "a.json", "tool", f".a.json.tmp-{live}-0123abcd", f".b.json.tmp-{dead}-0123abcd"])
    assert files.remove_stale_temporaries(tmp_path) == 1  # every name, dead writers only
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["a.json", f".a.json.tmp-{live}-0123abcd", "tool"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_during_saves_leaves_no_temporary_after_the_next_save(tmp_path):
    import random
    import signal
    import time

    payload = b"x" * (1 << 20)
    path = tmp_path / "blob.bin"
    files.atomic_write_bytes(path, payload)
    rng = random.Random(1)
    leftovers = 0
    for _ in range(20):
        pid = os.fork()
        if pid == 0:  # the child saves until it is killed
            try:
                while True:
                    files.atomic_write_bytes(path, payload)
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.0, 0.02))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        leftovers += len(os.listdir(tmp_path)) - 1
        assert path.read_bytes() == payload  # old or new, never half
    files.atomic_write_bytes(path, payload)
    assert os.listdir(tmp_path) == ["blob.bin"], leftovers

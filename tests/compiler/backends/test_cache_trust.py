"""The plan cache is trusted the way ssh trusts ``~/.ssh``: created ``0700``, refused
(with one warning, compiling in memory instead) when a directory is not ours or is
writable by others, and no file in it runs unless TensorCode verified it: no planted
``.pyc`` is imported, no planted compiled function (a pickle) is loaded. Paths that hold
something other than a file (a directory, a FIFO) are refused with one warning, never a
raw error."""

from __future__ import annotations

import json
import os
import pathlib
import pickle
import py_compile
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.plans.plan import compile_stats

ROOT = pathlib.Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import tensorcode as tc
    from tensorcode.compiler.plans.plan import compile_stats
    tape = tc.Tape()
    x = tape.input(np.arange(5, dtype=np.float32), name="x")
    w = tape.parameter(np.full(5, 0.25, np.float32), name="w")
    y = (x * w + 7.5).sum()
    network = tape.into_network()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = network.entry([y]).lower("numba")  # the Numba files these tests plant
        value = float(plan.forward(network.parameters()).of(y))
    print(json.dumps({"stats": compile_stats(), "key": plan.key, "value": value,
                      "warnings": [str(w.message) for w in caught]}))
""")
EXPECTED = float(np.sum(np.arange(5) * 0.25 + 7.5))


def run_script(cache: pathlib.Path) -> dict:
    env = dict(os.environ, TENSORCODE_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["value"] == pytest.approx(EXPECTED)
    return result


def _mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    cache = tmp_path_factory.mktemp("trust") / "cache"
    first = run_script(cache)
    assert first["stats"]["sources_written"] == 1 and not first["warnings"]
    return cache, first


def test_the_cache_is_created_private(filled):
    cache, first = filled
    plans = cache / "plans"
    for directory in (cache, plans, plans / "__pycache__"):
        assert _mode(directory) == 0o700, directory
    stem = f"p_{first['key']}"
    assert _mode(plans / f"{stem}.py") == 0o600
    compiled = sorted((plans / "__pycache__").iterdir())
    assert compiled and all(p.name.startswith(f"{stem}.run.") and p.suffix == ".tcnb"
                            for p in compiled), compiled  # no Numba index or data file
    assert all(_mode(p) == 0o600 for p in compiled)
    assert _mode(plans / f"{stem}.lock") == 0o600


def test_planted_bytecode_and_pickles_never_run(filled, tmp_path):
    import shutil

    cache, first = filled
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    os.chmod(copy, 0o700)
    plans = copy / "plans"
    stem = f"p_{first['key']}"
    marker_pyc = tmp_path / "pyc-ran"
    marker_pickle = tmp_path / "pickle-ran"
    # a .pyc whose hash is never checked against the source: Python's import would run it
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker_pyc)!r}, 'w').close()\n")
    tag = sys.implementation.cache_tag
    py_compile.compile(str(evil), cfile=str(plans / "__pycache__" / f"{stem}.{tag}.pyc"),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    # the compiled function replaced by a pickle that creates a file when loaded

    class Plant:
        def __reduce__(self):
            return (open, (str(marker_pickle), "w"))

    compiled = list((plans / "__pycache__").glob(f"{stem}.*.tcnb"))
    assert compiled
    for path in compiled:
        path.write_bytes(pickle.dumps(Plant()))
    result = run_script(copy)
    assert not marker_pyc.exists(), "a planted .pyc was imported"
    assert not marker_pickle.exists(), "a planted compiled function was unpickled"
    assert result["stats"]["untrusted_entries"] == len(compiled)
    assert len(result["warnings"]) == len(compiled)
    assert all("was not used" in w and "recompiling it" in w for w in result["warnings"])


def test_a_planted_function_with_a_recomputed_hash_is_never_unpickled(filled, tmp_path):
    """A compiled function's file carries an authentication tag (HMAC, keyed by a secret
    outside the cache), so a planted file headed by the SHA-256 of its pickle, or by the
    tag of the genuine file it replaces, is not loaded."""
    import hashlib
    import shutil

    cache, first = filled
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    os.chmod(copy, 0o700)
    plans = copy / "plans"
    stem = f"p_{first['key']}"
    marker = tmp_path / "pickle-ran"

    class Plant:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    compiled = sorted((plans / "__pycache__").glob(f"{stem}.*.tcnb"))
    assert compiled
    bomb = pickle.dumps(Plant())
    for k, path in enumerate(compiled):
        genuine = path.read_bytes()
        head = genuine[:16] + (hashlib.sha256(bomb).digest() if k % 2 else genuine[16:48])
        path.write_bytes(head + bomb)
    result = run_script(copy)
    assert not marker.exists(), "a planted compiled function was unpickled"
    assert result["stats"]["untrusted_entries"] == len(compiled)


# in-process: each case lowers a plan this process has not compiled yet

def _lower(offset: float):
    tape = tc.Tape()
    x = tape.input(np.arange(4, dtype=np.float32), name="x")
    y = (x * np.float32(offset) + np.float32(offset)).sum()
    network = tape.into_network()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = network.entry([y]).lower()
        value = float(plan.forward(network.parameters()).of(y))
    assert value == pytest.approx(float(np.sum(np.arange(4) * offset + offset)))
    return [str(w.message) for w in caught if "plan cache" in str(w.message)]


@pytest.fixture
def fresh_warnings(monkeypatch):
    """The once-per-process warning about an unusable cache, re-armed for this test."""
    from tensorcode.compiler.backends import plan_directory

    monkeypatch.setattr(plan_directory, "_WARNED", set())


def test_a_cache_writable_by_others_is_refused(tmp_path, monkeypatch, fresh_warnings):
    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(cache))
    before = compile_stats()["memory_compiled"]
    caught = _lower(1.5)
    assert len(caught) == 1 and "writable by its group or by others" in caught[0]
    assert compile_stats()["memory_compiled"] == before + 1
    assert list(cache.iterdir()) == []
    assert _lower(2.5) == []  # one warning per process


def test_a_cache_path_that_is_a_file_compiles_in_memory(tmp_path, monkeypatch,
                                                        fresh_warnings):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(blocker / "cache"))
    caught = _lower(3.5)
    assert len(caught) == 1 and "compiling plans in memory" in caught[0]


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="changing a directory's owner needs root")
def test_a_cache_owned_by_another_user_is_refused(tmp_path, monkeypatch, fresh_warnings):
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o700)
    os.chown(cache, 12345, 12345)
    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(cache))
    caught = _lower(4.5)
    assert len(caught) == 1 and "owned by uid 12345" in caught[0]


@pytest.mark.skipif(hasattr(os, "getuid") and os.getuid() == 0,
                    reason="root writes into read-only directories")
def test_a_read_only_cache_compiles_in_memory(tmp_path, monkeypatch, fresh_warnings):
    cache = tmp_path / "ro"
    cache.mkdir(mode=0o500)
    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(cache))
    try:
        caught = _lower(5.5)
    finally:
        os.chmod(cache, 0o700)
    assert len(caught) == 1 and "compiling plans in memory" in caught[0]


@pytest.mark.parametrize("obstacle", ["source-directory", "lock-directory", "lock-fifo",
                                      "compiled-directory"])
def test_a_numba_entry_path_that_is_not_a_file_is_refused_once(tmp_path, monkeypatch,
                                                               fresh_warnings, obstacle):
    """A directory at a numba entry's source or compiled file, or a directory or FIFO at
    its lock, is refused (left alone, never opened as a file): the plan compiles (in
    memory when the entry cannot be used at all) and runs, with one warning."""
    from tensorcode.compiler.backends.numba import backend

    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(backend, "_MODULES", {})
    tape = tc.Tape()
    x = tape.input(np.arange(4, dtype=np.float32), name="x")
    y = (x * np.float32(0.625) - np.float32(1.5)).sum()
    network = tape.into_network()

    def lower() -> tuple[dict, list[str]]:
        before = compile_stats()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = network.entry([y]).lower("numba").forward(network.parameters()).of(y)
        assert float(value) == pytest.approx(float(np.sum(np.arange(4) * 0.625 - 1.5)))
        after = compile_stats()
        return {k: after[k] - before[k] for k in after}, [str(w.message) for w in caught]

    lower()
    plans = tmp_path / "cache" / "plans"
    (source,) = plans.glob("p_*.py")
    if obstacle == "source-directory":
        path = source
    elif obstacle == "compiled-directory":
        (path,) = (plans / "__pycache__").glob(f"{source.stem}.*.tcnb")
    else:
        path = plans / f"{source.stem}.lock"
    path.unlink()
    os.mkfifo(path) if obstacle == "lock-fifo" else path.mkdir()
    backend._MODULES.clear()
    stats, caught = lower()
    assert len(caught) == 1, caught
    assert "not a regular file" in caught[0] or "is a directory" in caught[0], caught
    if obstacle == "compiled-directory":  # that file only: refused, compiled, not cached
        assert stats["untrusted_entries"] == 1 and "recompiling it" in caught[0]
    else:
        assert stats["memory_compiled"] == 1 and "compiling it in memory" in caught[0]
    assert stats["compiled"] >= 1 and path.exists() and not path.is_file()

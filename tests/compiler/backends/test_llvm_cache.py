"""The llvm backend's authenticated plan cache: what it loads, what it refuses.

Every entry carries an HMAC-SHA-256 tag keyed by a secret outside the cache; an entry
without a valid tag (planted, copied from another cache directory, modified with a
recomputed hash) and an object needing a symbol outside the allowlist are reported
once, counted, recompiled and never run. Fresh processes observe the cache through
compile counters, never through timing.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from llvmlite import ir

import tensorcode as tc
from tensorcode.compiler.backends import llvm as backend
from tensorcode.compiler.backends import secret as secrets
from tensorcode.compiler.backends.llvm import cache, codegen, interface, objects
from tensorcode.compiler.plans.plan import compile_stats

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _network():
    tape = tc.Tape()
    x = tape.input(np.linspace(-1, 1, 12, dtype=np.float32).reshape(12, 1), name="x")
    y = tape.input(np.linspace(0, 1, 12, dtype=np.float32).reshape(12, 1), name="y")
    mlp = tc.nn.Mlp(tape, [1, 5, 1], "tanh")
    loss = tc.mse(mlp(x), y)
    adjoints = tape.differentiate(loss, mlp.parameters())
    return tape.into_network(), adjoints, loss


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A cache directory and a secret of this test's own; no program in memory."""
    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(secrets.SECRET_ENV, str(tmp_path / "secret" / "key"))
    monkeypatch.setattr(backend, "_PROGRAMS", {})
    from tensorcode.compiler.backends import plan_directory

    monkeypatch.setattr(plan_directory, "_WARNED", set())
    network, adjoints, loss = _network()
    return tmp_path, network, network.entry(adjoints.roots()), loss


def _lower(entry, network, loss):
    """Lower with the llvm backend from disk (nothing kept in memory): (value, stats
    difference, warnings)."""
    backend._PROGRAMS.clear()
    before = compile_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = entry.lower("llvm")
    value = float(plan.forward(network.parameters()).of(loss))
    expected = float(network.forward(network.parameters()).of(loss))
    assert abs(value - expected) <= 1e-5 * max(1.0, abs(expected))
    after = compile_stats()
    stats = {k: after[k] - before[k] for k in after}
    return plan, stats, [str(w.message) for w in caught]


def _entry_file(tmp_path: pathlib.Path) -> pathlib.Path:
    (found,) = (tmp_path / "cache" / "plans").glob("l_*.o")
    return found


def test_a_second_lowering_loads_the_tagged_object(fresh):
    tmp_path, network, entry, loss = fresh
    _, first, _ = _lower(entry, network, loss)
    assert first["compiled"] == 1 and first["llvm_compile_ms"] >= 0
    _, second, caught = _lower(entry, network, loss)
    assert second["compiled"] == 0 and second["cache_loaded"] == 1 and not caught
    mode = stat.S_IMODE(_entry_file(tmp_path).stat().st_mode)
    assert mode == 0o600
    secret = pathlib.Path(os.environ[secrets.SECRET_ENV])
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700


def _refused(entry, network, loss, tmp_path):
    _, stats, caught = _lower(entry, network, loss)
    assert stats["untrusted_entries"] == 1 and stats["compiled"] == 1
    assert stats["cache_loaded"] == 0
    assert len(caught) == 1 and "recompiling it" in caught[0]
    # the rebuilt entry is trusted again
    _, again, caught = _lower(entry, network, loss)
    assert again["cache_loaded"] == 1 and again["compiled"] == 0 and not caught


def test_a_planted_entry_is_recompiled(fresh):
    tmp_path, network, entry, loss = fresh
    _lower(entry, network, loss)
    path = _entry_file(tmp_path)
    data = path.read_bytes()
    head = len(cache.MAGIC) + cache.TAG_BYTES
    path.write_bytes(cache.MAGIC + os.urandom(cache.TAG_BYTES) + data[head:])
    _refused(entry, network, loss, tmp_path)


def test_a_modified_object_with_a_recomputed_hash_is_recompiled(fresh):
    tmp_path, network, entry, loss = fresh
    _lower(entry, network, loss)
    path = _entry_file(tmp_path)
    head = len(cache.MAGIC) + cache.TAG_BYTES
    data = bytearray(path.read_bytes()[head:])
    data[-1] ^= 1
    path.write_bytes(cache.MAGIC + hashlib.sha256(bytes(data)).digest() + bytes(data))
    _refused(entry, network, loss, tmp_path)


def test_an_entry_copied_from_another_cache_directory_is_recompiled(fresh, monkeypatch):
    tmp_path, network, entry, loss = fresh
    _lower(entry, network, loss)
    source = _entry_file(tmp_path)
    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(tmp_path / "other"))
    other = tmp_path / "other" / "plans"
    other.mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "other", 0o700)
    shutil.copy(source, other / source.name)
    os.chmod(other / source.name, 0o600)
    _, stats, caught = _lower(entry, network, loss)
    assert stats["untrusted_entries"] == 1 and stats["compiled"] == 1
    assert len(caught) == 1


def _object_calling_system(marker: pathlib.Path) -> bytes:
    """An object with the plan's entry points whose ``tc_run`` calls ``system``."""
    module = ir.Module()
    command = bytearray(f"touch {marker}\0".encode())
    text = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(command)), "command")
    text.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(command)), command)
    system = ir.Function(module, ir.FunctionType(ir.IntType(32), [ir.PointerType()]),
                         "system")
    for name in interface.ENTRIES:
        fn = ir.Function(module, codegen.ENTRY_TYPE, name)
        b = ir.IRBuilder(fn.append_basic_block())
        b.call(system, [text])
        b.ret(ir.Constant(ir.IntType(32), 0))
    return objects.compile_object(module)


def test_an_object_calling_system_is_refused_even_with_a_valid_tag(fresh):
    tmp_path, network, entry, loss = fresh
    plan, _, _ = _lower(entry, network, loss)
    marker = tmp_path / "ran"
    data = _object_calling_system(marker)
    assert "system" in objects.undefined_symbols(data)
    with pytest.raises(objects.UntrustedObject, match="system"):
        objects.load(data)
    directory = tmp_path / "cache" / "plans"
    cache.write(directory, plan.key, data)  # tagged with the real secret
    _refused(entry, network, loss, tmp_path)
    assert not marker.exists()


def test_a_secret_open_to_others_is_refused_and_plans_compile_in_memory(fresh):
    tmp_path, network, entry, loss = fresh
    secret = pathlib.Path(os.environ[secrets.SECRET_ENV])
    secrets.forget()
    secrets.secret()
    os.chmod(secret, 0o644)
    secrets.forget()
    try:
        _, stats, caught = _lower(entry, network, loss)
    finally:
        os.chmod(secret, 0o600)
        secrets.forget()
    assert stats["memory_compiled"] == 1 and stats["compiled"] == 1
    assert any("cache secret" in w and "open to others" in w for w in caught)
    assert not list((tmp_path / "cache" / "plans").glob("l_*.o"))


SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import tensorcode as tc
    from tensorcode.compiler.plans.plan import compile_stats
    tape = tc.Tape()
    x = tape.input(np.linspace(-1, 1, 12, dtype=np.float32).reshape(12, 1), name="x")
    y = tape.input(np.linspace(0, 1, 12, dtype=np.float32).reshape(12, 1), name="y")
    mlp = tc.nn.Mlp(tape, [1, int(sys.argv[1]), 1], "tanh")
    loss = tc.mse(mlp(x), y)
    adjoints = tape.differentiate(loss, mlp.parameters())
    network = tape.into_network()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = network.entry(adjoints.roots()).lower("llvm")
        # a fused training step on the default backend, as a user's first step
        optimizer = tc.optim.Adam()
        step = network.entry(adjoints.roots()).lower(optimizer=optimizer)
    value = float(plan.forward(network.parameters()).of(loss))
    expected = float(network.forward(network.parameters()).of(loss))
    trained = network.parameters()
    first = step.step(trained, optimizer, None, 0.01)
    assert abs(first - expected) <= 1e-5 * max(1.0, abs(expected))
    assert step.step(trained, optimizer, None, 0.01) < first
    print(json.dumps({"stats": compile_stats(), "key": plan.key, "value": value,
                      "expected": expected, "numba": "numba" in sys.modules,
                      "generator": "tensorcode.compiler.backends.llvm.codegen" in sys.modules,
                      "numba backend": sorted(m for m in sys.modules if m.startswith(
                          "tensorcode.compiler.backends.numba.")),
                      "warnings": [str(w.message) for w in caught]}))
""")


def _process(tmp_path: pathlib.Path, hidden: int) -> subprocess.Popen:
    env = dict(os.environ, TENSORCODE_CACHE_DIR=str(tmp_path / "cache"))
    env[secrets.SECRET_ENV] = str(tmp_path / "secret" / "key")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(hidden)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert abs(result["value"] - result["expected"]) <= 1e-5 * max(1.0, abs(result["expected"]))
    return result


def test_fresh_processes_compile_once_and_never_import_numba(tmp_path):
    # each process lowers a gradient plan and a fused Adam step plan (the default backend)
    processes = [_process(tmp_path, 7) for _ in range(2)]  # at once: one compiles each
    results = [_finish(p) for p in processes]
    assert results[0]["key"] == results[1]["key"]
    assert sum(r["stats"]["compiled"] for r in results) == 2
    assert not any(r["warnings"] for r in results)
    warm = _finish(_process(tmp_path, 7))
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["cache_loaded"] == 2
    assert not warm["numba"] and not any(r["numba"] for r in results)
    # nor the numba backend's modules (the cache directory's rules have their own home);
    # only its float32 approximations, which the llvm generator renders too
    assert warm["numba backend"] == []
    assert all(set(r["numba backend"]) <= {"tensorcode.compiler.backends.numba.approx"}
               for r in results)
    # the code generator is imported by a process that compiles, never by one that loads
    assert not warm["generator"]
    assert all(r["generator"] == (r["stats"]["compiled"] > 0) for r in results)
    assert [p.name for p in (tmp_path / "cache" / "plans").iterdir()
            if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("obstacle", ["entry-directory", "lock-directory", "lock-fifo"])
def test_a_path_that_is_not_a_file_is_refused_with_one_warning(fresh, obstacle):
    """A directory at an entry's path, or a directory or FIFO at its lock's path, is
    refused (never opened as a file, never removed): the plan compiles and runs, with one
    warning, and no raw ``IsADirectoryError`` or ``io.UnsupportedOperation``."""
    tmp_path, network, entry, loss = fresh
    _lower(entry, network, loss)
    path = _entry_file(tmp_path)
    lock = path.with_suffix(".lock")
    if obstacle == "entry-directory":
        path.unlink()
        path.mkdir()
    else:
        lock.unlink()
        lock.mkdir() if obstacle == "lock-directory" else os.mkfifo(lock)
    _, stats, caught = _lower(entry, network, loss)
    assert stats["compiled"] == 1 and stats["cache_loaded"] == 0
    assert stats["untrusted_entries"] == 1
    assert len(caught) == 1 and "is not a regular file" in caught[0], caught
    _, again, caught = _lower(entry, network, loss)  # still refused, not warned again
    assert again["compiled"] == 1 and not caught
    assert (path if obstacle == "entry-directory" else lock).exists()  # left alone


def test_a_huge_sparse_entry_is_refused_by_its_size_before_it_is_read(fresh):
    """An entry grown to 2 GiB (sparse: it costs no disk) behind its genuine header is
    refused from its size; nothing near its size is allocated, and it is rewritten."""
    import tracemalloc

    tmp_path, network, entry, loss = fresh
    _lower(entry, network, loss)
    path = _entry_file(tmp_path)
    with open(path, "r+b") as handle:
        handle.truncate(2 << 30)
    tracemalloc.start()
    try:
        _, stats, caught = _lower(entry, network, loss)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak} bytes allocated"
    assert stats["untrusted_entries"] == 1 and stats["compiled"] == 1
    assert len(caught) == 1 and "more than a cache entry may hold" in caught[0], caught
    assert path.stat().st_size < 1 << 20  # the compiled object replaced it


def test_a_secret_inside_the_cache_directory_is_refused(fresh, monkeypatch):
    """A secret in the cache directory would travel with every copy of the cache: it is
    refused with a ``CacheError`` saying so, and plans compile in memory (one warning)."""
    from tensorcode.errors import CacheError

    tmp_path, network, entry, loss = fresh
    inside = tmp_path / "cache" / "secret" / "key"
    monkeypatch.setenv(secrets.SECRET_ENV, str(inside))
    secrets.forget()
    try:
        with pytest.raises(CacheError, match="lies inside the plan cache"):
            secrets.secret()
        _, stats, caught = _lower(entry, network, loss)
    finally:
        secrets.forget()
    assert stats["memory_compiled"] == 1 and stats["compiled"] == 1
    assert len(caught) == 1 and "lies inside the plan cache" in caught[0], caught
    assert not inside.exists()

"""The ahead-of-time plan cache, observed through compile counters in fresh processes
(never through timing), and the numba backend's compiled files: a pickle planted before,
during or after a compile, at any path Numba's own cache or TensorCode's reads, with or
without ``NUMBA_CACHE_DIR``, never runs."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import tensorcode as tc
    from tensorcode.compiler.plans.plan import compile_stats
    hidden = int(sys.argv[1])
    tape = tc.Tape()
    x = tape.input(np.linspace(-1, 1, 12, dtype=np.float32).reshape(12, 1), name="x")
    y = tape.input(np.linspace(0, 1, 12, dtype=np.float32).reshape(12, 1), name="y")
    mlp = tc.nn.Mlp(tape, [1, hidden, 1], "tanh")
    loss = tc.mse(mlp(x), y)
    adjoints = tape.differentiate(loss, mlp.parameters())
    network = tape.into_network()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = network.entry(adjoints.roots()).lower("numba")
    value = float(plan.forward(network.parameters()).of(loss))
    expected = float(network.forward(network.parameters()).of(loss))
    print(json.dumps({"stats": compile_stats(), "key": plan.key, "value": value,
                      "expected": expected, "warnings": [str(w.message) for w in caught]}))
""")


def run_script(cache: pathlib.Path, hidden: int = 4, wait: bool = True):
    env = dict(os.environ, TENSORCODE_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, str(hidden)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return process
    return finish(process)


def finish(process) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert abs(result["value"] - result["expected"]) <= 1e-5 * max(1.0, abs(result["expected"]))
    return result


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache directory filled once by a first process (shared by the tests below)."""
    cache = tmp_path_factory.mktemp("plan-cache")
    first = run_script(cache)
    assert first["stats"]["compiled"] >= 1 and first["stats"]["sources_written"] == 1
    return cache, first


def test_a_fresh_process_hits_the_cache(warm):
    cache, first = warm
    second = run_script(cache)
    assert second["key"] == first["key"]
    assert second["stats"]["compiled"] == 0, second
    assert second["stats"]["cache_loaded"] >= 1
    assert second["stats"]["sources_written"] == 0
    assert not second["warnings"]


def test_a_truncated_source_is_reported_once_and_rebuilt(warm, tmp_path):
    cache, first = warm
    copy = tmp_path / "cache"
    import shutil
    shutil.copytree(cache, copy)
    source = copy / "plans" / f"p_{first['key']}.py"
    source.write_text(source.read_text()[:200])
    result = run_script(copy)
    assert result["stats"]["corrupt_entries"] == 1
    assert len(result["warnings"]) == 1 and "corrupt" in result["warnings"][0]
    again = run_script(copy)
    assert again["stats"]["compiled"] == 0 and not again["warnings"]


def test_a_truncated_numba_cache_file_is_rebuilt(warm, tmp_path):
    cache, first = warm
    copy = tmp_path / "cache"
    import shutil
    shutil.copytree(cache, copy)
    damaged = list((copy / "plans" / "__pycache__").glob(f"p_{first['key']}.run.*.tcnb"))
    assert damaged
    for f in damaged:
        f.write_bytes(f.read_bytes()[:10])
    result = run_script(copy)  # refused (one warning each) and compiled again
    assert result["stats"]["compiled"] >= 1
    assert result["stats"]["untrusted_entries"] == len(damaged)
    assert all("too short" in w for w in result["warnings"]), result["warnings"]
    again = run_script(copy)
    assert again["stats"]["compiled"] == 0


def test_two_processes_compiling_a_changed_graph_at_once(warm, tmp_path):
    """Two processes lower a graph the cache has no entry for (a hidden width the warm
    cache's plan does not have) at the same moment: the changed graph gets its own key
    and is compiled (by one of them at least), one source is written, and a third
    process loads it. (One pair of Numba compiles checks both; each fresh process costs
    seconds.)"""
    import shutil

    cache, first = warm
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    cache = copy
    processes = [run_script(cache, hidden=6, wait=False) for _ in range(2)]
    results = [finish(p) for p in processes]
    assert results[0]["key"] == results[1]["key"] != first["key"]
    assert any(r["stats"]["compiled"] >= 1 for r in results)  # the other may load it
    assert sum(r["stats"]["sources_written"] for r in results) == 1
    third = run_script(cache, hidden=6)
    assert third["stats"]["compiled"] == 0 and not third["warnings"]
    assert [p.name for p in (cache / "plans").iterdir() if p.name.endswith(".tmp")] == []


# ---------------------------------------------------------------------------------------
# planted compiled code never runs: before, during and after a compile, whichever entry
# point loads it, with and without NUMBA_CACHE_DIR

EVERY_ENTRY_POINT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import tensorcode as tc
    from tensorcode.compiler.plans.plan import compile_stats
    tape = tc.Tape()
    x = tape.input(np.arange(4, dtype=np.float32), name="x")
    w = tape.parameter(np.full(4, 0.25, np.float32), name="w")
    error = x * w - 1.0
    loss = (error * error).sum()
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    batch = {x: np.stack([np.arange(4), np.ones(4)]).astype(np.float32)}
    steps = {x: np.ones((3, 4), np.float32)}

    def run(backend):
        # run and run_batch, run_scalars (bind(...).scalars), then a step plan's
        # run_step, run_steps and run (its forward), each compiled or loaded in turn
        plan = network.entry([loss]).lower(backend)
        parameters = network.parameters()
        optimizer = tc.optim.Sgd()
        step = network.entry(adjoints.roots()).lower(backend, optimizer=optimizer)
        trained = network.parameters()
        return {"forward": float(plan.forward(parameters).of(loss)),
                "batch": plan.forward_batch(parameters, batch).of(loss).tolist(),
                "scalars": list(plan.bind(parameters).scalars(np.arange(4, dtype=np.float32))),
                "step": float(step.step(trained, optimizer, None, 0.1)),
                "steps": step.run_steps(trained, optimizer, steps, 0.1).tolist(),
                "run": float(step.forward(trained).of(loss)),
                "key": plan.key}

    expected = run("reference")
    before = compile_stats()  # the numba backend's counts only
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run("numba")
    stats = {k: v - before[k] for k, v in compile_stats().items()}
    print(json.dumps({"stats": stats, "got": got, "expected": expected,
                      "warnings": [str(w.message) for w in caught]}))
""")


def run_every_entry_point(cache: pathlib.Path, numba_dir: pathlib.Path | None = None) -> dict:
    env = dict(os.environ, TENSORCODE_CACHE_DIR=str(cache))
    env.pop("NUMBA_CACHE_DIR", None)
    if numba_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_dir)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", EVERY_ENTRY_POINT], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    got, expected = result["got"], result["expected"]
    for name in ("forward", "batch", "scalars", "step", "steps", "run"):
        assert got[name] == pytest.approx(expected[name], rel=1e-5), name
    return result


class Plant:
    """Creates ``marker`` when unpickled (it pickles as a call of ``open``)."""

    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def numba_index_names(source: pathlib.Path) -> list[str]:
    """The index file names Numba's own ``cache=True`` would read for every function of
    the generated module ``source`` (``<module>.<function>-<line>.pyXY.nbi``)."""
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    names = []
    for line, text in enumerate(source.read_text().splitlines(), start=1):
        if text.startswith("def "):
            function = text[4:text.index("(")]
            names.append(f"{source.stem}.{function}-{line}.{tag}.nbi")
    return names


def plant_numba_indexes(plans: pathlib.Path, source: pathlib.Path, bomb: bytes,
                        numba_dir: pathlib.Path | None) -> None:
    """A pickle bomb at every index Numba would read: beside the source (``__pycache__``)
    and, with ``NUMBA_CACHE_DIR``, where its locator puts them there."""
    from numba.core.caching import _CacheLocator

    places = [plans / "__pycache__"]
    if numba_dir is not None:
        subpath = _CacheLocator.get_suitable_cache_subpath(str(plans / source.name))
        places.append(numba_dir / subpath)
    for place in places:
        place.mkdir(parents=True, exist_ok=True)
        for name in numba_index_names(source):
            (place / name).write_bytes(bomb)


@pytest.fixture(scope="module")
def every_entry(tmp_path_factory):
    """A cache filled by one process that compiled every kind of entry point."""
    cache = tmp_path_factory.mktemp("every-entry") / "cache"
    first = run_every_entry_point(cache)
    assert first["stats"]["compiled"] >= 6 and not first["warnings"], first
    compiled = sorted((cache / "plans" / "__pycache__").glob("*.tcnb"))
    names = {p.name.split(".")[1] for p in compiled}
    assert {"run", "run_batch", "run_scalars", "run_step", "run_steps"} <= names, names
    return cache, first, compiled


def _planted_run_refuses_every_file(cache, numba_dir, marker, planted):
    before = sorted(numba_dir.rglob("*")) if numba_dir is not None else []
    result = run_every_entry_point(cache, numba_dir)
    assert not marker.exists(), "planted compiled code ran"
    assert result["stats"]["untrusted_entries"] == planted, result
    assert len(result["warnings"]) == planted
    assert all("was not used" in w and "recompiling it" in w for w in result["warnings"])
    if numba_dir is not None:  # Numba neither read nor wrote its own cache there
        assert sorted(numba_dir.rglob("*")) == before
    again = run_every_entry_point(cache, numba_dir)  # what was compiled again is trusted
    assert again["stats"]["compiled"] == 0 and not again["warnings"], again
    assert not marker.exists()


@pytest.mark.parametrize("numba_cache_dir", [False, True], ids=["", "NUMBA_CACHE_DIR"])
def test_files_planted_after_a_compile_never_run(every_entry, tmp_path, numba_cache_dir):
    """Every compiled function's file replaced by a pickle bomb (bare, behind the
    genuine header and tag, or behind its recomputed SHA-256), and a bomb at every index
    Numba's own cache would read: each entry point, however late it is compiled, refuses
    its file (one warning each), compiles again and gets the reference's numbers."""
    import shutil

    cache, _, compiled = every_entry
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    marker = tmp_path / "ran"
    bomb = pickle.dumps(Plant(marker))
    for k, original in enumerate(compiled):
        path = copy / "plans" / "__pycache__" / original.name
        genuine = path.read_bytes()
        path.write_bytes([bomb, genuine[:48] + bomb,
                          genuine[:16] + hashlib.sha256(bomb).digest() + bomb][k % 3])
    numba_dir = tmp_path / "numba" if numba_cache_dir else None
    for source in (copy / "plans").glob("*.py"):
        plant_numba_indexes(copy / "plans", source, bomb, numba_dir)
    _planted_run_refuses_every_file(copy, numba_dir, marker, len(compiled))


@pytest.mark.parametrize("numba_cache_dir", [False, True], ids=["", "NUMBA_CACHE_DIR"])
def test_files_planted_before_a_compile_never_run(every_entry, tmp_path, numba_cache_dir):
    """An empty cache where every file a first compile would read is planted first: a
    bomb behind a genuine header (taken from another cache directory), a genuine file
    copied from that directory, and bombs at Numba's own index paths."""
    cache, _, compiled = every_entry
    fresh = tmp_path / "cache"
    pycache = fresh / "plans" / "__pycache__"
    pycache.mkdir(parents=True)
    for directory in (fresh, fresh / "plans", pycache):
        os.chmod(directory, 0o700)
    marker = tmp_path / "ran"
    bomb = pickle.dumps(Plant(marker))
    for k, original in enumerate(compiled):
        genuine = original.read_bytes()
        (pycache / original.name).write_bytes(genuine if k % 2 else genuine[:48] + bomb)
        os.chmod(pycache / original.name, 0o600)
    numba_dir = tmp_path / "numba" if numba_cache_dir else None
    for source in (cache / "plans").glob("*.py"):
        plant_numba_indexes(fresh / "plans", source, bomb, numba_dir)
    _planted_run_refuses_every_file(fresh, numba_dir, marker, len(compiled))


@pytest.mark.parametrize("numba_cache_dir", [False, True], ids=["", "NUMBA_CACHE_DIR"])
def test_files_planted_while_compiling_never_run(tmp_path, monkeypatch, numba_cache_dir):
    """A hook between Numba's compile and the cache's write plants a bomb where the file
    is about to be written and at Numba's own index paths (and under ``NUMBA_CACHE_DIR``
    where it is set), and
    replaces one file just after it was written, behind its genuine header: the write
    tags the bytes in hand (never a file on disk), so the first plant is overwritten and
    the second refused when the next lowering reads it."""
    import warnings

    import numba
    import numpy as np

    import tensorcode as tc
    from tensorcode.compiler.backends import plan_directory
    from tensorcode.compiler.backends import secret as secrets
    from tensorcode.compiler.backends.numba import backend, sealed_cache
    from tensorcode.compiler.plans.plan import compile_stats

    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(secrets.SECRET_ENV, str(tmp_path / "secret" / "key"))
    monkeypatch.setattr(backend, "_MODULES", {})
    monkeypatch.setattr(plan_directory, "_WARNED", set())
    numba_dir = tmp_path / "numba" if numba_cache_dir else None
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(numba_dir) if numba_dir else "")
    marker = tmp_path / "ran"
    bomb = pickle.dumps(Plant(marker))
    written: list[pathlib.Path] = []
    original = sealed_cache.SealedCache.save_overload

    def racing(self, sig, data):
        path, _ = self._locate(sig, data.codegen)
        path.write_bytes(bomb)  # planted where the file is about to be written
        source = pathlib.Path(self._function.__code__.co_filename)
        plant_numba_indexes(source.parent, source, bomb, numba_dir)
        original(self, sig, data)
        written.append(path)
        if len(written) == 2:  # run_batch's, replaced just after it was written
            path.write_bytes(path.read_bytes()[:48] + bomb)

    tape = tc.Tape()
    x = tape.input(np.linspace(-1, 1, 6, dtype=np.float32), name="x")
    y = (x * np.float32(0.375) + np.float32(2.625)).exp()
    network = tape.into_network()
    cases = {x: np.stack([np.linspace(-1, 1, 6), np.ones(6)]).astype(np.float32)}
    expected = network.entry([y]).lower("reference").forward_batch(
        network.parameters(), cases).of(y)

    def lower(between=lambda: None) -> tuple[dict, list[str]]:
        before = compile_stats()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan = network.entry([y]).lower("numba")
            between()  # the plan is prepared and its run loaded; run_batch is not yet
            got = plan.forward_batch(network.parameters(), cases).of(y)
            plan.forward(network.parameters())
        np.testing.assert_allclose(got, expected, rtol=1e-5)
        after = compile_stats()
        return {k: after[k] - before[k] for k in after}, [str(w.message) for w in caught]

    with monkeypatch.context() as hooked:
        hooked.setattr(sealed_cache.SealedCache, "save_overload", racing)
        first, caught = lower()
    assert len(written) == 2 and not caught  # run's file and run_batch's
    assert first["compiled"] >= 2 and first["cache_loaded"] == 0
    assert not marker.exists()
    backend._MODULES.clear()
    second, caught = lower()  # run's file loads; run_batch's is refused and recompiled
    assert not marker.exists(), "planted compiled code ran"
    assert second["cache_loaded"] == 1 and second["compiled"] >= 1
    assert second["untrusted_entries"] == 1 and len(caught) == 1
    assert written[1].name in caught[0] and "authentication tag" in caught[0]
    # planted after the plan was prepared, before its run_batch is first needed in the
    # process: the file is checked when it is read, not when the plan was prepared
    backend._MODULES.clear()
    plan_directory._WARNED.clear()

    def plant_batch() -> None:
        written[1].write_bytes(written[1].read_bytes()[:48] + bomb)

    third, caught = lower(plant_batch)
    assert not marker.exists(), "planted compiled code ran"
    assert third["cache_loaded"] == 1 and third["untrusted_entries"] == 1
    assert len(caught) == 1 and written[1].name in caught[0]
    for place in [tmp_path / "cache" / "plans" / "__pycache__"] + (
            [numba_dir] if numba_dir is not None else []):  # Numba wrote nothing of its own
        assert not [p for p in place.rglob("*") if p.is_file() and p.suffix not in
                    (".nbi", ".tcnb")]

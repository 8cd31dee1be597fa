"""Native plan objects: a process with a warm cache loads a plan's machine code through
llvmlite alone (``native``) and gets the Numba path's results bit for bit, without
importing Numba; a damaged or unusable object is reported and the plan loads through Numba.
Observed through results and compile counters in fresh processes, never through timing."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tensorcode.compiler.backends.numba import native as numba_native

ROOT = pathlib.Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="native plan objects are built on Linux only")

# Two plans: an embedding MLP lowered with Adam (a take, one matrix product large enough for
# BLAS, one small enough for loops, tanh; forward and fused steps) and a plan drawing random
# numbers. Then a feed with an index out of range: the native call reports a failure, and
# the plan re-runs it through Numba for Numba's own error.
SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import tensorcode as tc
    from tensorcode.compiler.plans.plan import compile_stats
    from tensorcode.compiler.lower.schedule import LOOP_MATMUL_LIMIT

    rng = np.random.default_rng(0)
    tape = tc.Tape()
    idx = tape.input(rng.integers(0, 20, (32, 4)).astype(np.int64), name="idx")
    y = tape.input(rng.normal(size=(32, 3)).astype(np.float32), name="y")
    table = tape.parameter(rng.normal(size=(20, 8)).astype(np.float32), name="E")
    w1 = tape.parameter((rng.normal(size=(32, 64)) * 0.2).astype(np.float32), name="w1")
    w2 = tape.parameter((rng.normal(size=(64, 3)) * 0.2).astype(np.float32), name="w2")
    assert 32 * 32 * 64 > LOOP_MATMUL_LIMIT > 32 * 64 * 3  # one BLAS product, one loop
    h = (table.take(idx, axis=0).reshape(32, 32) @ w1).tanh()
    loss = tc.mse(h @ w2, y)
    adjoints = tape.differentiate(loss, [table, w1, w2])

    tape2 = tc.Tape()
    key = tape2.random_key()
    x = tape2.input(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6), name="x")
    drawn = [tc.nn.dropout(x, 0.3, key), tc.random.random_normal(key, (5,), "float64")]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        network = tape.into_network()
        opt = tc.optim.Adam()
        plan = network.entry(adjoints.roots()).lower(optimizer=opt)
        network2 = tape2.into_network()
        plan2 = network2.entry(drawn).lower()

    out = {}
    p = network.parameters()
    run = plan.forward(p)
    out["forward"] = [float(run.of(loss))] + \\
        run.recorded_gradients(adjoints).buffers()["float32"].tolist()
    out["losses"] = [plan.step(p, opt, None, 0.01) for _ in range(3)]
    out["parameters"] = p.buffers()["float32"].tolist()
    run2 = plan2.forward(network2.parameters(), generator=tc.random.Generator(7))
    out["random"] = [run2.of(d).tolist() for d in drawn]
    out["numba_imported"] = "numba" in sys.modules
    try:
        plan.forward(p, {idx: np.full((32, 4), 20, np.int64)})
        out["error"] = None
    except tc.FeedError as error:
        out["error"] = str(error)
    # a long run moves to Numba's entry points: the same numbers
    from tensorcode.compiler.backends.numba.native import HANDOFF_CALLS
    before = float(plan.forward(p).of(loss))
    for _ in range(HANDOFF_CALLS + 1):
        after = float(plan.forward(p).of(loss))
    out["handoff"] = [before, after]
    out["stats"] = compile_stats()
    out["warnings"] = [str(w.message) for w in caught]
    out["modules"] = sorted(m for m in ("numba", "scipy") if m in sys.modules)
    print(json.dumps(out))
""")


def run_script(cache: pathlib.Path) -> dict:
    env = dict(os.environ, TENSORCODE_CACHE_DIR=str(cache))
    env.pop(numba_native.SWITCH, None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _same_results(a: dict, b: dict) -> None:
    for field in ("forward", "losses", "parameters", "random", "error"):
        assert a[field] == b[field], field


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A cold process (Numba compiles, native objects built), then a warm one."""
    cache = tmp_path_factory.mktemp("native-cache")
    cold = run_script(cache)
    warm = run_script(cache)
    return cache, cold, warm


def test_cold_process_builds_native_objects(runs):
    cache, cold, _ = runs
    assert cold["stats"]["compiled"] >= 2 and cold["stats"]["native_built"] == 2, cold["stats"]
    assert cold["numba_imported"]
    plans = cache / "plans"
    assert len(list(plans.glob("p_*.native"))) == 2
    for path in list(plans.glob("p_*.native")) + list(plans.glob("p_*.native.json")):
        assert path.stat().st_mode & 0o077 == 0, path  # readable by the owner alone


def test_warm_process_runs_native_code_without_numba(runs):
    _, cold, warm = runs
    stats = warm["stats"]
    assert not warm["numba_imported"]
    assert stats["native_loaded"] == 2 and stats["compiled"] == 0, stats
    assert stats["native_refused"] == 0 and stats["native_built"] == 0, stats
    assert not warm["warnings"]
    _same_results(cold, warm)  # bit for bit: the same machine code, the same BLAS


def test_native_failure_reruns_through_numba_for_its_error(runs):
    _, cold, warm = runs
    assert cold["error"] is not None and "out of range" in cold["error"]
    assert warm["error"] == cold["error"]
    assert warm["modules"][:1] == ["numba"]  # imported for the re-run only


def test_long_runs_move_to_numba_with_the_same_numbers(runs):
    _, cold, warm = runs
    assert warm["handoff"][0] == warm["handoff"][1] == cold["handoff"][0]


def test_damaged_objects_are_not_used(runs, tmp_path):
    cache, cold, _ = runs
    plans = cache / "plans"
    objects = sorted(plans.glob("p_*.native"), key=lambda p: p.stat().st_size)
    # the smaller object (the random plan) has a byte flipped: its SHA-256 no longer
    # matches, so it is reported as corrupt and rebuilt
    damaged = bytearray(objects[0].read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    objects[0].write_bytes(bytes(damaged))
    # the other manifest names a symbol the object does not define: refused at load
    manifest = objects[1].with_name(objects[1].name + ".json")
    document = json.loads(manifest.read_text())
    document["symbol"] = "cfunc.not_defined_here"
    manifest.write_text(json.dumps(document))
    again = run_script(cache)
    stats = again["stats"]
    assert stats["native_loaded"] == 0, stats
    assert stats["native_refused"] == 1 and stats["corrupt_entries"] == 1, stats
    assert stats["native_built"] == 1 and stats["compiled"] == 0, stats
    assert any("native object" in w for w in again["warnings"]), again["warnings"]
    _same_results(cold, again)


def test_undefined_symbols_reads_elf_only():
    with pytest.raises(ValueError, match="ELF64"):
        numba_native.undefined_symbols(b"MZ\x90\x00" + bytes(100))


def test_loader_names_what_it_cannot_provide():
    runtime = numba_native.runtime()
    assert runtime.missing(["tensorcode_no_such_symbol", "memset"]) == \
        ["tensorcode_no_such_symbol"]


def test_wrapper_source_holds_no_names_from_the_graph():
    import numpy as np

    import tensorcode as tc
    from tensorcode.compiler.lower.program import build as build_program
    from tensorcode.compiler.lower.schedule import build

    tape = tc.Tape()
    x = tape.input(np.ones((2, 3), np.float32), name="x'); import os #")
    w = tape.parameter(np.ones((3, 2), np.float32), name="w\nraise SystemExit")
    loss = (x @ w).sum()
    network = tape.into_network()
    graph, sources = network.entry([loss]).optimized()
    source = numba_native.wrapper_source(build_program(build(graph, sources)))
    assert "import" not in source and "SystemExit" not in source
    compile(source, "<wrapper>", "exec")

"""The ahead-of-time plan cache, observed through compile counters in fresh processes
(never through timing)."""

from __future__ import annotations

import json
import os
import pathlib
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
    damaged = list((copy / "plans" / "__pycache__").glob(f"p_{first['key']}.run-*.nbi"))
    assert damaged
    for f in damaged:
        f.write_bytes(f.read_bytes()[:10])
    result = run_script(copy)  # numba recompiles (or we rebuild): the value is right
    assert result["stats"]["compiled"] >= 1
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

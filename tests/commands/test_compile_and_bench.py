"""``tensorcode compile`` and ``tensorcode bench``."""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode import cli
from tensorcode.commands.bench import find_root


def test_compile_warms_saved_plans(tmp_path, capsys):
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [2, 4, 1], "tanh", init=tc.init.xavier(0))
    error = mlp(tape.input(np.ones((3, 2), np.float32), name="x")) - 1.0
    adjoints = tape.differentiate((error * error).sum(), mlp.parameters())
    network = tape.into_network()
    network.entry(adjoints.roots()).lower("reference").save(tmp_path / "plans" / "a")
    code = cli.main(["compile", str(tmp_path / "plans"), "--backend", "reference",
                     "--describe"])
    out = capsys.readouterr().out
    assert code == 0
    assert "plans/a: ready" in out and "kernel 0" in out


def test_compile_names_what_is_not_a_plan(tmp_path, capsys):
    assert cli.main(["compile", str(tmp_path)]) == 1
    assert "no plan.json" in capsys.readouterr().err
    bogus = tmp_path / "bogus.json"
    bogus.write_text("{}")
    assert cli.main(["compile", str(bogus)]) == 1


def test_bench_needs_a_checkout(tmp_path, capsys):
    assert cli.main(["bench", "--root", str(tmp_path)]) == 1
    assert "no benchmarks/ folder" in capsys.readouterr().err
    assert (find_root(None) / "benchmarks" / "harness.py").is_file()


def test_the_compile_then_run_example(tmp_path):
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, TENSORCODE_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, str(root / "examples" / "compile_then_run.py")],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "== after lowering ==" in result.stdout
    assert "-> cache hit" in result.stdout

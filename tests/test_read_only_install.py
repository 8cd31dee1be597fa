"""Nothing the package runs writes outside the plan cache: a copy of the package, made
read-only, runs an optimizer step, random draws (host and in a plan), a plan compile and
a fused step in a fresh process; afterwards the copy holds exactly the files it held
before, and Numba's user-wide cache (its fallback when a source's own directory cannot
be written) is empty. Python's own bytecode cache is switched off for the run: it is the
interpreter's, not the package's."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess
import sys

import tensorcode

WORK = """
import numpy as np
import tensorcode as tc

generator = tc.random.Generator(7)
generator.permutation(10)                                   # a host draw
tape = tc.Tape()
key = tape.random_key()
x = tape.input(np.ones((4, 6), np.float32), name="x")
draws = [tc.random.random_uniform(key, (2, 3)), tc.random.random_normal(key, (5,), "float64"),
         tc.random.bernoulli(key, 0.25, (8,)), tc.nn.dropout(x, 0.5),
         tc.random.categorical(key, x * 3.0, temperature=0.8, top_k=3)]
drawing = tape.into_network()
drawing.entry(draws).lower().forward(drawing.parameters(), generator=generator)

tape = tc.Tape()
x = tape.input(np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1), name="x")
mlp = tc.nn.Mlp(tape, [1, 4, 1], activation="tanh", init=tc.init.xavier(1))
adjoints = tape.differentiate((mlp(x) ** 2).mean(), mlp.parameters())
network = tape.into_network()
plan = network.entry(adjoints.roots()).lower()              # a plan compile
parameters = network.parameters()
gradients = plan.forward(parameters).recorded_gradients(adjoints)
adam = tc.optim.Adam(parameters, lr=1e-3)
parameters = adam.step(parameters, gradients, 1e-3)         # an eager optimizer step
sgd = tc.optim.Sgd(momentum=0.9)
network.entry(adjoints.roots()).lower(optimizer=sgd).step(parameters.clone(), sgd, None, 0.01)
network.entry(adjoints.roots()).lower("numba").forward(parameters)  # a Numba compile
print("done")
"""


def _listing(root: pathlib.Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def _read_only(root: pathlib.Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_a_read_only_copy_of_the_package_is_never_written(tmp_path):
    source = pathlib.Path(tensorcode.__file__).resolve().parent
    site = tmp_path / "site"
    shutil.copytree(source, site / "tensorcode",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _read_only(site)
    before = _listing(site)
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PYTHON"))}
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", HOME=str(home),
               XDG_CACHE_HOME=str(home / ".cache"), TENSORCODE_CACHE_DIR=str(cache))
    try:
        done = subprocess.run([sys.executable, "-c", WORK], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip().endswith("done")
        after = _listing(site)
        assert after == before, sorted(set(after) ^ set(before))[:20]
        assert [p for p in home.rglob("*") if p.is_file()] == []
        # the work really compiled and cached: the plan cache holds it
        assert any((cache / "plans").glob("p_*.py"))        # the numba plan
        # llvm objects: the draws, the gradient plan, the eager update, the step plan
        assert len(list((cache / "plans").glob("l_*.o"))) == 4
    finally:
        for path in [site, *site.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)

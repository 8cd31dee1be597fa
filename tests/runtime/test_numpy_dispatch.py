"""The promised equalities hold whichever SIMD kernels NumPy dispatches to.

The reference backend computes with NumPy, which picks CPU-specific kernels for ``power``,
``exp``, ``log``, ``tanh``... at import (AVX-512 kernels differ from AVX2's and from the C
library's). The tests that hold the reference to the compiled backends (bit for bit
through correctly rounded ops, within a few ulps through transcendental ones, bit for bit
for random draws) run in this process with NumPy's dispatch as the machine offers it, and
here again in a process with every dispatched feature the machine has disabled
(``NPY_DISABLE_CPU_FEATURES``), so an AVX2 machine checks what an AVX-512 one computes
differently, and the other way round."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the tests that compare the reference with the compiled backends under the promise
PROMISE_TESTS = [
    "tests/runtime/test_optim.py::test_compiled_loop_equals_reference_as_promised",
    "tests/runtime/test_optim_unreached.py::test_compiled_and_reference_skip_alike",
    "tests/compiler/trace/test_random_ops.py",
]


def _dispatch_tables() -> tuple[list[str], dict[str, bool]]:
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # NumPy 1.x
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    return list(umath.__cpu_dispatch__), dict(umath.__cpu_features__)


def test_dispatched_features_can_be_named():
    dispatch, features = _dispatch_tables()
    assert dispatch, "NumPy reports no dispatch targets"
    assert all(isinstance(features.get(name, False), bool) for name in dispatch)


def test_promises_hold_with_numpy_dispatch_limited():
    dispatch, features = _dispatch_tables()
    on_this_cpu = [name for name in dispatch if features.get(name)]
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(on_this_cpu),
               PYTHONPATH=str(ROOT))
    env.pop("PYTEST_XDIST_WORKER", None)
    check = subprocess.run(
        [sys.executable, "-c", "import numpy; print(float(numpy.power(0.9, 12.0)).hex())"],
        env=env, capture_output=True, text=True, timeout=120)
    # with every dispatched kernel off NumPy's power is the C library's
    assert check.returncode == 0, check.stderr
    assert float.fromhex(check.stdout.strip()) == math.pow(0.9, 12.0)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *PROMISE_TESTS],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and " failed" not in run.stdout

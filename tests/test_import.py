"""``import tensorcode`` stays light: no numba, torch, jax or matplotlib."""

from __future__ import annotations

import subprocess
import sys


def test_import_does_not_load_heavy_modules():
    code = ("import sys, tensorcode; "
            "print(sorted(m for m in ('numba', 'llvmlite', 'torch', 'jax', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

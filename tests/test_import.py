"""``import tensorcode`` stays light: no numba, scipy, torch, jax or matplotlib, and (every
public name but the errors loading on first use) not even NumPy or the compiler; every
public name still resolves."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tensorcode


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip().splitlines()[-1]


def test_import_does_not_load_heavy_modules():
    code = ("import sys; before = set(sys.modules); import tensorcode, json; "
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    loaded = json.loads(_fresh(code))
    for heavy in ("numba", "llvmlite", "scipy", "torch", "jax", "matplotlib", "numpy"):
        assert not any(m == heavy or m.startswith(heavy + ".") for m in loaded), (heavy, loaded)
    # what the import runs of TensorCode itself: the package and its error hierarchy
    assert sorted(m for m in loaded if m.startswith("tensorcode")) == \
        ["tensorcode", "tensorcode.errors"]


def test_first_name_loads_the_compiler_but_not_numba():
    code = ("import sys, json, tensorcode; tensorcode.Tape; "
            "print(json.dumps(sorted(m for m in ('numpy', 'numba', 'scipy', 'torch', "
            "'tensorcode.compiler.trace.tape') if m in sys.modules)))")
    assert json.loads(_fresh(code)) == ["numpy", "tensorcode.compiler.trace.tape"]


@pytest.mark.parametrize("name", tensorcode.__all__)
def test_every_public_name_resolves(name):
    namespace: dict = {}
    exec(f"from tensorcode import {name}", namespace)  # the statement users write
    assert namespace[name] is getattr(tensorcode, name)
    assert name in dir(tensorcode)


def test_lazy_names_are_the_defining_modules_objects():
    from tensorcode.compiler.plans.tape import Tape
    from tensorcode.runtime import optim

    assert tensorcode.Tape is Tape
    assert tensorcode.optim is optim


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Tapes'"):
        tensorcode.Tapes  # noqa: B018
    with pytest.raises(ImportError):
        exec("from tensorcode import Tapes", {})
    assert not hasattr(tensorcode, "Tapes")

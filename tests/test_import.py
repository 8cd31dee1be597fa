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
    # what the import runs of TensorCode itself: the package, its error hierarchy and the
    # one-line module that holds its version
    assert sorted(m for m in loaded if m.startswith("tensorcode")) == \
        ["tensorcode", "tensorcode.errors", "tensorcode.version"]


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
    import tensorcode.optim
    from tensorcode.compiler.plans.tape import Tape

    assert tensorcode.Tape is Tape
    assert tensorcode.optim is sys.modules["tensorcode.optim"]


#: the public module -> the module that implements it (the public one re-exports its __all__)
SURFACE_MODULES = {"optim": "tensorcode.runtime.optim",
                   "checkpoint": "tensorcode.runtime.checkpoint",
                   "random": "tensorcode.runtime.random", "init": "tensorcode.nn.init",
                   "training": "tensorcode.training", "tools": "tensorcode.tools"}


@pytest.mark.parametrize("name", sorted(SURFACE_MODULES))
def test_surface_modules_import_like_torch_optim(name):
    """``import tensorcode.optim`` works (as ``import torch.optim`` does), and in a fresh
    process ``tc.training`` resolves without importing it by hand."""
    code = (f"import tensorcode.{name} as m, tensorcode as tc, sys; "
            f"print(m is tc.{name} is sys.modules['tensorcode.{name}'])")
    assert _fresh(code) == "True"
    code = f"import tensorcode as tc; print(tc.{name}.__name__)"
    assert _fresh(code) == f"tensorcode.{name}"


@pytest.mark.parametrize("name", sorted(SURFACE_MODULES))
def test_surface_modules_export_their_implementations_names(name):
    import importlib

    public = importlib.import_module(f"tensorcode.{name}")
    home = importlib.import_module(SURFACE_MODULES[name])
    assert public.__all__ == home.__all__ and public.__all__
    for attribute in public.__all__:
        assert getattr(public, attribute) is getattr(home, attribute), attribute


def test_tc_init_is_the_short_spelling_of_tc_nn_init():
    assert tensorcode.init.xavier is tensorcode.nn.init.xavier
    assert tensorcode.init.__all__ == tensorcode.nn.init.__all__


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Tapes'"):
        tensorcode.Tapes  # noqa: B018
    with pytest.raises(ImportError):
        exec("from tensorcode import Tapes", {})
    assert not hasattr(tensorcode, "Tapes")

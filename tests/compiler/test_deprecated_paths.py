"""The compiler's import paths from before its layers still import, each warning that it
is removed in 0.2.0 and naming the new home, and each gives the new home's objects."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: old path -> (the new module it names, one name it re-exports)
OLD_PATHS = {
    "tensorcode.compiler.plan": ("tensorcode.compiler.plans.plan", "Plan"),
    "tensorcode.compiler.primitives": ("tensorcode.compiler.core.registry", "REGISTRY"),
    "tensorcode.compiler.verify": ("tensorcode.compiler.core.verify", "verify"),
    "tensorcode.compiler.autodiff": ("tensorcode.compiler.trace.backward", "record_backward"),
    "tensorcode.compiler.backends.numba_cache": ("tensorcode.compiler.backends.plan_directory",
                                                 "plans_directory"),
}


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_compiler_path_warns_naming_the_release_and_the_new_home(old):
    new, name = OLD_PATHS[old]
    code = ("import warnings, importlib\n"
            "warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n"
            f"    importlib.import_module({old!r})\n"
            "except DeprecationWarning as warning:\n"
            "    print('warned:', warning)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    assert f"warned: {old} is deprecated (removed in 0.2.0)" in out
    assert new in out


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_compiler_path_gives_the_new_homes_objects(old):
    import importlib
    import warnings

    new, name = OLD_PATHS[old]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)

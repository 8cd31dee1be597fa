"""``plans.lower(entry, ...)`` is how an entry becomes a plan; ``entry.lower(...)`` is a
thin call into it, with the same checks and defaults."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler import plans
from tensorcode.compiler.plans import network as network_module
from tensorcode.errors import BackendError


def _entry():
    tape = tc.Tape()
    w = tape.parameter(np.arange(6, dtype=np.float64).reshape(2, 3) / 10, name="w")
    x = tape.input(np.ones((4, 2)), name="x")
    y = (x @ w).tanh().sum()
    return tape.into_network(), y


def test_lower_is_a_plain_function_entry_lower_calls():
    network, y = _entry()
    entry = network.entry([y])
    direct = plans.lower(entry, "reference")
    through = entry.lower("reference")
    parameters = network.parameters()
    assert direct.backend == through.backend == "reference"
    assert direct.forward(parameters).of(y) == through.forward(parameters).of(y)
    assert direct.schedule.describe() == through.schedule.describe()


def test_lower_checks_the_backend_before_any_work():
    network, y = _entry()
    with pytest.raises(BackendError, match="unknown backend 'fortran'"):
        plans.lower(network.entry([y]), "fortran")


def test_the_exact_math_default_comes_from_the_environment(monkeypatch):
    network, y = _entry()
    monkeypatch.setenv("TENSORCODE_EXACT_MATH", "1")
    assert plans.lower(network.entry([y]), "llvm").approximate is False
    monkeypatch.delenv("TENSORCODE_EXACT_MATH")
    assert plans.lower(network.entry([y]), "llvm").approximate is True


def test_no_lowering_is_installed_at_import():
    assert not hasattr(network_module, "install_lowering")
    assert not hasattr(network_module, "_lowering")

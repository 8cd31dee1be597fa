"""An array a bound plan has already seen can change in place: its strides, its shape or
its dtype (``a.strides = ...``, ``a.shape = ...``, ``a.dtype = ...``). Each call checks
the array again (contiguity, shape, dtype), so the change is a ``FeedError`` on every
bound path, never a remembered pointer reading the wrong elements; ``forward`` reads
the changed array as its values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.backends import BACKENDS
from tensorcode.errors import FeedError


def _bound(backend):
    tape = tc.Tape()
    w = tape.parameter(np.array([1.0, 1.0, 1.0, 1.0]))
    x = tape.input(np.zeros(4))
    y = (x * w).mean()
    network = tape.into_network()
    plan = network.entry([y]).lower(backend)
    return plan, plan.bind(network.parameters()), network.parameters(), x, y


def _set(array, attribute, value):
    with warnings.catch_warnings():  # NumPy 2.4 deprecates setting strides in place
        warnings.simplefilter("ignore", DeprecationWarning)
        setattr(array, attribute, value)


@pytest.mark.parametrize("change", ["strides", "shape", "dtype"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_layout_changed_in_place_is_refused_on_every_path(backend, change):
    plan, bound, parameters, x, y = _bound(backend)
    buffer = np.arange(8.0)
    view = buffer[:4]
    for _ in range(3):  # seen and remembered
        assert float(bound(view)[0]) == pytest.approx(1.5)
        assert float(plan.forward(parameters, {x: view}).of(y)) == pytest.approx(1.5)
    if change == "strides":
        _set(view, "strides", (16,))  # now elements 0, 2, 4, 6 of the buffer
        assert view.tolist() == [0.0, 2.0, 4.0, 6.0]
    elif change == "shape":
        _set(view, "shape", (2, 2))
    else:
        _set(view, "dtype", np.int64)
    with pytest.raises(FeedError):
        bound(view)
    if change == "strides":
        # forward reads any array as its values (converting a strided one): the right
        # answer, as a fresh contiguous copy gives on the bound path
        assert float(plan.forward(parameters, {x: view}).of(y)) == pytest.approx(3.0)
        assert float(bound(np.ascontiguousarray(view))[0]) == pytest.approx(3.0)
    else:
        with pytest.raises(FeedError):
            plan.forward(parameters, {x: view})

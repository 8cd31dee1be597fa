"""Parameter tables: order, read-only payloads, flat buffers, step, clone."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import DTypeError, ShapeError


def network_with_mixed_dtypes():
    tape = tc.Tape()
    a = tape.parameter(np.ones((2, 2), np.float32), name="a")
    b = tape.parameter(np.float64(3.0), name="b")
    c = tape.parameter(np.arange(3, dtype=np.float32), name="c")
    loss = a.sum() + c.sum() + b.astype("float32")
    adjoints = tape.differentiate(loss, [a, b, c])
    return tape.into_network(), (a, b, c), adjoints


def test_payloads_are_views_into_one_buffer_per_dtype():
    network, (a, b, c), _ = network_with_mixed_dtypes()
    table = network.parameters()
    buffers = table.buffers()
    assert set(buffers) == {"float32", "float64"}
    assert buffers["float32"].shape == (7,)
    assert np.shares_memory(table.of(c), buffers["float32"])
    np.testing.assert_array_equal(buffers["float32"][4:], [0, 1, 2])
    assert [p.shape for p in table.payloads()] == [(2, 2), (), (3,)]


def test_payloads_are_read_only_and_fresh_each_call():
    network, (a, b, c), _ = network_with_mixed_dtypes()
    first = network.parameters()
    with pytest.raises(ValueError):
        first.of(a)[0, 0] = 5.0
    second = network.parameters()
    assert not np.shares_memory(first.of(a), second.of(a))


def test_clones_are_independent():
    network, (a, b, c), adjoints = network_with_mixed_dtypes()
    table = network.parameters()
    clone = table.clone()
    run = network.forward(table)
    stepped = clone.step(run.recorded_gradients(adjoints), lambda p, g: p - g)
    np.testing.assert_array_equal(table.of(a), np.ones((2, 2)))
    np.testing.assert_array_equal(clone.of(a), np.ones((2, 2)))
    np.testing.assert_array_equal(stepped.of(a), np.zeros((2, 2)))
    assert clone.equals(table) and not stepped.equals(table)


def test_step_calls_rule_once_per_slot_in_order():
    network, (a, b, c), adjoints = network_with_mixed_dtypes()
    table = network.parameters()
    grads = network.forward(table).recorded_gradients(adjoints)
    seen = []
    table.step_each(grads, lambda symbol, p, g: seen.append(symbol) or p)
    assert seen == [a, b, c]
    shapes = []
    table.step(grads, lambda p, g: shapes.append(p.shape) or p)
    assert shapes == [(2, 2), (), (3,)]


def test_step_rejects_wrong_shapes_and_kinds():
    network, (a, b, c), adjoints = network_with_mixed_dtypes()
    table = network.parameters()
    grads = network.forward(table).recorded_gradients(adjoints)
    with pytest.raises(ShapeError, match='parameter "a": expected shape \\[2, 2\\]'):
        table.step(grads, lambda p, g: np.zeros(5))
    with pytest.raises(DTypeError, match='expected float32, got complex'):
        table.step(grads, lambda p, g: p.astype(np.complex64))


def test_step_keeps_slot_dtypes():
    network, (a, b, c), adjoints = network_with_mixed_dtypes()
    table = network.parameters()
    grads = network.forward(table).recorded_gradients(adjoints)
    stepped = table.step(grads, lambda p, g: p - g * np.float64(0.1))
    assert stepped.of(a).dtype == np.float32 and stepped.of(b).dtype == np.float64

"""Gradient tables add, subtract, scale by a scalar and sum; nothing else combines."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import DTypeError, ShapeError, TensorCodeError


def mixed_network():
    """Slots of two dtypes, so every dtype's buffer is exercised."""
    tape = tc.Tape()
    a = tape.parameter(np.ones((2, 2), np.float32), name="a")
    b = tape.parameter(np.float64(3.0), name="b")
    c = tape.parameter(np.arange(3, dtype=np.float32), name="c")
    x = tape.input(np.float32(1.0), name="x")
    loss = (a * x).sum() + (c * c * x).sum() + (b * b).astype("float32") * x
    adjoints = tape.differentiate(loss, [a, b, c])
    return tape.into_network(), (a, b, c, x), adjoints


@pytest.fixture(scope="module")
def tables():
    network, (a, b, c, x), adjoints = mixed_network()
    parameters = network.parameters()
    g1 = network.forward(parameters, {x: 1.0}).recorded_gradients(adjoints)
    g2 = network.forward(parameters, {x: 2.5}).recorded_gradients(adjoints)
    return network, parameters, (a, b, c), g1, g2


def payloads(table):
    return [np.array(p) for p in table.payloads()]


def test_add_subtract_negate_per_slot_keep_dtypes(tables):
    _, _, _, g1, g2 = tables
    for result, expected in [(g1 + g2, [p + q for p, q in zip(payloads(g1), payloads(g2))]),
                             (g1 - g2, [p - q for p, q in zip(payloads(g1), payloads(g2))]),
                             (-g1, [-p for p in payloads(g1)])]:
        assert isinstance(result, tc.Gradients) and result.layout is g1.layout
        for got, want in zip(result.payloads(), expected):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    # a new table each time: the operands are untouched and the result is read-only
    assert not np.shares_memory((g1 + g2).buffers()["float32"], g1.buffers()["float32"])
    with pytest.raises(ValueError):
        (g1 + g2).buffers()["float32"][0] = 1.0


def test_scalar_multiply_keeps_each_dtype(tables):
    _, _, (a, b, c), g1, _ = tables
    for scalar in (0.5, 2, np.float64(0.1), np.float32(0.1), np.array(3.0)):
        for scaled in (g1 * scalar, scalar * g1):
            assert scaled.of(a).dtype == np.float32 and scaled.of(b).dtype == np.float64
            # float32 slots are scaled in float32 (the scalar is cast first), like NumPy 2
            want = np.asarray(g1.of(c)) * np.float32(np.asarray(scalar))
            np.testing.assert_array_equal(scaled.of(c), want)
            np.testing.assert_array_equal(scaled.of(b), g1.of(b) * np.float64(scalar))


def test_builtin_sum_over_tables_of_one_layout(tables):
    _, _, _, g1, g2 = tables
    total = sum([g1, g2, g1])
    assert isinstance(total, tc.Gradients)
    for got, p, q in zip(total.payloads(), payloads(g1), payloads(g2)):
        np.testing.assert_array_equal(got, p + q + p)
    single = sum([g1])
    assert single is not g1 and single.equals(g1)


def test_refusals_name_what_to_do(tables):
    network, parameters, _, g1, _ = tables
    with pytest.raises(TensorCodeError, match=r"parameters\.step"):
        parameters + g1
    with pytest.raises(TensorCodeError, match=r"parameters\.step"):
        g1 + parameters
    with pytest.raises(TensorCodeError, match="scalar"):
        g1 * g1
    with pytest.raises(ShapeError, match=r"shape \[2\]"):
        g1 * np.array([1.0, 2.0])
    with pytest.raises(TensorCodeError, match="real scalar"):
        g1 * "2"
    with pytest.raises(TensorCodeError, match="real scalar"):
        g1 * True
    with pytest.raises(TensorCodeError, match="refused"):
        g1 + 1.0
    with pytest.raises(TensorCodeError, match="refused"):
        g1 + np.zeros(7, np.float32)
    with pytest.raises(TensorCodeError, match="refused"):
        1 - g1
    with pytest.raises(TensorCodeError, match="refused"):
        2 / g1
    with pytest.raises(TensorCodeError, match="refused"):
        g1 / g1
    with pytest.raises(TensorCodeError, match="division by zero"):
        g1 / 0
    with pytest.raises(TensorCodeError, match="real scalar"):
        g1 / "2"


def test_division_by_a_scalar_is_scaling_by_its_reciprocal(tables):
    _, _, (a, b, c), g1, g2 = tables
    for n in (2, 3, 4.0, np.float32(3.0), np.array(7.0)):
        divided = g1 / n
        assert divided.layout is g1.layout
        for got, reference in zip(divided.payloads(), (g1 * (1 / n)).payloads()):
            assert got.dtype == reference.dtype
            np.testing.assert_allclose(got, reference, rtol=1e-6)
    mean = sum([g1, g2]) / 2  # the mean of two shards, as the guide writes it
    np.testing.assert_allclose(mean.of(c), (np.asarray(g1.of(c)) + g2.of(c)) / 2, rtol=1e-6)


def test_tables_of_another_layout_are_refused(tables):
    _, _, _, g1, _ = tables
    twin, (_, _, _, x), adjoints = mixed_network()  # same shapes, another network
    other = twin.forward(twin.parameters(), {x: 1.0}).recorded_gradients(adjoints)
    with pytest.raises(TensorCodeError, match="different networks"):
        g1 + other
    with pytest.raises(TensorCodeError, match="different networks"):
        sum([g1, other])
    tape = tc.Tape()
    w = tape.parameter(np.ones(3, np.float32))
    adjoints = tape.differentiate((w * w).sum(), [w])
    small = tape.into_network()
    third = small.forward(small.parameters()).recorded_gradients(adjoints)
    with pytest.raises(ShapeError, match="layouts differ"):
        g1 - third


def test_integer_slots_scale_only_by_integers():
    tape = tc.Tape()
    k = tape.parameter(np.arange(2, dtype=np.int64), name="k")
    w = tape.parameter(np.ones(2, np.float32), name="w")
    network = tape.into_network()
    # an integer slot has no gradient to record; a table built by hand can still hold one
    grads = tc.Gradients.from_payloads(network.layout, [np.array([1, 2]), np.ones(2)])
    doubled = grads * 2
    assert doubled.of(k).dtype == np.int64 and doubled.of(w).dtype == np.float32
    np.testing.assert_array_equal(doubled.of(k), [2, 4])
    with pytest.raises(DTypeError, match="int64"):
        grads * 0.5

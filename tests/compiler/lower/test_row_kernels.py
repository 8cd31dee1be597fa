"""Layer norms found by pattern: one kernel, whatever wrote the graph, and the same
numbers as the fused kernels it replaces."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.lower import schedule as schedule_module

#: the search's default, read before any test turns it on
DEFAULT = schedule_module.FUSED_PATTERNS


@pytest.fixture(autouse=True)
def patterns_on(monkeypatch):
    """The search is off by default (``schedule.FUSED_PATTERNS``); these tests turn it on."""
    monkeypatch.setattr(schedule_module, "FUSED_PATTERNS", True)


def test_the_search_is_off_by_default(monkeypatch):
    assert DEFAULT is False
    monkeypatch.setattr(schedule_module, "FUSED_PATTERNS", DEFAULT)
    network, y, loss, adjoints, _ = _program((6, 40))
    assert "layer_norm" not in _kinds(network.entry([y]).lower("llvm"))


def _program(shape, dtype="float32", how="composite", seed=0):
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    x = tape.parameter(rng.standard_normal(shape).astype(dtype), name="x")
    target = tape.input(rng.standard_normal(shape).astype(dtype), name="t")
    if how == "composite":
        y = tc.layer_norm(x)
        params = [x]
    elif how == "module":
        norm = tc.nn.LayerNorm(tape, shape[-1], dtype=dtype, name="ln")
        y = norm(x)
        params = [x] + norm.parameters()
    else:  # written by hand, eps first
        with tape.broadcasting("numpy"):
            centered = x - x.mean(axis=-1, keepdims=True)
            variance = (centered * centered).mean(axis=-1, keepdims=True)
            y = centered / (1e-5 + variance).sqrt()
        params = [x]
    loss = (tc.tanh(y) * target).sum()
    adjoints = tape.differentiate(loss, params)
    return tape.into_network(), y, loss, adjoints, params


def _kinds(plan):
    return [k.kind for k in plan.schedule.kernels]


@pytest.mark.parametrize("how", ["composite", "module", "hand"])
def test_a_layer_norm_is_one_kernel_whatever_wrote_it(how):
    network, y, loss, adjoints, _ = _program((6, 40), how=how)
    plan = network.entry([y]).lower("llvm")
    assert _kinds(plan).count("layer_norm") == 1
    (kernel,) = [k for k in plan.schedule.kernels if k.kind == "layer_norm"]
    assert (kernel.gain is not None) == (how == "module")
    assert "fused reduction" not in {k.headline() for k in plan.schedule.kernels}


def test_near_misses_keep_the_fused_kernels():
    tape = tc.Tape()
    x = tape.parameter(np.ones((6, 40), np.float32), name="x")
    with tape.broadcasting("numpy"):
        centered = x - x.mean(axis=0, keepdims=True)  # over rows, not the last axis
        variance = (centered * centered).mean(axis=0, keepdims=True)
        y = centered / (variance + 1e-5).sqrt()
        other = x - x.mean(axis=-1, keepdims=True)
        z = other / ((other * other).sum(axis=-1, keepdims=True) + 1e-5).sqrt()  # a sum
    network = tape.into_network()
    plan = network.entry([y, z]).lower("llvm")
    assert "layer_norm" not in _kinds(plan)


def _outputs(plan, network, roots, feeds=None):
    run = plan.forward(network.parameters(), feeds)
    return [np.asarray(run.of(r)) for r in roots]


@pytest.fixture
def unfused(monkeypatch):
    def lower(network, roots, backend):
        monkeypatch.setattr(schedule_module, "FUSED_PATTERNS", False)
        try:
            return network.entry(roots).lower(backend)
        finally:
            monkeypatch.setattr(schedule_module, "FUSED_PATTERNS", True)
    return lower


def _assert_the_fused_kernels_bits(network, roots, kind, unfused):
    """The ``kind`` kernel found by pattern gives the bits of today's kernels on llvm and
    numba (equal to each other, close to the reference, the same when lowered again)."""
    reference = _outputs(network.entry(roots).lower("reference"), network, roots)
    found = {}
    for backend in ("llvm", "numba"):
        plan = network.entry(roots).lower(backend)
        assert kind in _kinds(plan)
        before = unfused(network, roots, backend)
        assert kind not in _kinds(before)
        found[backend] = _outputs(plan, network, roots)
        for a, b, r in zip(found[backend], _outputs(before, network, roots), reference):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_allclose(a, r, rtol=2e-4, atol=2e-5)
    for a, b in zip(found["llvm"], found["numba"]):
        np.testing.assert_array_equal(a, b)
    again = _outputs(network.entry(roots).lower("llvm"), network, roots)
    for a, b in zip(found["llvm"], again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 40), (40,)])
@pytest.mark.parametrize("how", ["composite", "module"])
def test_the_kernel_computes_the_fused_kernels_bits_on_both_backends(shape, how, unfused):
    network, y, loss, adjoints, _ = _program(shape, how=how)
    _assert_the_fused_kernels_bits(network, [y, loss] + adjoints.roots(), "layer_norm",
                                   unfused)


@pytest.mark.parametrize("shape", [(3, 7), (2, 20)])
def test_gradients_through_the_kernel_match_finite_differences(shape):
    network, y, loss, adjoints, params = _program(shape, dtype="float64", how="module", seed=3)
    plan = network.entry([loss] + adjoints.roots()).lower("llvm")
    assert "layer_norm" in _kinds(plan)
    forward = network.entry([loss]).lower("llvm")
    parameters = network.parameters()
    run = plan.forward(parameters)
    for p in params:
        analytic = np.asarray(run.of(adjoints.of(p)))
        base = np.array(parameters.of(p))
        numeric = np.zeros_like(base)
        h = 1e-6
        for index in np.ndindex(base.shape):
            for sign in (1, -1):
                shifted = base.copy()
                shifted[index] += sign * h
                value = forward.forward(parameters.replace({p: shifted})).of(loss)
                numeric[index] += sign * float(value) / (2 * h)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-7)


def _softmax_program(shape, dtype="float32", how="softmax", seed=0):
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    x = tape.parameter(rng.standard_normal(shape).astype(dtype), name="x")
    if how == "softmax":
        y = tc.softmax(x * 2.0)
        target = tape.input(rng.standard_normal(shape).astype(dtype), name="t")
        loss = (y * target).sum()
    elif how == "masked":  # attention's scores: scaled, causal mask, softmax
        mask = np.tril(np.ones(shape[-2:], bool))
        with tape.broadcasting("numpy"):
            scores = tc.where(tape.leaf(mask), x * 0.25, -1e9)
        y = tc.softmax(scores)
        loss = (y * y).sum()
    else:  # cross-entropy: a log-sum-exp
        labels = tape.input(rng.integers(0, shape[-1], shape[:1]), name="labels")
        y = tc.cross_entropy(x, labels)
        loss = y
    adjoints = tape.differentiate(loss, [x])
    return tape.into_network(), y, loss, adjoints, [x]


@pytest.mark.parametrize("shape,how", [((6, 40), "softmax"), ((3, 9), "softmax"),
                                       ((2, 3, 20, 20), "masked"), ((7, 33), "cross"),
                                       ((4, 5), "cross")])
def test_softmaxes_compute_the_fused_kernels_bits_on_both_backends(shape, how, unfused):
    network, y, loss, adjoints, _ = _softmax_program(shape, how=how)
    _assert_the_fused_kernels_bits(network, [y, loss] + adjoints.roots(), "softmax", unfused)


@pytest.mark.parametrize("how", ["softmax", "cross"])
def test_gradients_through_a_softmax_match_finite_differences(how):
    network, y, loss, adjoints, params = _softmax_program((3, 18), "float64", how, seed=5)
    plan = network.entry([loss] + adjoints.roots()).lower("llvm")
    assert "softmax" in _kinds(plan)
    forward = network.entry([loss]).lower("llvm")
    parameters = network.parameters()
    (p,) = params
    analytic = np.asarray(plan.forward(parameters).of(adjoints.of(p)))
    base = np.array(parameters.of(p))
    numeric = np.zeros_like(base)
    h = 1e-6
    for index in np.ndindex(base.shape):
        for sign in (1, -1):
            shifted = base.copy()
            shifted[index] += sign * h
            value = forward.forward(parameters.replace({p: shifted})).of(loss)
            numeric[index] += sign * float(value) / (2 * h)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-7)

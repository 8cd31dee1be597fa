"""Every differentiable op's gradient against central finite differences in float64.

Each case records a small program over parameters, differentiates ``sum(out * w)`` for a
random weight ``w``, and checks three things agree: the recorded adjoints (IR), the
runtime backward (eager, same VJP rules) and finite differences. Shapes come from
hypothesis; values from a seeded generator so kinks and ties are kept away.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorcode as tc
from tensorcode.compiler.core import registry as primitives

EPS = 1e-6


def _values(rng, shape, kind="any"):
    u = rng.uniform(0.2, 1.2, size=shape)
    if kind == "positive":
        return u
    sign = np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0)
    return sign * u


def check_gradients(arrays, fn, seed=0, rtol=1e-5, atol=1e-7):
    """Record ``fn`` over parameters holding ``arrays`` and compare gradients."""
    rng = np.random.default_rng(seed + 1)
    tape = tc.Tape()
    params = [tape.parameter(np.asarray(a, np.float64)) for a in arrays]
    out = fn(tape, *params)
    weights = tape.leaf(rng.uniform(-1.0, 1.0, size=out.shape))
    loss = (out * weights).sum()
    adjoints = tape.differentiate(loss, params)
    network = tape.into_network()
    table = network.parameters()
    run = network.forward(table)
    recorded = run.recorded_gradients(adjoints)
    eager = run.backward(loss).parameters(table)
    for p in params:
        np.testing.assert_allclose(recorded.of(p), eager.of(p), rtol=1e-12, atol=1e-14)
    for p in params:
        base = np.array(table.of(p))
        numeric = np.zeros_like(base)
        for k in range(base.size):
            for sign in (1.0, -1.0):
                bumped = base.copy().reshape(-1)
                bumped[k] += sign * EPS
                value = float(network.forward(table.replace({p: bumped.reshape(base.shape)}))
                              .of(loss))
                numeric.reshape(-1)[k] += sign * value / (2 * EPS)
        np.testing.assert_allclose(recorded.of(p), numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of parameter %{p.index}")
    return network


# -- shape strategies ------------------------------------------------------------------------

dims = st.integers(1, 3)
shapes = st.lists(dims, min_size=0, max_size=3).map(tuple)
seeds = st.integers(0, 2**16)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast together (some axes 1, some missing)."""
    full = draw(st.lists(dims, min_size=0, max_size=3))
    def variant():
        keep = draw(st.integers(0, len(full)))
        shape = full[len(full) - keep:]
        return tuple(1 if draw(st.booleans()) else d for d in shape)
    return variant(), variant()


FAST = settings(max_examples=12, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Every primitive of the registry needs a gradient case: a row of UNARY or BINARY
# below, or a test marked @covers(...). Coverage is known when this module is imported,
# so test_every_registered_op_has_a_gradient_case passes alone and in any order.
COVERED: set[str] = set()


def covers(*names):
    COVERED.update(names)
    return lambda f: f


# ===========================================================================================
# THE GRADIENT-CASE TABLES: adding an elementwise primitive is one registry entry in
# tensorcode/compiler/core/registry.py plus one row here.
#   UNARY:  name -> (values: "any" in +-[0.2, 1.2) or "positive" in [0.2, 1.2), recorder)
#   BINARY: name -> recorder of two broadcasting operands
# ===========================================================================================

UNARY = {
    "neg": ("any", lambda x: -x),
    "exp": ("any", lambda x: x.exp()),
    "log": ("positive", lambda x: x.log()),
    "tanh": ("any", lambda x: x.tanh()),
    "sigmoid": ("any", lambda x: x.sigmoid()),
    "relu": ("any", lambda x: x.relu()),
    "sqrt": ("positive", lambda x: x.sqrt()),
    "abs": ("any", lambda x: abs(x)),
    "sin": ("any", lambda x: x.sin()),
    "cos": ("any", lambda x: x.cos()),
    "erf": ("any", lambda x: x.erf()),
    "softplus": ("any", lambda x: x.softplus()),
    "log1p": ("positive", lambda x: x.log1p()),
}
COVERED.update(UNARY)


@pytest.mark.parametrize("name", sorted(UNARY))
@FAST
@given(shape=shapes, seed=seeds)
def test_unary(name, shape, seed):
    kind, fn = UNARY[name]
    rng = np.random.default_rng(seed)
    check_gradients([_values(rng, shape, kind)], lambda t, x: fn(x), seed)


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a ** b,
    "maximum": tc.maximum,
    "minimum": tc.minimum,
}
COVERED.update(BINARY)


@pytest.mark.parametrize("name", sorted(BINARY))
@FAST
@given(pair=broadcast_pair(), seed=seeds)
def test_binary_with_broadcasting(name, pair, seed):
    rng = np.random.default_rng(seed)
    a = _values(rng, pair[0], "positive" if name == "pow" else "any")
    b = _values(rng, pair[1], "any")
    if name in ("maximum", "minimum"):
        b = b + 0.05  # keep ties away (values are continuous; this shifts exact matches)
    check_gradients([a, b], lambda t, x, y: BINARY[name](x, y), seed)


@covers("pow")
def test_pow_with_weak_scalar_exponent():
    rng = np.random.default_rng(3)
    check_gradients([_values(rng, (2, 3), "positive")], lambda t, x: x ** 3 + 2.0 ** x)


@covers("where")
@FAST
@given(pair=broadcast_pair(), seed=seeds)
def test_where(pair, seed):
    rng = np.random.default_rng(seed)
    cond_shape = np.broadcast_shapes(pair[0], pair[1])
    cond = (rng.uniform(size=cond_shape) < 0.5).astype(np.float64)
    check_gradients([_values(rng, pair[0]), _values(rng, pair[1])],
                    lambda t, x, y: tc.where(t.leaf(cond), x, y), seed)


@st.composite
def reduction_case(draw):
    shape = draw(st.lists(dims, min_size=1, max_size=3).map(tuple))
    axis = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1),
                          st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True)
                          .map(tuple)))
    return shape, axis, draw(st.booleans())


@covers("sum", "mean", "max", "min")
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@FAST
@given(case=reduction_case(), seed=seeds)
def test_reductions(name, case, seed):
    shape, axis, keepdims = case
    rng = np.random.default_rng(seed)
    values = rng.permutation(np.linspace(-1.0, 1.0, int(np.prod(shape)))).reshape(shape)
    check_gradients([values], lambda t, x: getattr(x, name)(axis=axis, keepdims=keepdims), seed)


@covers("max")
def test_max_splits_gradient_between_ties():
    tape = tc.Tape()
    x = tape.parameter(np.array([1.0, 3.0, 3.0]))
    loss = x.max()
    adjoints = tape.differentiate(loss, [x])
    network = tape.into_network()
    grad = network.forward(network.parameters()).recorded_gradients(adjoints).of(x)
    np.testing.assert_array_equal(grad, [0.0, 0.5, 0.5])


@covers("reshape", "transpose", "broadcast_to")
@FAST
@given(shape=st.lists(dims, min_size=1, max_size=3).map(tuple), seed=seeds)
def test_shape_ops(shape, seed):
    rng = np.random.default_rng(seed)
    perm = tuple(int(k) for k in rng.permutation(len(shape)))
    check_gradients([_values(rng, shape)],
                    lambda t, x: x.transpose(perm).reshape(-1).reshape(
                        tuple(shape[k] for k in perm)).broadcast_to(
                            (2,) + tuple(shape[k] for k in perm)),
                    seed)


@covers("slice", "pad")
@FAST
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), seed=seeds,
       data=st.data())
def test_slice_and_pad(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    start = data.draw(st.integers(0, shape[axis] - 1))
    stop = data.draw(st.integers(start + 1, shape[axis]))
    rng = np.random.default_rng(seed)
    def fn(t, x):
        sliced = x.slice(start, stop, axis=axis)
        padded = t.apply("pad", [sliced], {"axis": axis, "before": 1, "after": 2})
        return padded * padded
    check_gradients([_values(rng, shape)], fn, seed)


@covers("concat")
@FAST
@given(shape=st.lists(dims, min_size=1, max_size=3).map(tuple), seed=seeds, data=st.data())
def test_concat(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    rng = np.random.default_rng(seed)
    other = list(shape)
    other[axis] = data.draw(dims)
    check_gradients([_values(rng, shape), _values(rng, tuple(other)), _values(rng, shape)],
                    lambda t, a, b, c: tc.concat([a, b, c], axis=axis), seed)


@covers("take", "scatter_add")
@FAST
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), seed=seeds,
       data=st.data())
def test_take_and_scatter_add(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    index_shape = data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple))
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, shape[axis], size=index_shape)  # repeats exercise scatter-add
    def fn(t, x):
        gathered = x.take(indices, axis=axis)
        return t.apply("scatter_add", [gathered * gathered, t.leaf(indices)],
                       {"axis": axis, "size": shape[axis]})
    check_gradients([_values(rng, shape)], fn, seed)


@st.composite
def matmul_case(draw):
    m, k, n = draw(dims), draw(dims), draw(dims)
    kind = draw(st.sampled_from(["2d", "batched", "broadcast", "vec_left", "vec_right", "dot"]))
    if kind == "2d":
        return (m, k), (k, n)
    if kind == "batched":
        b = draw(dims)
        return (b, m, k), (b, k, n)
    if kind == "broadcast":
        b, c = draw(dims), draw(dims)
        return (b, 1, m, k), (c, k, n)
    if kind == "vec_left":
        return (k,), (draw(dims), k, n)
    if kind == "vec_right":
        return (draw(dims), m, k), (k,)
    return (k,), (k,)


@covers("matmul")
@FAST
@given(case=matmul_case(), seed=seeds)
def test_matmul(case, seed):
    rng = np.random.default_rng(seed)
    check_gradients([_values(rng, case[0]), _values(rng, case[1])], lambda t, a, b: a @ b, seed)


@covers("astype")
def test_astype_round_trip_gradient():
    tape = tc.Tape()
    x = tape.parameter(np.array([0.5, -1.25, 2.0]))
    w = tape.leaf(np.array([1.0, 2.0, 3.0]))
    loss = (x.astype("float32").astype("float64") * w).sum()
    adjoints = tape.differentiate(loss, [x])
    network = tape.into_network()
    run = network.forward(network.parameters())
    np.testing.assert_allclose(run.recorded_gradients(adjoints).of(x), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(run.backward(loss).of(x), [1.0, 2.0, 3.0])


COMPOSITES = {
    "softmax": lambda t, x: x.softmax(axis=-1),
    "log_softmax": lambda t, x: x.log_softmax(axis=0),
    "logsumexp": lambda t, x: tc.logsumexp(x, axis=-1, keepdims=True),
    "logsumexp_all": lambda t, x: tc.logsumexp(x),
    "layer_norm": lambda t, x: tc.layer_norm(x),
    "gelu": lambda t, x: tc.gelu(x),
    "mse": lambda t, x: tc.mse(x, t.leaf(np.ones(x.shape))),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
@FAST
@given(shape=st.lists(st.integers(2, 4), min_size=1, max_size=2).map(tuple), seed=seeds)
def test_composites(name, shape, seed):
    rng = np.random.default_rng(seed)
    check_gradients([_values(rng, shape) * 2], COMPOSITES[name], seed, rtol=1e-4, atol=1e-6)


@covers("one_hot")
@FAST
@given(batch=st.integers(1, 4), classes=st.integers(2, 5), seed=seeds)
def test_cross_entropy(batch, classes, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=batch)
    logits = _values(rng, (batch, classes)) * 3
    check_gradients([logits], lambda t, x: tc.cross_entropy(x, labels), seed,
                    rtol=1e-4, atol=1e-7)
    tape = tc.Tape()
    loss = tc.cross_entropy(tape.leaf(logits), labels)
    network = tape.into_network()
    value = float(network.forward(network.parameters()).of(loss))
    shifted = logits - logits.max(axis=1, keepdims=True)
    expected = -np.mean(shifted[np.arange(batch), labels] -
                        np.log(np.exp(shifted).sum(axis=1)))
    assert value == pytest.approx(expected, rel=1e-12)


@covers("lt", "le", "gt", "ge", "eq", "ne")
def test_comparisons_give_zero_one_and_no_gradient():
    tape = tc.Tape()
    x = tape.parameter(np.array([0.5, -1.0, 2.0]))
    y = tape.leaf(np.array([0.5, 0.0, 1.0]))
    results = {name: getattr(x, dunder)(y) for name, dunder in
               [("lt", "__lt__"), ("le", "__le__"), ("gt", "__gt__"), ("ge", "__ge__"),
                ("eq", "__eq__"), ("ne", "__ne__")]}
    loss = sum((r * x for r in results.values()), start=x.sum() * 0.0).sum()
    adjoints = tape.differentiate(loss, [x])
    network = tape.into_network()
    run = network.forward(network.parameters())
    expected = {"lt": [0, 1, 0], "le": [1, 1, 0], "gt": [0, 0, 1], "ge": [1, 0, 1],
                "eq": [1, 0, 0], "ne": [0, 1, 1]}
    for name, r in results.items():
        assert run.of(r).dtype == np.float64
        np.testing.assert_array_equal(run.of(r), expected[name])
    # d/dx sum_k cmp_k(x, y) * x = sum_k cmp_k(x, y): comparisons contribute no gradient
    total = np.sum([expected[n] for n in expected], axis=0)
    np.testing.assert_allclose(run.recorded_gradients(adjoints).of(x), total)


@covers("detach")
def test_detach_has_zero_gradient():
    tape = tc.Tape()
    x = tape.parameter(np.array([1.0, 2.0]))
    loss = (x * x.detach()).sum()
    adjoints = tape.differentiate(loss, [x])
    network = tape.into_network()
    grad = network.forward(network.parameters()).recorded_gradients(adjoints).of(x)
    np.testing.assert_array_equal(grad, [1.0, 2.0])


@covers("floor", "shift_left", "shift_right", "bitcast", "bitwise_and", "bitwise_or",
        "bitwise_xor", "mul_wide")
def test_bit_operations_compute_numpys_bits_and_carry_no_gradient():
    """The ops scalar graphs build numbers from (lower/approximations.py,
    lower/random_fills.py): no gradient flows through them, and their values are
    NumPy's (``mul_wide`` the product modulo 2**64, as uint64 computes it)."""
    tape = tc.Tape()
    x = tape.parameter(np.array([0.5, -1.25, 2.75]))
    bits = tape.apply("bitcast", [x], {"dtype": "int64"})
    one = tape.leaf(np.array(1, np.int64))
    shifted = tape.apply("shift_right", [tape.apply("shift_left", [bits, one]), one])
    floor = tape.apply("floor", [x * 3.0])
    back = tape.apply("bitcast", [bits], {"dtype": "float64"})
    word = tape.leaf(np.array([0xFFFFFFFF, 0xD2511F53, 12345], np.int64))
    mask = tape.leaf(np.array(0xFFFF, np.int64))
    mixed = [tape.apply(op, [bits, word]) for op in ("bitwise_and", "bitwise_or", "bitwise_xor")]
    masked = tape.apply("bitwise_and", [bits, mask])
    wide = tape.apply("mul_wide", [word, word])
    loss = (x * 2.0).sum() + floor.sum() + back.sum()
    adjoints = tape.differentiate(loss, [x])
    with pytest.raises(tc.DTypeError, match="differ in width"):
        tape.apply("bitcast", [x], {"dtype": "int32"})
    with pytest.raises(tc.DTypeError, match="integer"):
        tape.apply("shift_left", [x, x])
    network = tape.into_network()
    run = network.forward(network.parameters())
    values = np.array([0.5, -1.25, 2.75])
    ints = values.view(np.int64)
    np.testing.assert_array_equal(run.of(bits), ints)
    np.testing.assert_array_equal(run.of(shifted), (ints << 1) >> 1)
    np.testing.assert_array_equal(run.of(floor), np.floor(values * 3))
    np.testing.assert_array_equal(run.of(back), values)
    words = np.array([0xFFFFFFFF, 0xD2511F53, 12345], np.int64)
    for got, fn in zip(mixed, (np.bitwise_and, np.bitwise_or, np.bitwise_xor)):
        np.testing.assert_array_equal(run.of(got), fn(ints, words))
    np.testing.assert_array_equal(run.of(masked), ints & 0xFFFF)
    products = [(int(w) * int(w)) % 2**64 for w in words]
    np.testing.assert_array_equal(run.of(wide), np.array(products, np.uint64).view(np.int64))
    # d/dx of 2x + floor(3x) + bitcast(bitcast(x)): only the first term's 2 flows
    np.testing.assert_array_equal(run.recorded_gradients(adjoints).of(x), [2.0, 2.0, 2.0])


def test_every_registered_op_has_a_gradient_case():
    """A new op is one registry entry plus one gradient test: this keeps that promise."""
    missing = sorted(set(primitives.REGISTRY) - COVERED)
    assert not missing, f"ops without a gradient test: {missing}"


@covers("random_uniform", "random_normal", "bernoulli", "categorical")
def test_draws_carry_no_gradient_and_the_rest_checks_against_finite_differences():
    """Draws depend on the key alone: the loss's gradient is what flows around them,
    checked against float64 central differences with the same generator state at each
    evaluation (so every evaluation draws the same numbers)."""
    tape = tc.Tape()
    key = tape.random_key()
    w = tape.parameter(np.array([0.3, -1.2, 0.7, 2.0]))
    u = tc.random.random_uniform(key, (4,), "float64")
    z = tc.random.random_normal(key, (4,), "float64")
    keep = tc.random.bernoulli(key, 0.5, (4,), "float64")
    token = tc.random.categorical(key, w.reshape((1, 4)) * 2.0)  # logits from w: no gradient
    loss = (w * w * u).sum() + (w * z).sum() + (w * keep).sum() + (w * 0.0).sum()
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    plan = network.entry([loss, token, u, z, keep, *adjoints.roots()[1:]]).lower("reference")

    def evaluate(values):
        table = network.parameters().replace({w: np.asarray(values)})
        return plan.forward(table, generator=tc.random.Generator(11))

    base = np.array([0.3, -1.2, 0.7, 2.0])
    run = evaluate(base)
    grad = run.of(adjoints.roots()[1])
    numeric = np.zeros(4)
    for i in range(4):
        step = np.zeros(4)
        step[i] = 1e-6
        numeric[i] = (float(evaluate(base + step).of(loss)) -
                      float(evaluate(base - step).of(loss))) / 2e-6
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
    drawn = {r: run.of(r) for r in (u, z, keep)}
    np.testing.assert_allclose(grad, 2 * base * drawn[u] + drawn[z] + drawn[keep])
    assert run.of(token).dtype == np.int64 and 0 <= int(run.of(token)[0]) < 4

"""The Numba backend against the reference interpreter and the runtime backward.

Compiling costs seconds, so this file compiles a handful of plans that together use
every op of the registry: each is checked against the reference-backend plan (the
same lowered graph interpreted) and against ``network.forward`` / ``run.backward``.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from compiler_graphs import assert_close, mlp_program, random_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorcode as tc
from tensorcode.compiler.core import registry as primitives


def all_ops_program(dtype: str):
    """One program that records every registry op (floats; int ops in ``int_program``)."""
    rng = np.random.default_rng(1)
    tape = tc.Tape()
    f = lambda *shape: rng.uniform(-1, 1, shape).astype(dtype)  # noqa: E731
    w = tape.parameter(f(5, 4), name="w")
    b = tape.parameter(f(4), name="b")
    table = tape.parameter(f(6, 4), name="table")
    x = tape.input(f(3, 5), name="x")
    idx = tape.input(np.array([0, 5, 2], np.int64), name="idx")
    labels = tape.input(np.array([1, 3, 0], np.int64), name="labels")
    h = (x @ w + b)
    e = table.take(idx, axis=0)  # gather; its gradient scatters
    h = h + e
    a = [h.tanh(), h.sigmoid(), h.relu(), h.abs(), h.sin(), h.cos(), (h * 0.5).exp(),
         (h.abs() + 1.0).log(), (h * h + 0.1).sqrt(), -h, h.detach() * h]
    # every other method-recorded primitive of the registry, on values in [0.5, 1.5)
    # where each is defined: a primitive added later is lowered and checked here too
    written = {"tanh", "sigmoid", "relu", "abs", "sin", "cos", "exp", "log", "sqrt", "detach"}
    a += [getattr(h.abs() * 0.25 + 0.5, op.name)() for op in primitives.REGISTRY.values()
          if op.method and op.name not in written]
    s = a[0]
    for t in a[1:]:
        s = s + t
    s = s - h / (b.abs() + 1.0) + (h.abs() + 0.5) ** (b * 0.5)
    s = tc.maximum(s, h) + tc.minimum(s, h * 2.0)
    cond = (h > 0.1) + (h >= 0.2) + (h < -0.1) + (h <= -0.3) + (h == h) + (h != s)
    s = tc.where(cond > 1.5, s, h)
    s = s + h.astype("float64" if dtype == "float32" else "float32").astype(dtype)
    red = s.sum(axis=0) + s.mean(axis=1).sum() + s.max(axis=1, keepdims=True).sum() \
        + s.min(axis=0).mean()
    t = s.T.reshape(2, 6).transpose(1, 0)  # reshape of a transpose: copied
    sliced = s.slice(1, 3, axis=1)
    padded = tape.apply("pad", [sliced], {"axis": 1, "before": 1, "after": 0})
    joined = tc.concat([s, padded], axis=1).broadcast_to((2, 3, 7))
    logits = s @ w.T @ w  # [3,4]
    loss = (red.sum() + (t * t).mean() + joined.mean() + tc.cross_entropy(logits, labels)
            + tc.layer_norm(s).sum() * 0.1 + tc.gelu(s).mean() + tc.softmax(s).max())
    # the bit operations of scalar graphs (no gradient): floor, an integer's shifts, a
    # bitcast there and back
    width = "int32" if dtype == "float32" else "int64"
    one = tape.leaf(np.array(1, width))
    bits = tape.apply("bitcast", [s], {"dtype": width})
    shifted = tape.apply("shift_right", [tape.apply("shift_left", [bits, one]), one])
    bit_ops = [tape.apply("floor", [h * 3.0]), shifted,
               tape.apply("bitcast", [bits], {"dtype": dtype})]
    # the Philox rounds' bit operations (lower/random_fills.py) on a value's top bits
    # (its sign, exponent and leading mantissa bits: a last-ulp difference stays below)
    top = tape.apply("shift_right", [bits, tape.leaf(np.array(44 if width == "int64" else 12,
                                                               width))])
    mask = tape.leaf(np.array(0xFFFF, width))
    bit_ops += [tape.apply(op, [top, mask]) for op in ("bitwise_and", "bitwise_or",
                                                        "bitwise_xor")]
    low = tape.apply("bitwise_and", [top, mask])
    bit_ops.append(tape.apply("mul_wide", [low, low]))
    adjoints = tape.differentiate(loss, [w, b, table])
    extras = [cond, tc.one_hot(idx, 6, dtype), s, *bit_ops]
    network = tape.into_network()
    return network, loss, adjoints, extras


def int_program():
    tape = tc.Tape()
    a = tape.input(np.array([[3, -2, 7], [0, 5, -9]], np.int64), name="a")
    b = tape.input(np.array([1, 2, -3], np.int32), name="b")
    c = b.astype("int64")
    table = tape.leaf(np.arange(12, dtype=np.int64).reshape(4, 3))
    out = (a + c) * (a - c) + abs(-a) + a.relu() + tc.maximum(a, c) + tc.minimum(a, 1)
    out = tc.where(a > c, out, a * 3) + (a == c) + (a != 0) + (a <= 2) + (a >= 1) + (a < 0)
    picked = table.take(tape.leaf(np.array([3, 0], np.int64)), axis=0) + a
    small = (b * b + b).sum() + b.max() - b.min()
    roots = [out, out.sum(axis=1), out.max(axis=0), out.min(), picked @ c, small,
             (a @ c.reshape(3, 1)).T, picked.astype("float64").mean()]
    return tape.into_network(), roots


# float32 only: the every-op plan is the costliest Numba compile of the suite (tens of
# seconds of CPU per dtype). Numba's kernels are the same templates in either float
# dtype but for float32's approximations, so float32 is the one that tells them apart;
# float64's exact functions are Numba's with approximate=False
# (test_exact_math_can_be_asked_for), the random program below is float64, and the llvm
# backend lowers the every-op program in both dtypes (test_llvm_backend).
@pytest.fixture(scope="module", params=["float32"])
def all_ops(request):
    dtype = request.param
    network, loss, adjoints, extras = all_ops_program(dtype)
    entry = network.entry(adjoints.roots() + extras)
    return dtype, network, loss, adjoints, extras, entry.lower("numba"), entry.lower("reference")


def compare(dtype, network, loss, adjoints, extras, plan, reference):
    parameters = network.parameters()
    run, ref_run, interp = (plan.forward(parameters), reference.forward(parameters),
                            network.forward(parameters))
    for sym in [loss] + list(extras):
        assert_close(run.of(sym), ref_run.of(sym), dtype, f"numba vs reference plan {sym}")
        assert_close(run.of(sym), interp.of(sym), dtype, f"numba vs interpreter {sym}")
    backward = interp.backward(loss).parameters(parameters)
    for k, (a, b, c) in enumerate(zip(run.recorded_gradients(adjoints),
                                      ref_run.recorded_gradients(adjoints), backward)):
        assert_close(a, b, dtype, f"gradient {k} numba vs reference plan")
        assert_close(a, c, dtype, f"gradient {k} numba vs runtime backward")


def test_every_op_lowers_and_matches(all_ops):
    dtype, network, loss, adjoints, extras, plan, reference = all_ops
    recorded = {n.op for n in network.graph.nodes}
    # random ops: tests/compiler/trace/test_random_ops.py compares both backends bit for bit
    random = {n for n in primitives.REGISTRY if primitives.is_random(n)}
    assert set(primitives.REGISTRY) - {"astype"} - random <= recorded | {"astype"}, \
        set(primitives.REGISTRY) - recorded
    lowered = {n.op for n in plan.graph.nodes}
    # detach is the identity in a forward-only plan; every other op is compiled
    assert set(primitives.REGISTRY) - {"detach"} - random <= lowered, \
        set(primitives.REGISTRY) - lowered
    compare(dtype, network, loss, adjoints, extras, plan, reference)
    constants = [line for line in plan.source().splitlines() if line.startswith("K")]
    assert any(f"np.{dtype}(" in line for line in constants)


def test_the_llvm_backend_gives_every_ops_bits(all_ops):
    """Every op of the registry, forward and backward, lowered on the llvm backend: the
    same bits as this Numba plan (the two backends run each op's arithmetic in the same
    order). The Numba side is the plan above, so this costs no Numba compile."""
    dtype, network, loss, adjoints, extras, plan, _ = all_ops
    llvm = network.entry(adjoints.roots() + extras).lower("llvm")
    assert llvm.approximate == plan.approximate
    parameters = network.parameters()
    left, right = llvm.forward(parameters), plan.forward(parameters)
    for sym in [loss] + list(extras):
        assert np.array_equal(left.of(sym), right.of(sym)), sym
    for a, b in zip(left.recorded_gradients(adjoints), right.recorded_gradients(adjoints)):
        assert np.array_equal(a, b)


def test_the_numba_lowering_table_has_one_row_per_elementwise_op():
    """Elementwise ops are lowered from the backend's own table, keyed by the registry's
    op (one row per op, and no row for an op the registry does not have); reductions,
    views, movement, index and contraction ops are lowered by their kernel records."""
    from tensorcode.compiler.backends.numba.lowerings import LOWERINGS, Lowering

    elementwise = {name for name in primitives.REGISTRY if primitives.is_elementwise(name)}
    assert set(LOWERINGS) == elementwise, set(LOWERINGS) ^ elementwise
    for name, row in LOWERINGS.items():
        assert isinstance(row, Lowering) and isinstance(row.template, str), name
    assert all(op.kind in primitives.KINDS for op in primitives.REGISTRY.values())


def test_integer_programs():
    network, roots = int_program()
    plan = network.entry(roots).lower("numba")
    parameters = network.parameters()
    run, interp = plan.forward(parameters), network.forward(parameters)
    for sym in roots:
        got, want = run.of(sym), interp.of(sym)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want)


# one example per run, of one random chain: a Numba compile of a fresh plan costs seconds
# and grows faster than the program (four chains, 550-700 nodes, took 20-30 s of CPU;
# one chain takes a few). The chains are independent, so four are four draws of this
# test; the llvm backend's twin draws three programs of four chains each
# (tests/compiler/backends/test_llvm_backend.py), and every op's Numba lowering is
# checked by test_every_op_lowers_and_matches above. Float64: the every-op plan is
# float32 on Numba, so this is the test that compiles Numba's float64 code.
@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000))
def test_random_programs_compile_and_match(seed):
    dtype = "float64"
    network, loss, adjoints, extras = random_program(seed, dtype, steps=14, parts=1)
    entry = network.entry(adjoints.roots() + extras)
    compare(dtype, network, loss, adjoints, extras, entry.lower("numba"), entry.lower("reference"))


# ---------------------------------------------------------------------------------------
# one classifier plan (embedding, BLAS matmul, cross-entropy) for the API paths


@pytest.fixture(scope="module")
def classifier():
    network, value, adjoints, syms = mlp_program([30, 64, 27], "tanh", batch=32,
                                                 loss="cross_entropy", embedding=(27, 10, 3))
    plan = network.entry(adjoints.roots() + [syms["out"]]).lower("numba")
    return network, value, adjoints, syms, plan


def test_classifier_matches_and_uses_blas(classifier):
    network, value, adjoints, syms, plan = classifier
    assert "(blas)" in plan.describe()
    # a float32 program bakes no float64 constant (nothing silently widens)
    constants = [line for line in plan.source().splitlines() if line.startswith("K")]
    assert constants and not any("np.float64(" in line for line in constants)
    reference = network.entry(adjoints.roots() + [syms["out"]]).lower("reference")
    compare("float32", network, value, adjoints, [syms["out"]], plan, reference)


def test_the_llvm_backend_gives_the_same_bits(classifier):
    """The classifier's loss, gradients and outputs (loop and BLAS matmuls, tanh, exp, an
    embedding gather and its scatter, cross-entropy) lowered on the llvm backend: the
    same operations in the same order, so the same bits as this Numba plan, with the
    float32 approximations on. (Off: ``test_exact_math_can_be_asked_for``; the
    approximated ops are the only code the switch changes.) The Numba side is this
    file's plan, so the comparison costs no Numba compile of its own."""
    network, value, adjoints, syms, numba_plan = classifier
    assert numba_plan.approximate
    llvm = network.entry(adjoints.roots() + [syms["out"]]).lower("llvm", approximate=True)
    assert "(blas)" in llvm.describe()
    parameters = network.parameters()
    left, right = llvm.forward(parameters), numba_plan.forward(parameters)
    for root in [value, syms["out"]]:
        assert np.array_equal(left.of(root), right.of(root)), root
    for a, b in zip(left.recorded_gradients(adjoints), right.recorded_gradients(adjoints)):
        assert np.array_equal(a, b)


def test_each_local_name_is_bound_in_one_kernel_only(classifier):
    """Kernels scope their names (``kernel_scoped``), so Numba's SSA pass has only
    loop-carried accumulators to rebuild instead of every name several kernels bind."""
    import re

    plan = classifier[-1]
    body = plan.source().split("\ndef body(", 1)[1].split("\ndef run(", 1)[0]
    kernels = re.split(r"\n    # kernel \d+:", body)[1:]
    assert len(kernels) > 3
    binding = re.compile(r"^\s*(?:for\s+(\w+)\s+in\b|(\w+)\s*(?:[-+*/]?=)(?!=))", re.M)
    owners: dict[str, int] = {}
    for k, text in enumerate(kernels):
        for match in binding.finditer(text):
            name = match.group(1) or match.group(2)
            assert name.endswith(f"_k{k}"), (k, name)
            assert owners.setdefault(name, k) == k, name


def test_gradients_view_the_output_buffer(classifier):
    network, value, adjoints, syms, plan = classifier
    parameters = network.parameters()
    run = plan.forward(parameters)
    grads = run.recorded_gradients(adjoints)
    assert grads.layout is network.layout
    for buffer in grads.buffers().values():
        assert buffer.base is not None  # a view, not a copy
    stepped = parameters.step(grads, lambda p, g: p - 0.1 * g)
    assert not stepped.equals(parameters)


def test_forward_batch_runs_the_case_loop_compiled(classifier):
    network, value, adjoints, syms, plan = classifier
    parameters = network.parameters()
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 27, size=(4, 32, 3))
    run = plan.forward_batch(parameters, {syms["idx"]: idx})
    assert run.of(value).shape == (4,) and run.of(syms["out"]).shape == (4, 32, 27)
    for c in range(4):
        single = plan.forward(parameters, {syms["idx"]: idx[c]})
        assert_close(run.of(value)[c], single.of(value), "float32")
        assert_close(run.of(syms["out"])[c], single.of(syms["out"]), "float32")
    with pytest.raises(tc.TensorCodeError):
        run.recorded_gradients(adjoints)


def test_threads_share_one_plan(classifier):
    network, value, adjoints, syms, plan = classifier
    parameters = network.parameters()
    rng = np.random.default_rng(4)
    feeds = [rng.integers(0, 27, size=(32, 3)) for _ in range(4)]
    expected = [network.forward(parameters, {syms["idx"]: f}).of(value) for f in feeds]
    errors = []

    def work(k):
        try:
            for _ in range(30):
                got = plan.forward(parameters, {syms["idx"]: feeds[k]}).of(value)
                assert_close(got, expected[k], "float32")
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_step_plan_compiles_its_forward_when_first_called():
    """A numba step plan trained through its fused entry points never compiles ``run``
    (a third Numba entry point costs seconds); its first ``forward``, from four threads
    at once, compiles it once and every thread gets the reference's numbers."""
    from tensorcode.compiler.plans.plan import compile_stats

    network, value, adjoints, syms = mlp_program([3, 7, 2], batch=13, seed=11)
    entry = network.entry(adjoints.roots())

    def built() -> int:
        stats = compile_stats()
        return stats["compiled"] + stats["cache_loaded"]

    before = built()
    plan = entry.lower("numba", optimizer=tc.optim.Sgd())
    lowered = built()
    parameters = network.parameters()
    plan.step(parameters, tc.optim.Sgd(), None, 0.1)
    stepped = built()
    assert stepped > lowered >= before  # the update helpers and run_step, not run
    expected = entry.lower("reference").forward(parameters).of(value)
    with ThreadPoolExecutor(max_workers=4) as pool:  # an error in a thread raises here
        results = list(pool.map(lambda _: plan.forward(parameters).of(value), range(4)))
    assert built() == stepped + 1  # run, once
    for got in results:
        assert_close(got, expected, "float32")


def test_bind_and_bad_indices(classifier):
    network, value, adjoints, syms, plan = classifier
    parameters = network.parameters()
    names = [network.graph.nodes[network.node_of(s)].name for s in plan.inputs()]
    assert names == ["idx", "y"]
    idx = np.zeros((32, 3), np.int64)
    y = np.ones(32, np.int64)
    bound = plan.bind(parameters)
    outs = bound(idx, y)
    assert len(outs) == len(plan.roots)
    expected = network.forward(parameters, {syms["idx"]: idx, syms["y"]: y}).of(value)
    assert_close(outs[0], expected, "float32")
    with pytest.raises(tc.FeedError, match="out of range"):
        plan.forward(parameters, {syms["idx"]: np.full((32, 3), 27)})
    with pytest.raises(tc.FeedError, match="expected shape"):
        bound(np.zeros((31, 3), np.int64), y)


# ---------------------------------------------------------------------------------------
# the float32 tanh approximation


def test_float32_approximations_are_within_their_ulp_bounds():
    from tensorcode.compiler.lower.approximations import (
        EXP_ULP_BOUND,
        TANH_ULP_BOUND,
        evaluate,
        ulp_distance,
    )

    rng = np.random.default_rng(11)
    xs = np.concatenate([rng.uniform(-10, 10, 400_000), rng.normal(0, 0.05, 100_000),
                         rng.uniform(-1, 1, 200_000), rng.uniform(-104, 89, 300_000),
                         np.linspace(-104, -86, 20_000), np.linspace(86, 89, 20_000),
                         [0.0, -0.0, 3e-4, -3e-4, 7.9, -7.9, 8.0, 1e30, -1e30]]
                        ).astype(np.float32)
    tape = tc.Tape()
    x = tape.input(xs, name="x")
    roots = [x.tanh(), x.exp(), x.sigmoid()]
    network = tape.into_network()
    plan = network.entry(roots).lower("numba")
    assert plan.approximate and "bitcast(" in plan.source()
    tanh, exp, sigmoid = (plan.forward(network.parameters()).of(r) for r in roots)
    wide = xs.astype(np.float64)
    with np.errstate(all="ignore"):
        exact_exp = np.exp(wide).astype(np.float32)
        exact_sigmoid = (1 / (1 + np.exp(-wide))).astype(np.float32)
    assert ulp_distance(tanh, np.tanh(wide).astype(np.float32)).max() <= TANH_ULP_BOUND
    assert ulp_distance(exp, exact_exp).max() <= EXP_ULP_BOUND
    assert ulp_distance(sigmoid, exact_sigmoid).max() <= 4  # exp, one add, one divide
    # the approximations' scalar graphs, run by the registry's NumPy references, are
    # what the generated code computes
    assert ulp_distance(tanh, evaluate("tanh", xs)).max() <= 1
    assert ulp_distance(exp, evaluate("exp", xs)).max() <= 1
    assert ulp_distance(sigmoid, evaluate("sigmoid", xs)).max() <= 1
    special = np.resize(np.array([np.nan, np.inf, -np.inf], np.float32), xs.shape)
    out = [plan.forward(network.parameters(), {x: special}).of(r)[:3] for r in roots]
    assert np.isnan(out[0][0]) and out[0][1] == 1 and out[0][2] == -1
    assert np.isnan(out[1][0]) and out[1][1] == np.inf and out[1][2] == 0
    assert np.isnan(out[2][0]) and out[2][1] == 1 and out[2][2] == 0


def test_exact_math_can_be_asked_for():
    """``approximate=False``: libm's functions in place of the float32 approximations, and
    the llvm backend's bits for every approximated op, forward and backward."""
    from tensorcode.compiler.lower.approximations import APPROXIMATIONS, ulp_distance

    tape = tc.Tape()
    xs = np.linspace(-6, 6, 1001, dtype=np.float32)
    x = tape.parameter(xs, name="x")
    y = x.tanh()
    roots = [y, (x * 0.5).exp(), x.sigmoid()]
    loss = (roots[0] * roots[1] + roots[2]).mean()
    adjoints = tape.differentiate(loss, [x])
    network = tape.into_network()
    assert set(APPROXIMATIONS) <= {n.op for n in network.graph.nodes}
    entry = network.entry(adjoints.roots() + roots)
    plan = entry.lower("numba", approximate=False)
    assert not plan.approximate and "np.tanh(" in plan.source()
    parameters = network.parameters()
    run = plan.forward(parameters)
    exact = np.tanh(xs.astype(np.float64)).astype(np.float32)
    assert ulp_distance(run.of(y), exact).max() <= 2  # libm tanhf: within 2 ulp
    llvm = entry.lower("llvm", approximate=False)
    assert not llvm.approximate
    other = llvm.forward(parameters)
    for root in [loss] + roots:
        assert np.array_equal(run.of(root), other.of(root)), root
    for a, b in zip(run.recorded_gradients(adjoints), other.recorded_gradients(adjoints)):
        assert np.array_equal(a, b)


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
@pytest.mark.parametrize("backend", ["reference", "numba", "llvm"])
def test_roots_that_are_sources_views_or_repeated_and_odd_shapes(backend):
    tape = tc.Tape()
    w = tape.parameter(np.arange(6.0).reshape(2, 3), name="w")
    s = tape.input(np.float64(2.0), name="s")  # a scalar input
    e = tape.input(np.zeros((0, 3)), name="e")  # an empty one
    c = tape.leaf(np.array([1.0, 2.0, 3.0]))
    y = w * s + c
    roots = [w, s, c, y, y, e.sum(axis=0) + y.sum(axis=0), e.mean(), w.T,
             (w @ c).reshape(2, 1)]
    network = tape.into_network()
    plan = network.entry(roots).lower(backend)
    with np.errstate(all="ignore"):
        run = plan.forward(network.parameters(), {s: 3.0})
        ref = network.forward(network.parameters(), {s: 3.0})
        for root in roots:
            got, want = run.of(root), ref.of(root)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, equal_nan=True)
    with np.errstate(all="ignore"):
        batch = plan.forward_batch(network.parameters(), {s: np.array([1.0, 2.0])})
    assert batch.of(y).shape == (2, 2, 3)
    one = network.forward(network.parameters(), {s: 2.0}).of(y)
    np.testing.assert_allclose(batch.of(y)[1], one)

"""Random primitives: Philox known answers, both backends bit for bit, the stream's
independence from batching and threads, statistics, dropout's gradient, bad input.

Numba compiles cost seconds, so Numba lowers one plan here (every random op, the
``program`` fixture), held to the reference backend bit for bit and used by the tests of
a plan's stream; the tests of what the stream is (statistics, padding, dropout's scale,
eager against compiled) lower on the default backend, whose plan of the same ops equals
the reference bit for bit too (``tests/compiler/backends/test_llvm_backend.py``)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from test_op_gradients import check_gradients

import tensorcode as tc
from tensorcode.compiler.core import philox
from tensorcode.errors import RandomError


def test_philox_known_answers():
    # Random123's philox4x32_10 known-answer vectors
    zero = np.zeros(1, np.uint64)
    ones = np.full(1, 0xFFFFFFFF, np.uint64)
    assert [int(w[0]) for w in philox.philox4x32(zero, zero, zero, zero, zero, zero)] == \
        [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert [int(w[0]) for w in philox.philox4x32(ones, ones, ones, ones, ones, ones)] == \
        [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    pi = [np.full(1, v, np.uint64) for v in (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344,
                                                0xA4093822, 0x299F31D0)]
    assert [int(w[0]) for w in philox.philox4x32(*pi)] == \
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def test_own_math_is_accurate():
    rng = np.random.default_rng(0)
    for x in rng.random(2000):
        assert abs(philox.log(x) - np.log(x)) <= 4e-16 * abs(np.log(x)) + 1e-300
        assert abs(philox.exp(-30 * x) - np.exp(-30 * x)) <= 4e-16 * np.exp(-30 * x)
        assert abs(philox.cos_turns(x) - np.cos(2 * np.pi * x)) <= 2e-15


def _program():
    tape = tc.Tape()
    key = tape.random_key()
    logits = tape.input(np.random.default_rng(1).normal(size=(6, 9)) * 2, name="logits")
    roots = [tc.random.random_uniform(key, (3, 5)),
             tc.random.random_uniform(key, (37, 29)),  # long enough for vector loops
             tc.random.bernoulli(key, 0.9, (101, 3)),
             tc.random.random_uniform(key, (257,), "float64"),
             tc.random.random_uniform(key, (7,), "float64"),
             tc.random.random_normal(key, (9,)),
             tc.random.random_normal(key, (2, 3), "float64"),
             tc.random.bernoulli(key, 0.3, (11,)),
             tc.random.bernoulli(key, 0.5, (5,), "int32"),
             tc.random.categorical(key, logits, 0.7),
             tc.random.categorical(key, logits.astype("float32").T.T * 1.0, 1.3, top_k=3,
                                   top_p=0.8),
             tc.random.categorical(key, logits.T, 1.0, top_p=0.5),  # a strided view
             tc.nn.dropout(logits.astype("float32"), 0.25)]
    return tape.into_network(), roots


@pytest.fixture(scope="module")
def program():
    network, roots = _program()
    return network, roots, network.entry(roots).lower("numba")


def test_numba_and_reference_draw_the_same_bits(program):
    network, roots, plan = program
    reference = network.entry(roots).lower("reference")
    assert plan.takes_randomness and plan.random_blocks == reference.random_blocks
    for seed in (0, 7):
        a, b = tc.random.Generator(seed), tc.random.Generator(seed)
        for _ in range(2):
            left = plan.forward(network.parameters(), generator=a)
            right = reference.forward(network.parameters(), generator=b)
            for r in roots:
                x, y = left.of(r), right.of(r)
                assert x.dtype == y.dtype and np.array_equal(x, y), r
        assert a.counter == b.counter == 2 * plan.random_blocks


def test_a_batch_draws_as_consecutive_calls(program):
    network, roots, plan = program
    logits = network.inputs()[1]
    batch = np.stack([np.random.default_rng(k).normal(size=(6, 9)) for k in range(3)])
    g = tc.random.Generator(3)
    run = plan.forward_batch(network.parameters(), {logits: batch}, generator=g)
    h = tc.random.Generator(3)
    for c in range(3):
        one = plan.forward(network.parameters(), {logits: batch[c]}, generator=h)
        for r in roots:
            assert np.array_equal(run.of(r)[c], one.of(r))
    assert g.counter == h.counter == 3 * plan.random_blocks


def test_padding_rows_never_shift_a_real_rows_draws():
    def draws(rows):
        tape = tc.Tape()
        u = tc.random.random_uniform(tape.random_key(), (rows, 5))
        network = tape.into_network()
        plan = network.entry([u]).lower()
        return plan.forward(network.parameters(), generator=tc.random.Generator(1)).of(u)
    assert np.array_equal(draws(8)[:3], draws(3))


def test_threads_with_their_own_generators_match_sequential_calls(program):
    network, roots, plan = program
    table = network.parameters()
    expected = {s: plan.forward(table, generator=tc.random.Generator(s)).of(roots[0])
                for s in range(6)}
    got: dict[int, np.ndarray] = {}

    def work(seed):
        got[seed] = plan.forward(table, generator=tc.random.Generator(seed)).of(roots[0])
    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(got[s], expected[s]) for s in range(6))


def test_statistics():
    tape = tc.Tape()
    key = tape.random_key()
    n = 200_000
    u = tc.random.random_uniform(key, (n,), "float64")
    z = tc.random.random_normal(key, (n,), "float64")
    b = tc.random.bernoulli(key, 0.3, (n,))
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    rows = tape.input(np.tile(logits, (20_000, 1)))
    c = tc.random.categorical(key, rows)
    k = tc.random.categorical(key, rows, top_k=2)
    p = tc.random.categorical(key, rows, top_p=0.65)
    network = tape.into_network()
    run = network.entry([u, z, b, c, k, p]).lower().forward(
        network.parameters(), generator=tc.random.Generator(11))
    assert abs(run.of(u).mean() - 0.5) < 0.005 and abs(run.of(u).var() - 1 / 12) < 0.002
    assert run.of(u).min() >= 0 and run.of(u).max() < 1
    assert abs(run.of(z).mean()) < 0.01 and abs(run.of(z).std() - 1) < 0.01
    assert abs(run.of(b).mean() - 0.3) < 0.005
    counts = np.bincount(run.of(c), minlength=4) / 20_000
    np.testing.assert_allclose(counts, [0.1, 0.2, 0.3, 0.4], atol=0.015)
    assert set(np.unique(run.of(k))) == {2, 3}  # the two most likely
    np.testing.assert_allclose(np.bincount(run.of(k), minlength=4)[2:] / 20_000,
                               [3 / 7, 4 / 7], atol=0.015)
    assert set(np.unique(run.of(p))) == {2, 3}  # 0.4 + 0.3 reaches 0.65


def test_dropout_scales_kept_elements_and_eval_draws_nothing():
    tape = tc.Tape()
    x = tape.input(np.ones((400, 50), np.float32))
    y = tc.nn.dropout(x, 0.2)
    module = tc.nn.Dropout(0.2).eval()
    z = module(x)
    assert z is x  # the identity: nothing recorded, nothing drawn
    network = tape.into_network()
    out = network.entry([y]).lower().forward(
        network.parameters(), generator=tc.random.Generator(0)).of(y)
    kept = out != 0
    assert abs(kept.mean() - 0.8) < 0.01
    assert np.all(out[kept] == np.float32(1.0) * np.float32(1 / 0.8))
    plain = tc.Tape()
    w = plain.input(np.ones(3, np.float32))
    assert tc.nn.dropout(w, 0.5, training=False) is w
    assert tc.nn.dropout(w, 0.0) is w


def test_dropout_gradient_flows_through_kept_elements_only():
    # a constant key: one fixed mask for every finite difference
    def fn(tape, a):
        key = tape.leaf(tc.random.Generator(4).key_state())
        return tc.nn.dropout(a * 1.0, 0.4, key=key) * a
    network = check_gradients([np.linspace(-1, 1, 12).reshape(3, 4)], fn)
    mask = [n for n in network.graph.nodes if n.op == "bernoulli"]
    assert len(mask) == 1


def test_network_forward_draws_from_a_generator():
    tape = tc.Tape()
    x = tape.input(np.ones(64, np.float64))
    y = tc.nn.dropout(x, 0.5)
    network = tape.into_network()
    with pytest.raises(RandomError, match="generator"):
        network.forward(network.parameters())
    g = tc.random.Generator(2)
    eager = network.forward(network.parameters(), generator=g).of(y)
    plan = network.entry([y]).lower()
    assert g.counter == plan.random_blocks
    assert np.array_equal(eager, plan.forward(network.parameters(),
                                              generator=tc.random.Generator(2)).of(y))


def test_a_random_plan_without_a_generator_is_refused(program):
    network, roots, plan = program
    with pytest.raises(RandomError, match=r"generator=tc\.random\.Generator"):
        plan.forward(network.parameters())
    with pytest.raises(RandomError, match="generator"):
        plan.forward_batch(network.parameters(), {})
    key = network.inputs()[0]
    fed = plan.forward(network.parameters(), {key: tc.random.Generator(0).key_state()})
    same = plan.forward(network.parameters(), generator=tc.random.Generator(0))
    assert np.array_equal(fed.of(roots[0]), same.of(roots[0]))


@pytest.mark.parametrize("call, match", [
    (lambda k, x: tc.nn.dropout(x, 1.0), "dropout p"),
    (lambda k, x: tc.nn.dropout(x, -0.1), "dropout p"),
    (lambda k, x: tc.nn.Dropout(float("nan")), "dropout p"),
    (lambda k, x: tc.random.bernoulli(k, 1.5, (2,)), "bernoulli p"),
    (lambda k, x: tc.random.categorical(k, x, temperature=0), "temperature"),
    (lambda k, x: tc.random.sample(x, k, temperature=-1.0), "temperature"),
    (lambda k, x: tc.random.categorical(k, x, top_k=0), "top_k"),
    (lambda k, x: tc.random.sample(x, k, top_k=2.5), "top_k"),
    (lambda k, x: tc.random.categorical(k, x, top_p=0), "top_p"),
    (lambda k, x: tc.random.sample(x, k, top_p=1.5), "top_p"),
])
def test_bad_arguments_raise_random_error_naming_them(call, match):
    tape = tc.Tape()
    key = tape.random_key()
    x = tape.input(np.zeros((2, 3), np.float32))
    before = len(tape)
    with pytest.raises(RandomError, match=match):
        call(key, x)
    assert len(tape) == before


def test_sample_eager_is_reproducible_and_compiled_once():
    logits = np.random.default_rng(0).normal(size=(4, 50)).astype(np.float32)
    a = [tc.random.sample(logits, tc.random.Generator(9), top_k=10, top_p=0.9)
         for _ in range(2)]
    assert np.array_equal(a[0], a[1]) and a[0].shape == (4,) and a[0].dtype == np.int64
    g = tc.random.Generator(9)
    first, second = tc.random.sample(logits, g), tc.random.sample(logits, g)
    assert g.counter == 2 * 2  # 4 rows x 2 words = 2 blocks per call
    assert not np.array_equal(first, second) or True  # consecutive calls advance
    with pytest.raises(RandomError, match="Generator"):
        tc.random.sample(logits, None)


def test_generator_state_is_javascript_safe_and_resumes_the_plan_stream(program):
    network, roots, plan = program
    g = tc.random.Generator(2 ** 70 + 5)
    plan.forward(network.parameters(), generator=g)
    state = json.loads(json.dumps(g.get_state()))

    def ints(value):
        if isinstance(value, dict):
            return [i for v in value.values() for i in ints(v)]
        return [value] if isinstance(value, int) else []
    assert all(abs(i) <= 2 ** 53 for i in ints(state))
    twin = tc.random.Generator(0)
    twin.set_state(state)
    a = plan.forward(network.parameters(), generator=g).of(roots[7])
    b = plan.forward(network.parameters(), generator=twin).of(roots[7])
    assert np.array_equal(a, b) and twin.get_state() == g.get_state()

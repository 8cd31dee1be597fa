"""Plans give the same bits for any thread count: a partitioned loop's chunks are fixed by
the loop program, not by the threads, and a reduction combines its chunks in order.

Each workload runs at 1, 2, 3 and 8 threads (``tc.set_num_threads``; 8 on a 2-core
machine shares the cores, which must not matter either) and every result is compared bit
for bit with the one-thread result: a forward plan large enough to be partitioned, a
fused training step, GPT decode steps (one with its vocabulary head split into blocks)
and random draws."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.backends import threads
from tensorcode.compiler.lower import loops
from tensorcode.models import gpt2
from tensorcode.nn.transformer import GptConfig

THREADS = (1, 2, 3, 8)


@pytest.fixture(autouse=True)
def restore_threads():
    yield
    tc.set_num_threads(threads.available_cpus())


def _each_thread_count(run):
    """``run()``'s arrays at every thread count, each equal to the one-thread result."""
    results = {}
    for n in THREADS:
        tc.set_num_threads(n)
        results[n] = [np.array(a, copy=True) for a in run()]
    for n in THREADS[1:]:
        for k, (got, want) in enumerate(zip(results[n], results[1])):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got, want, equal_nan=True), f"{n} threads, output {k}"
    return results[1]


def _wide_mlp(rows=512):
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [64, 256, 256, 10], activation="tanh", init=tc.init.xavier(3))
    x = tape.input(np.random.default_rng(0).normal(size=(rows, 64)).astype(np.float32),
                   name="x")
    y = tape.input(np.random.default_rng(1).integers(0, 10, rows), name="y")
    logits = mlp(x)
    loss = tc.cross_entropy(logits, y)
    norm = tc.layer_norm(logits).sum(axis=1)
    roots = [logits, norm, logits.softmax(axis=1)]
    adjoints = tape.differentiate(loss, mlp.parameters())
    return tape.into_network(), adjoints, roots


def test_forward_plans_agree_across_thread_counts():
    network, adjoints, roots = _wide_mlp()
    plan = network.entry(roots + list(adjoints.roots())).lower()
    assert any(s.annotations.partition for k in plan.program.loops for s in k.body
               if isinstance(s, loops.Loop))  # the test splits real loops
    parameters = network.parameters()
    outputs = _each_thread_count(
        lambda: [plan.forward(parameters).of(r) for r in roots + list(adjoints.roots())])
    assert np.isfinite(outputs[0]).all()


def test_fused_steps_agree_across_thread_counts():
    network, adjoints, _ = _wide_mlp(256)

    def run():
        optimizer = tc.optim.Adam()
        step = network.entry(adjoints.roots()).lower(optimizer=optimizer)
        parameters = network.parameters()
        bound = step.bind(parameters, optimizer)
        inputs = [network.graph.nodes[s.index].value for s in step.inputs()]
        losses = [bound(1e-3, *inputs) for _ in range(3)]
        return [np.array(losses), *bound.parameters.payloads()]
    _each_thread_count(run)


def test_decode_agrees_across_thread_counts():
    config = GptConfig(vocab_size=65, block_size=32, n_layer=2, n_head=4, n_embd=64)
    model = gpt2.GptModel(config, seed=0, context=16, cache_length=16)

    def run():
        decoder = model.decoder()
        return [decoder.step(np.array([t])) for t in (3, 1, 4, 1, 5)]
    _each_thread_count(run)


def test_decode_with_a_split_head_agrees_across_thread_counts():
    # a vocabulary large enough that the head's one-row product runs as blocks of the
    # embedding table's rows on the pool (``partition._split_mat_vec``)
    config = GptConfig(vocab_size=33_000, block_size=16, n_layer=1, n_head=2, n_embd=64)
    model = gpt2.GptModel(config, seed=0, context=8, cache_length=8)
    head = model.layered()._plan("step_head")
    assert any(isinstance(s, loops.Loop) and s.annotations.partition
               for k in head.program.loops for s in k.body)

    def run():
        decoder = model.decoder()
        return [decoder.step(np.array([t])) for t in (3, 32_999, 4)]
    _each_thread_count(run)


def test_random_draws_agree_across_thread_counts():
    tape = tc.Tape()
    key = tape.random_key()
    x = tape.input(np.ones((300, 70), np.float32), name="x")
    roots = [tc.random.random_uniform(key, (300, 70)), tc.random.random_normal(key, (1000,)),
             tc.nn.dropout(x, 0.25), tc.random.bernoulli(key, 0.3, (513,))]
    network = tape.into_network()
    plan = network.entry(roots).lower()
    parameters = network.parameters()
    _each_thread_count(lambda: [plan.forward(parameters, generator=tc.random.Generator(7)).of(r)
                                for r in roots])

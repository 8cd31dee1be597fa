"""The transformer blocks: GPT-2's parameter paths, the decode form against the full
context, and the loss's recorded gradients against float64 finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ShapeError
from tensorcode.nn.transformer import Gpt, GptConfig

TINY = GptConfig(vocab_size=7, block_size=4, n_layer=1, n_head=2, n_embd=4)


def test_the_config_is_validated():
    with pytest.raises(ShapeError, match="divisible"):
        GptConfig(vocab_size=7, block_size=4, n_layer=1, n_head=3, n_embd=4)
    with pytest.raises(ShapeError, match="n_layer"):
        GptConfig(vocab_size=7, block_size=4, n_layer=0, n_head=1, n_embd=4)
    assert GptConfig(50257, 1024, 12, 12, 768).parameter_count() == 124_439_808


def test_the_table_is_the_edges_then_one_contiguous_run_per_block():
    tape = tc.Tape()
    gpt = Gpt(tape, GptConfig(vocab_size=5, block_size=3, n_layer=2, n_head=1, n_embd=2))
    recorded = [p.builder.nodes()[p.index].name for p in tape.parameters()]
    assert recorded[:4] == ["wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"]
    assert recorded[4:16] == ["h.0." + name for name, _ in gpt.blocks[0].named_parameters()]
    assert recorded[16:] == ["h.1." + name for name, _ in gpt.blocks[1].named_parameters()]
    visited = [name for name, _ in gpt.named_parameters()]
    assert visited[:3] == ["wte.weight", "wpe.weight", "h.0.ln_1.weight"]
    assert visited[-2:] == ["ln_f.weight", "ln_f.bias"]


def test_the_loss_gradients_match_float64_finite_differences():
    tape = tc.Tape()
    gpt = Gpt(tape, TINY, init=tc.init.normal(4, 0.5), dtype="float64")
    rng = np.random.default_rng(0)
    ids = tape.input(rng.integers(0, 7, (2, 4)), name="ids")
    targets = tape.input(rng.integers(0, 7, (2, 4)), name="targets")
    loss = gpt.loss(gpt(ids), targets)
    adjoints = tape.differentiate(loss, gpt.parameters())
    network = tape.into_network()
    parameters = network.parameters()
    # layer-norm gains and biases away from 1 and 0 so every path carries gradient
    parameters = parameters.replace({
        symbol: parameters.of(symbol) + rng.normal(0, 0.3, symbol.shape)
        for name, symbol in gpt.named_parameters() if name.endswith(("ln_1.weight", "bias"))})
    gradients = network.forward(parameters).recorded_gradients(adjoints)
    step = 1e-6
    for name, symbol in gpt.named_parameters():
        base = parameters.of(symbol)
        for flat in rng.choice(base.size, size=min(3, base.size), replace=False):
            shifted = []
            for sign in (1, -1):
                value = base.copy()
                value.reshape(-1)[flat] += sign * step
                run = network.forward(parameters.replace({symbol: value}))
                shifted.append(float(run.of(loss)))
            numeric = (shifted[0] - shifted[1]) / (2 * step)
            recorded = gradients.of(symbol).reshape(-1)[flat]
            assert abs(numeric - recorded) <= 1e-6 + 1e-5 * abs(numeric), (name, flat)


def test_the_decode_form_reproduces_the_full_context_in_float64():
    tape = tc.Tape()
    gpt = Gpt(tape, TINY, init=tc.init.normal(2, 0.5), dtype="float64")
    ids_value = np.array([[1, 5, 2, 6]])
    full = gpt(tape.input(ids_value, name="ids"))
    token = tape.input(np.zeros(1, np.int64), name="token")
    position = tape.input(np.zeros(1, np.int64), name="position")
    caches = [(tape.input(np.zeros(gpt.cache_shape(1), np.float64)),
               tape.input(np.zeros(gpt.cache_shape(1), np.float64)))]
    logits, updated = gpt.step(token, position, caches)
    network = tape.into_network()
    parameters = network.parameters()
    expected = network.forward(parameters).of(full)[0]
    state = [np.zeros(gpt.cache_shape(1)), np.zeros(gpt.cache_shape(1))]
    for k in range(4):
        run = network.forward(parameters, {token: ids_value[:, k], position: [k],
                                           caches[0][0]: state[0], caches[0][1]: state[1]})
        np.testing.assert_allclose(run.of(logits)[0], expected[k], rtol=1e-12, atol=1e-12)
        state = [run.of(updated[0][0]), run.of(updated[0][1])]


def test_the_two_halves_around_an_in_place_cache_write_equal_the_decode_form():
    tape = tc.Tape()
    gpt = Gpt(tape, TINY, init=tc.init.normal(4, 0.5), dtype="float64")
    block = gpt.blocks[0]
    shape = gpt.cache_shape(1)
    x = tape.input(np.zeros((1, 1, TINY.n_embd)), name="x")
    position = tape.input(np.zeros(1, np.int64), name="position")
    keys, values = tape.input(np.zeros(shape), name="k"), tape.input(np.zeros(shape), name="v")
    query = tape.input(np.zeros((1, TINY.n_head, 1, TINY.head_dim)), name="q")
    whole, k_new, v_new = block.step(x, position, keys, values)
    q, k, v = block.step_project(x)
    finished = block.step_finish(x, query, position, keys, values)
    network = tape.into_network()
    parameters = network.parameters()
    rng = np.random.default_rng(0)
    ours = [np.zeros(shape), np.zeros(shape)]  # written in place between the halves
    theirs = [np.zeros(shape), np.zeros(shape)]  # carried through the decode form
    for at in range(TINY.block_size):
        row = rng.standard_normal((1, 1, TINY.n_embd))
        feeds = {x: row, position: [at], keys: theirs[0], values: theirs[1]}
        run = network.forward(parameters, feeds)
        theirs = [run.of(k_new), run.of(v_new)]
        halves = network.forward(parameters, {x: row})
        ours[0][:, :, at], ours[1][:, :, at] = halves.of(k)[:, :, 0], halves.of(v)[:, :, 0]
        out = network.forward(parameters, {x: row, query: halves.of(q), position: [at],
                                           keys: ours[0], values: ours[1]}).of(finished)
        np.testing.assert_allclose(out, run.of(whole), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(ours[0], theirs[0])

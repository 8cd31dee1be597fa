"""Layered GPT training against the one-tape gradients, finite differences and PyTorch.

The pieces run on the reference interpreter: the layered runner is the same code on
every backend, and each op's compiled kernel is held to the interpreter elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_gpt2 import released_tensors, torch_forward

import tensorcode as tc
from tensorcode.compiler.plans.tables import Parameters
from tensorcode.errors import FeedError
from tensorcode.models import gpt2
from tensorcode.models.gpt_training import PLANS
from tensorcode.nn.transformer import GptConfig

CONFIG = GptConfig(vocab_size=13, block_size=6, n_layer=2, n_head=2, n_embd=8)
BATCH, CONTEXT = 2, 5


def float64(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.astype(np.float64) for k, v in tensors.items()}


@pytest.fixture(scope="module")
def tensors():
    return float64(released_tensors(CONFIG, seed=11))


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(4)
    return (rng.integers(0, CONFIG.vocab_size, (BATCH, CONTEXT)),
            rng.integers(0, CONFIG.vocab_size, (BATCH, CONTEXT)))


def make_model(tensors, **options) -> gpt2.GptModel:
    model = gpt2.GptModel(CONFIG, batch=BATCH, context=CONTEXT, init="zeros",
                          backend="reference", dtype="float64", **options)
    model.restore(tensors)
    return model


@pytest.fixture(scope="module")
def model(tensors):
    return make_model(tensors, train=True)


def test_layered_gradients_equal_the_one_tape_gradients(model, batch):
    ids, targets = batch
    loss, gradients = model.gradients(ids, targets)
    run = model.plan("train").forward(model.parameters, {model.ids: ids,
                                                         model.targets: targets})
    whole = run.recorded_gradients(model.adjoints)
    assert loss == pytest.approx(float(run.of(model.loss)), rel=1e-13)
    assert gradients.layout is model.network.layout
    for (path, symbol) in model.named_parameters():
        np.testing.assert_allclose(gradients.of(symbol), whole.of(symbol), rtol=1e-11,
                                   atol=1e-13, err_msg=path)


def test_the_plans_do_not_grow_with_depth(model):
    deeper = gpt2.GptModel(GptConfig(vocab_size=13, block_size=6, n_layer=5, n_head=2,
                                     n_embd=8), batch=BATCH, context=CONTEXT,
                           backend="reference", dtype="float64")
    for name in PLANS:  # the same five programs, whatever the depth
        assert deeper.training().plan(name).describe() == \
            model.training().plan(name).describe(), name


def test_layered_gradients_match_finite_differences(model, batch):
    ids, targets = batch
    _, gradients = model.gradients(ids, targets)
    network, layout = model.network, model.network.layout
    base = model.parameters.buffers()["float64"]
    feeds = {model.ids: ids, model.targets: targets}
    rng = np.random.default_rng(0)
    eps = 1e-6
    for slot in layout.slots:  # a random direction within each parameter
        direction = np.zeros_like(base)
        direction[slot.offset:slot.offset + slot.size] = rng.standard_normal(slot.size)

        def loss_at(sign: float) -> float:
            table = Parameters.from_buffers(layout, {"float64": base + sign * eps * direction})
            return float(network.forward(table, feeds).of(model.loss))
        numeric = (loss_at(1.0) - loss_at(-1.0)) / (2 * eps)
        analytic = float(gradients.buffers()["float64"] @ direction)
        assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-8), slot.label


def test_adamw_steps_match_pytorch(tensors, batch):
    ids, targets = batch
    model = make_model(tensors)
    optimizer = tc.optim.AdamW(weight_decay=0.1, backend="reference")
    w = {k: torch.tensor(v, requires_grad=True) for k, v in tensors.items()}
    reference = torch.optim.AdamW(list(w.values()), lr=1e-2, weight_decay=0.1)
    ids_t, targets_t = torch.from_numpy(ids), torch.from_numpy(targets)
    for _ in range(3):
        loss = model.train_step(ids, targets, optimizer, 1e-2)
        reference.zero_grad()
        expected = torch.nn.functional.cross_entropy(
            torch_forward(w, CONFIG, ids_t).reshape(-1, CONFIG.vocab_size),
            targets_t.reshape(-1))
        expected.backward()
        reference.step()
        assert loss == pytest.approx(expected.item(), rel=1e-12)
    state = model.state()
    assert set(state) == set(w)
    for path, value in w.items():
        np.testing.assert_allclose(state[path], value.detach().numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=path)
    assert not np.array_equal(state["h.1.mlp.c_fc.weight"], tensors["h.1.mlp.c_fc.weight"])


def test_training_refuses_batches_of_another_shape_or_range(model, batch):
    ids, targets = batch
    with pytest.raises(FeedError, match=r"targets must be an int array \[2, 5\]"):
        model.gradients(ids, targets[:, :3])
    with pytest.raises(FeedError, match=r"ids must lie in \[0, 13\)"):
        model.gradients(ids + CONFIG.vocab_size, targets)


def test_the_compiled_plans_give_the_interpreters_gradients(tensors, batch):
    ids, targets = batch
    single = {k: v.astype(np.float32) for k, v in tensors.items()}
    compiled = gpt2.GptModel(CONFIG, batch=BATCH, context=CONTEXT, init="zeros")
    compiled.restore(single)
    interpreted = gpt2.GptModel(CONFIG, batch=BATCH, context=CONTEXT, init="zeros",
                                backend="reference")
    interpreted.restore(single)
    loss, gradients = compiled.gradients(ids, targets)
    expected_loss, expected = interpreted.gradients(ids, targets)
    assert loss == pytest.approx(expected_loss, rel=1e-6)
    np.testing.assert_allclose(gradients.buffers()["float32"],
                               expected.buffers()["float32"], rtol=1e-4, atol=1e-6)

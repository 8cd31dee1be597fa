"""Parameters the loss does not reach are skipped as PyTorch skips ``grad is None``: for
every optimizer option, a trajectory in which some slots go unreached on some steps
(including a slot's first step) equals ``torch.optim``'s with those gradients set to
``None``, parameters and state (which slots have state, their step counts)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from promised import assert_promised_equal

import tensorcode as tc
from tensorcode.compiler.plans.tables import Gradients

CONFIGS = {
    "sgd": ({}, {}),
    "sgd-momentum-dampening-decay": (dict(momentum=0.9, dampening=0.3, weight_decay=0.01),
                                     dict(momentum=0.9, dampening=0.3, weight_decay=0.01)),
    "sgd-nesterov-maximize": (dict(momentum=0.7, nesterov=True, weight_decay=0.1,
                                   maximize=True),
                              dict(momentum=0.7, nesterov=True, weight_decay=0.1,
                                   maximize=True)),
    "adam": ({}, {}),
    "adam-amsgrad-decay": (dict(betas=(0.3, 0.5), amsgrad=True, weight_decay=0.1),
                           dict(betas=(0.3, 0.5), amsgrad=True, weight_decay=0.1)),
    "adam-maximize-eps": (dict(eps=1e-3, maximize=True), dict(eps=1e-3, maximize=True)),
    "adamw": ({}, {}),
    "adamw-amsgrad": (dict(amsgrad=True, weight_decay=0.2), dict(amsgrad=True,
                                                                 weight_decay=0.2)),
}
CLASSES = {"sgd": (tc.optim.Sgd, torch.optim.SGD), "adam": (tc.optim.Adam, torch.optim.Adam),
           "adamw": (tc.optim.AdamW, torch.optim.AdamW)}
SHAPES = [(3, 2), (4,), (2, 2)]
#: per step, which slots the loss reaches (slot 2 starts unreached: its first update
#: comes late; slot 1 drops out for two steps after it has state)
REACHED = [(True, True, False), (True, True, False), (True, False, True), (True, False, True),
           (True, True, True), (False, True, True), (True, True, False), (True, True, True)]


def classes(name: str):
    return CLASSES[name.split("-")[0]]


@pytest.mark.parametrize("backend", ["numba", "reference"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_unreached_slots_match_torch_grad_none(name, backend):
    ours_kwargs, torch_kwargs = CONFIGS[name]
    ours_cls, torch_cls = classes(name)
    rng = np.random.default_rng(3)
    initial = [rng.standard_normal(s) for s in SHAPES]
    tape = tc.Tape()
    for k, value in enumerate(initial):
        tape.parameter(value, name=f"p{k}")
    parameters = tape.into_network().parameters()
    optimizer = ours_cls(**ours_kwargs, backend=backend)
    tensors = [torch.tensor(v, requires_grad=True) for v in initial]
    reference = torch_cls(tensors, lr=0.01, foreach=False, **torch_kwargs)
    for t, reached in enumerate(REACHED):
        grads = [rng.standard_normal(s) for s in SHAPES]
        lr = 0.01 + 0.002 * t
        table = Gradients.from_payloads(parameters.layout, [
            g if r else np.zeros(g.shape) for g, r in zip(grads, reached)])
        parameters = optimizer.step(parameters, table.mark_reached(reached), lr)
        for tensor, g, r in zip(tensors, grads, reached):
            tensor.grad = torch.from_numpy(g.copy()) if r else None
        for group in reference.param_groups:
            group["lr"] = lr
        reference.step()
        for k, (ours, theirs) in enumerate(zip(parameters.payloads(), tensors)):
            np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-10, atol=1e-14,
                                       err_msg=f"step {t + 1}, parameter {k}")
    ours_state = optimizer.state_dict()["state"]
    theirs_state = reference.state_dict()["state"]
    assert sorted(ours_state) == sorted(theirs_state)
    for index, entry in theirs_state.items():
        assert sorted(ours_state[index]) == sorted(entry)
        for key, value in entry.items():
            np.testing.assert_allclose(np.asarray(ours_state[index][key], np.float64),
                                       value.numpy().astype(np.float64), rtol=1e-10,
                                       atol=1e-14, err_msg=f"state[{index}].{key}")


@pytest.mark.parametrize("name", ["sgd-momentum-dampening-decay", "adam-amsgrad-decay",
                                  "adamw"])
def test_compiled_and_reference_skip_alike(name):
    """The same slots skipped and the same step counts; values as promised
    (``promised.py``: bit for bit for SGD, within a few ulps through Adam's ``pow``)."""
    ours_kwargs, _ = CONFIGS[name]
    ours_cls, _ = classes(name)
    rng = np.random.default_rng(4)
    tape = tc.Tape()
    for k, (shape, dtype) in enumerate([((3, 2), "float32"), ((4,), "float64"),
                                        ((5,), "float32")]):
        tape.parameter(rng.standard_normal(shape).astype(dtype), name=f"p{k}")
    start = tape.into_network().parameters()
    compiled, interpreted = ours_cls(**ours_kwargs), ours_cls(**ours_kwargs,
                                                              backend="reference")
    a = b = start
    for reached in REACHED:
        grads = [rng.standard_normal(p.shape).astype(p.dtype) for p in start.payloads()]
        table = Gradients.from_payloads(start.layout, grads).mark_reached(reached)
        a, b = compiled.step(a, table, 0.05), interpreted.step(b, table, 0.05)
        exact = compiled.recorded_rule(["float32", "float64"]).exact
        for ours, theirs in zip(a.payloads(), b.payloads()):
            assert_promised_equal(ours, theirs, exact, name)
    assert np.array_equal(compiled.steps, interpreted.steps)
    assert np.array_equal(compiled.present, interpreted.present)


def test_recorded_gradients_mark_what_the_loss_reaches():
    tape = tc.Tape()
    x = tape.input(np.ones((2, 3)), name="x")
    used = tape.parameter(np.full((3, 1), 0.5), name="used")
    idle = tape.parameter(np.ones(2), name="idle")
    flat = tape.parameter(np.ones(3), name="flat")   # reached only through a comparison
    loss = ((x @ used) ** 2).mean() + ((flat > 0) * 1.0).sum()
    adjoints = tape.differentiate(loss, [used, idle, flat])
    assert adjoints.reached == (True, False, False)
    reached_all = tape.differentiate(((x @ used) ** 2).mean(), [used, flat])
    assert reached_all.reached == (True, False)
    network = tape.into_network()
    run = network.forward(network.parameters())
    assert run.recorded_gradients(adjoints).reached == (True, False, False)
    assert run.recorded_gradients(reached_all).reached == (True, False, False)  # idle: not in wrt
    gradients = run.recorded_gradients(adjoints)
    assert (gradients + gradients).reached == (True, False, False)
    assert (gradients * 2.0).reached == (True, False, False)

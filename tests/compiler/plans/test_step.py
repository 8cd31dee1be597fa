"""Step plans: the optimizer's update fused into the plan (``compiler/plans/step.py``).

Every fused trajectory is compared bit for bit with the unfused path (``plan.forward``,
``recorded_gradients``, ``opt.step``), for the built-in optimizers and for a custom
``RuleOptimizer``; ``run_steps`` against K single steps; state dicts against each other.
One small network, lowered once per optimizer configuration (module-scoped)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import CompileError, FeedError, TensorCodeError
from tensorcode.runtime import optim

BATCH = 12


class Signum(optim.RuleOptimizer):
    """Momentum with a normalized step, written with Expr operations."""

    state_keys = ("velocity",)

    def __init__(self, beta: float = 0.9) -> None:
        super().__init__()
        self.beta = beta

    def group(self):
        return {"beta": self.beta}

    def rule(self, p, g, state, lr):
        v = state["velocity"] * self.beta + g * (1 - self.beta)
        return p - lr * v / (abs(v).sqrt() + 1e-3), {"velocity": v}


class Summed(optim.RuleOptimizer):
    """A rule with a reduction: refused by the fused path."""

    def rule(self, p, g, state, lr):
        return p - lr * g.sum(), {}


CONFIGS = {
    "sgd": lambda: optim.Sgd(),
    "sgd-nesterov": lambda: optim.Sgd(momentum=0.9, weight_decay=0.01, nesterov=True,
                                      maximize=True),
    "adam": lambda: optim.Adam(weight_decay=0.01, maximize=True),
    "adamw-amsgrad": lambda: optim.AdamW(amsgrad=True),
    "signum": lambda: Signum(),
}


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    x = tape.input(rng.uniform(-1, 1, (BATCH, 2)).astype(np.float32), name="x")
    y = tape.input(rng.uniform(-1, 1, (BATCH, 1)).astype(np.float32), name="y")
    w1 = tape.parameter(rng.normal(0, 1, (2, 8)).astype(np.float32), name="w1")
    b1 = tape.parameter(np.zeros(8, np.float32), name="b1")
    w2 = tape.parameter(rng.normal(0, 1, (8, 1)).astype(np.float32), name="w2")
    b2 = tape.parameter(np.zeros(1, np.float32), name="b2")
    loss = tc.mse((x @ w1 + b1).tanh() @ w2 + b2, y)
    adjoints = tape.differentiate(loss, [w1, b1, w2, b2])
    network = tape.into_network()
    plan = network.entry(adjoints.roots()).lower()
    batches = {x: rng.uniform(-1, 1, (5, BATCH, 2)).astype(np.float32),
               y: rng.uniform(-1, 1, (5, BATCH, 1)).astype(np.float32)}
    return network, adjoints, plan, loss, batches


@pytest.fixture(scope="module")
def step_plans(model):
    network, adjoints, _, _, _ = model
    out = {}
    for name, make in CONFIGS.items():
        opt = make()
        out[name] = (network.entry(adjoints.roots()).lower(optimizer=opt), make)
    return out


def _unfused(model, opt, feeds_list, lrs):
    network, adjoints, plan, loss, _ = model
    parameters = network.parameters()
    losses = []
    for feeds, lr in zip(feeds_list, lrs):
        run = plan.forward(parameters, feeds)
        losses.append(float(run.of(loss)))
        parameters = opt.step(parameters, run.recorded_gradients(adjoints), lr)
    return parameters, losses


def _same_state(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    if sa["param_groups"] != sb["param_groups"] or sorted(sa["state"]) != sorted(sb["state"]):
        return False
    return all(np.array_equal(sa["state"][k][key], sb["state"][k][key])
               for k in sa["state"] for key in sa["state"][k])


def _feeds(model, k):
    _, _, _, _, batches = model
    return {symbol: array[k] for symbol, array in batches.items()}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_fused_steps_equal_the_unfused_path_bit_for_bit(model, step_plans, name):
    network = model[0]
    step_plan, make = step_plans[name]
    reference, fused = make(), make()
    lrs = [0.01, 0.02, 0.005, 0.01, 0.03]
    feeds = [_feeds(model, k) for k in range(5)]
    expected, expected_losses = _unfused(model, reference, feeds, lrs)
    parameters = network.parameters()
    losses = [step_plan.step(parameters, fused, f, lr) for f, lr in zip(feeds, lrs)]
    assert losses == expected_losses
    assert parameters.equals(expected)
    assert _same_state(fused, reference)
    assert fused.state_dict()["param_groups"][0]["lr"] == lrs[-1]


@pytest.mark.parametrize("name", ["sgd-nesterov", "adam", "signum"])
def test_run_steps_equals_single_steps(model, step_plans, name):
    network, _, _, _, batches = model
    step_plan, make = step_plans[name]
    single, many = make(), make()
    lrs = np.array([0.01, 0.02, 0.005, 0.01, 0.03])
    p_single, p_many = network.parameters(), network.parameters()
    expected = [step_plan.step(p_single, single, _feeds(model, k), float(lr))
                for k, lr in enumerate(lrs)]
    losses = step_plan.run_steps(p_many, many, batches, lrs)
    assert losses.dtype == np.float32 and losses.shape == (5,)
    assert losses.tolist() == expected
    assert p_many.equals(p_single)
    assert _same_state(many, single)


def test_fused_and_unfused_steps_alternate_on_one_optimizer(model, step_plans):
    network, adjoints, plan, _, _ = model
    step_plan, make = step_plans["adam"]
    a, b = make(), make()
    pa = network.parameters()
    for k in range(4):
        run = plan.forward(pa, _feeds(model, k))
        pa = a.step(pa, run.recorded_gradients(adjoints), 0.01)
    pb = network.parameters()
    for k in range(4):
        if k % 2:
            step_plan.step(pb, b, _feeds(model, k), 0.01)
        else:
            run = plan.forward(pb, _feeds(model, k))
            pb = b.step(pb, run.recorded_gradients(adjoints), 0.01)
    assert pa.equals(pb)
    assert _same_state(a, b)


def test_state_dict_round_trip_and_what_if_copies(model, step_plans):
    network = model[0]
    step_plan, make = step_plans["sgd-nesterov"]
    opt = make()
    parameters = network.parameters()
    step_plan.run_steps(parameters, opt, model[4], 0.01)
    saved = opt.state_dict()
    assert set(saved["state"][0]) == {"momentum_buffer"}
    # a what-if: a copy of the optimizer and of the table, stepped by the same plan
    what_if, branch = copy.deepcopy(opt), parameters.clone()
    step_plan.step(branch, what_if, None, 0.5)
    assert not branch.equals(parameters) and _same_state(opt, make()) is False
    assert np.array_equal(opt.state_dict()["state"][0]["momentum_buffer"],
                          saved["state"][0]["momentum_buffer"])
    # loading state into a bound optimizer: the plan picks up the new buffers
    fresh = make()
    fresh.load_state_dict(saved, parameters)
    p1, p2 = parameters.clone(), parameters.clone()
    step_plan.step(p1, opt, None, 0.01)
    step_plan.step(p2, fresh, None, 0.01)
    assert p1.equals(p2) and _same_state(opt, fresh)


def test_the_parameter_table_is_donated_and_stays_read_only(model, step_plans):
    network = model[0]
    step_plan, make = step_plans["sgd"]
    parameters = network.parameters()
    view = parameters.payloads()[0]
    before = view.copy()
    step_plan.step(parameters, make(), None, 0.1)
    assert not np.array_equal(view, before)  # updated in place, seen through old views
    with pytest.raises(ValueError):
        view[0, 0] = 1.0
    for buffer in parameters.buffers().values():
        assert not buffer.flags.writeable


def test_reference_backend_step_plan_matches(model, step_plans):
    network, adjoints, _, _, _ = model
    step_plan, make = step_plans["adam"]
    ref = network.entry(adjoints.roots()).lower("reference", optimizer=make())
    a, b = make(), make()
    pa, pb = network.parameters(), network.parameters()
    ref_losses = ref.run_steps(pa, a, model[4], 0.01)
    losses = step_plan.run_steps(pb, b, model[4], 0.01)
    np.testing.assert_allclose(ref_losses, losses, rtol=1e-5)
    for x, y in zip(pa.payloads(), pb.payloads()):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)


def test_refusals(model, step_plans):
    network, adjoints, _, loss, batches = model
    with pytest.raises(TensorCodeError, match="loss and one gradient per parameter"):
        network.entry([loss]).lower(optimizer=optim.Sgd())
    with pytest.raises(CompileError, match="not elementwise"):
        network.entry(adjoints.roots()).lower(optimizer=Summed())

    class Plain(optim.Optimizer):
        def update(self, parameters, gradients, lr):
            return parameters

    with pytest.raises(TensorCodeError, match="no fused rule"):
        network.entry(adjoints.roots()).lower(optimizer=Plain())
    step_plan, _ = step_plans["sgd"]
    with pytest.raises(TensorCodeError, match="configured differently"):
        step_plan.step(network.parameters(), optim.Sgd(momentum=0.5), None, 0.1)
    with pytest.raises(FeedError, match="disagree on K"):
        x, y = list(batches)
        step_plan.run_steps(network.parameters(), optim.Sgd(),
                            {x: batches[x], y: batches[y][:3]}, 0.1)
    with pytest.raises(ValueError, match="learning rates"):
        step_plan.run_steps(network.parameters(), optim.Sgd(), batches, [0.1, 0.2])
    with pytest.raises(ValueError, match="non-negative"):
        step_plan.step(network.parameters(), optim.Sgd(), None, -1.0)
    with pytest.raises(FeedError, match="expected shape"):
        step_plan.bind(network.parameters(), optim.Sgd())(0.1, np.zeros((3, 2), np.float32),
                                                           np.zeros((3, 1), np.float32))


def _sgd(backend: str) -> optim.Sgd:
    return optim.Sgd(momentum=0.9, weight_decay=0.1, backend=backend)


def _adamw(backend: str) -> optim.AdamW:
    return optim.AdamW(amsgrad=True, backend=backend)


# every backend with SGD, the compiled default and the reference with AdamW as well
@pytest.mark.parametrize("make, backend", [
    (_sgd, "llvm"), (_sgd, "numba"), (_sgd, "reference"),
    (_adamw, "llvm"), (_adamw, "reference")],
    ids=["sgd-momentum-decay-llvm", "sgd-momentum-decay-numba", "sgd-momentum-decay-reference",
         "adamw-amsgrad-llvm", "adamw-amsgrad-reference"])
def test_a_parameter_the_loss_does_not_reach_is_left_alone(make, backend):
    # PyTorch skips a parameter whose grad is None: no decay, no momentum, no step count
    rng = np.random.default_rng(1)
    tape = tc.Tape()
    x = tape.input(rng.uniform(-1, 1, (6, 2)).astype(np.float32), name="x")
    w = tape.parameter(rng.normal(0, 1, (2, 1)).astype(np.float32), name="w")
    idle = tape.parameter(rng.normal(0, 1, (3,)).astype(np.float32), name="idle")
    b = tape.parameter(np.zeros(1, np.float32), name="b")
    loss = ((x @ w + b) ** 2).mean()
    adjoints = tape.differentiate(loss, [w, idle, b])
    network = tape.into_network()
    fused, eager = make(backend), make(backend)
    step_plan = network.entry(adjoints.roots()).lower(optimizer=fused, backend=backend)
    assert step_plan.spec.skipped == frozenset({1})
    parameters, expected = network.parameters(), network.parameters()
    plan = network.entry(adjoints.roots()).lower(backend=backend)
    batches = {x: rng.uniform(-1, 1, (4, 6, 2)).astype(np.float32)}
    step_plan.run_steps(parameters, fused, batches, 0.05)
    for k in range(4):
        gradients = plan.forward(expected, {x: batches[x][k]}).recorded_gradients(adjoints)
        assert gradients.reached == (True, False, True)
        expected = eager.step(expected, gradients, 0.05)
    assert parameters.equals(expected)
    assert np.array_equal(parameters.of(idle), network.parameters().of(idle))
    assert _same_state(fused, eager)
    assert sorted(fused.state_dict()["state"]) == [0, 2] and fused.steps.tolist() == [4, 0, 4]

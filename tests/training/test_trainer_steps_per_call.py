"""``fit`` runs its updates K at a time (``steps_per_call``): one ``run_steps`` call for a
run of one structure when the optimizer fuses, one optimizer snapshot per call either
way. The trajectory equals one update at a time bit for bit, and a refused update is
named exactly, with the updates before it kept and nothing after it."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode import trace
from tensorcode.compiler.plans.step import StepPlan
from tensorcode.errors import TrainingError
from tensorcode.operations import LinearOperation, MlpOperation
from tensorcode.training import Trainer

REF = "reference"
LOSSES = {"scaled": lambda o, t: (o * t).mean(),           # gradient scales with t
          "flat_sqrt": lambda o, t: (o * 0.0 + t).sqrt().sum()}   # t = 0: NaN gradient


def _state(trainer):
    """Everything a step may change, exactly."""
    state = trainer.optimizer.state_dict()
    return (trainer.steps, trainer.generator.get_state(),
            [p.copy() for p in trainer.parameters.payloads()],
            {k: {n: np.array(v, copy=True) for n, v in e.items()}
             for k, e in state["state"].items()}, state["param_groups"])


def _assert_same(a, b):
    assert a[0] == b[0] and a[1] == b[1] and a[4] == b[4]
    assert all(np.array_equal(x, y) for x, y in zip(a[2], b[2]))
    assert a[3].keys() == b[3].keys()
    for k in a[3]:
        assert all(np.array_equal(a[3][k][n], b[3][k][n]) for n in a[3][k])


def _one_at_a_time(trainer, sessions, epochs, shuffle=True):
    """What ``fit`` does, spelled out with ``step``: an order per epoch, one update each."""
    losses = []
    for _ in range(epochs):
        order = trainer.generator.permutation(len(sessions)) if shuffle else \
            range(len(sessions))
        for k in order:
            losses.append(trainer.step(sessions[int(k)]))
    return losses


def _session(layer, x, target, loss):
    session = trace()
    out = session.run(lambda: layer(x))
    session.supervise(out, target, loss=loss, source="test")
    return session


def _linear_trainer(steps_per_call, optimizer=None, lr=0.1, backend=REF):
    layer = LinearOperation(2, 1, seed=3, backend=backend)
    trainer = Trainer.from_ops({"layer": layer}, lr=lr, backend=backend, seed=4,
                               optimizer=optimizer, losses=LOSSES,
                               steps_per_call=steps_per_call)
    return layer, trainer


def _mixed(layer, bad=None, bad_at=None):
    """Experiences of two structures (batch 3 and batch 2 rows); ``bad`` replaces the
    target of the one at ``bad_at``."""
    rng = np.random.default_rng(0)
    sessions = []
    for k in range(7):
        rows = 3 if k % 3 else 2
        x = rng.normal(size=(rows, 2)).astype(np.float32)
        target = np.full((rows, 1), 1e-6 * (k + 1), np.float32)
        loss = "scaled"
        if k == bad_at:
            loss, target = bad
        sessions.append(_session(layer, x, target, loss))
    return sessions


OPTIMIZERS = {"sgd": lambda: tc.optim.Sgd(momentum=0.9, backend=REF),
              "adam": lambda: tc.optim.Adam(backend=REF)}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_calls_of_k_updates_equal_one_update_at_a_time(name):
    layer, reference = _linear_trainer(1, OPTIMIZERS[name]())
    expected = (_one_at_a_time(reference, _mixed(layer), epochs=3), _state(reference))
    for k in (1, 3, 32):
        layer, trainer = _linear_trainer(k, OPTIMIZERS[name]())
        losses = trainer.fit(_mixed(layer), epochs=3, progress=False)
        assert losses == expected[0]
        _assert_same(_state(trainer), expected[1])
    assert expected[1][0] == 21


def test_one_snapshot_per_call_not_per_update(monkeypatch):
    layer, trainer = _linear_trainer(4, tc.optim.Sgd(momentum=0.9, backend=REF))
    taken = []
    original = trainer.optimizer.snapshot

    def counting():
        taken.append(1)
        return original()

    monkeypatch.setattr(trainer.optimizer, "snapshot", counting)
    experiences = _mixed(layer)
    trainer.fit(experiences, epochs=2, progress=False)
    assert trainer.steps == 14 and len(taken) < 14


@pytest.mark.parametrize("k", [4, 32])
@pytest.mark.parametrize("bad, message", [
    (("flat_sqrt", np.zeros((3, 1), np.float32)), r"gradient of .* \(nonfinite\)"),
    (("scaled", np.full((3, 1), 1e36, np.float32)), r"update leaves .* \(nonfinite\)"),
    (("flat_sqrt", np.full((3, 1), -1.0, np.float32)), r"loss is nan"),
], ids=["nan-gradient", "overflowing-update", "nan-loss"])
def test_a_refused_update_inside_a_call_is_named_and_the_ones_before_it_kept(k, bad, message):
    # lr 1e4: a gradient near 1e36 moves the weights past float32's range
    layer, reference = _linear_trainer(1, tc.optim.Sgd(momentum=0.5, backend=REF), lr=1e4)
    with pytest.raises(TrainingError, match=message):
        _one_at_a_time(reference, _mixed(layer, bad, bad_at=4), epochs=3)
    assert 0 < reference.steps < 21
    for shuffle in (True, False):
        layer, trainer = _linear_trainer(k, tc.optim.Sgd(momentum=0.5, backend=REF), lr=1e4)
        with pytest.raises(TrainingError, match=message):
            trainer.fit(_mixed(layer, bad, bad_at=4), epochs=3, shuffle=shuffle,
                        progress=False)
        if shuffle:  # the same updates kept, the same orders drawn, nothing after
            _assert_same(_state(trainer), _state(reference))
        else:
            assert trainer.steps == 4


class Clipped(tc.optim.RuleOptimizer):
    """A rule that turns an infinite gradient into a number: it does not reveal
    nonfinite values, so the trainer checks each of its updates."""

    state_keys = ("velocity",)

    def rule(self, p, g, state, lr):
        clipped = tc.minimum(g, g * 0.0 + 1.0)
        v = state["velocity"] * 0.5 + clipped
        return p - lr * v, {"velocity": v}


def test_an_optimizer_that_hides_nonfinite_values_is_checked_update_by_update():
    layer, trainer = _linear_trainer(8, Clipped(), lr=0.1)
    experiences = _mixed(layer, ("flat_sqrt", np.zeros((3, 1), np.float32)), bad_at=5)
    with pytest.raises(TrainingError, match=r"gradient of .* \(nonfinite\)"):
        trainer.fit(experiences, epochs=1, shuffle=False, progress=False)
    assert trainer.steps == 5


def test_steps_per_call_is_checked():
    with pytest.raises(ValueError, match="steps_per_call"):
        _linear_trainer(0)
    with pytest.raises(ValueError, match="steps_per_call"):
        _linear_trainer(True)


def test_compiled_calls_of_k_updates_with_dropout_equal_one_update_at_a_time():
    """The numba backend: one run_steps call per run, dropout masks drawn as one update
    at a time would draw them (the generator's key states fed per step)."""

    def make():
        mlp = MlpOperation([2, 8, 1], dropout=0.25, seed=2)
        rng = np.random.default_rng(1)
        sessions = []
        for _ in range(3):
            x = rng.normal(size=(4, 2)).astype(np.float32)
            session = trace()
            y = session.run(lambda: mlp(x))
            session.supervise(y, np.sin(x[:, :1]), loss="mse", source="synthetic")
            sessions.append(session)
        mlp.train()  # dropout draws while training, from the trainer's generator
        trainer = Trainer.from_ops({"mlp": mlp}, optimizer=tc.optim.Adam(), lr=0.01, seed=5,
                                   steps_per_call=4)
        return trainer, sessions

    fused, sessions = make()
    fused_losses = fused.fit(sessions, epochs=3, progress=False)
    (lowered,) = fused._steps.values()
    assert isinstance(lowered.plan, StepPlan) and lowered.plan.takes_randomness
    single, sessions = make()
    single_losses = []
    for _ in range(3):  # what fit does, one update at a time
        for k in single.generator.permutation(len(sessions)):
            single_losses.append(single.step(sessions[int(k)]))
    assert fused_losses == single_losses
    _assert_same(_state(fused), _state(single))

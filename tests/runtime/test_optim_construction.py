"""Optimizers built the way ``torch.optim`` builds them, ``AdamW(parameters, lr=...)``,
or bare: they own exactly the parameters they were built over (a step with others names
the parameters missing or extra), the learning rate stays an argument of every step, and
a constructed rate is the default the ``Trainer`` takes."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.plans.tables import Gradients
from tensorcode.operations import LinearOperation as Linear
from tensorcode.training import Trainer


def network(names_shapes, seed=0):
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    for name, shape in names_shapes:
        tape.parameter(rng.standard_normal(shape), name=name)
    return tape.into_network()


def ones_like(parameters):
    return Gradients.from_payloads(parameters.layout,
                                   [np.ones(p.shape) for p in parameters.payloads()])


@pytest.mark.parametrize("cls", [tc.optim.Sgd, tc.optim.Adam, tc.optim.AdamW])
def test_built_over_parameters_or_bare(cls):
    parameters = network([("w", (3, 2)), ("b", (2,))]).parameters()
    built = cls(parameters, lr=1e-3)
    assert built.layout is parameters.layout and built.constructed_lr == 1e-3
    assert built.state_dict()["param_groups"][0]["lr"] == 1e-3   # as torch.optim reports
    bare = cls()
    assert bare.layout is None and bare.constructed_lr is None
    a = built.step(parameters, ones_like(parameters), 0.01)       # lr: still every step's
    b = bare.step(parameters, ones_like(parameters), 0.01)
    assert a.equals(b) and built.lr == 0.01
    with pytest.raises(TypeError):
        built.step(parameters, ones_like(parameters))  # type: ignore[call-arg]


def test_positional_arguments_follow_torch_optim():
    parameters = network([("w", (2,))]).parameters()
    sgd = tc.optim.Sgd(parameters, 0.1, 0.9, 0.0, 0.01, True)
    assert (sgd.constructed_lr, sgd.momentum, sgd.dampening, sgd.weight_decay,
            sgd.nesterov) == (0.1, 0.9, 0.0, 0.01, True)
    adam = tc.optim.Adam(parameters, 0.01, (0.8, 0.9), 1e-6, 0.1, True)
    assert (adam.betas, adam.eps, adam.weight_decay, adam.amsgrad) == ((0.8, 0.9), 1e-6,
                                                                       0.1, True)


def test_a_step_with_other_parameters_names_the_missing_and_extra_ones():
    mine = network([("encoder.w", (3, 2)), ("head.w", (2, 1))]).parameters()
    theirs = network([("encoder.w", (3, 2)), ("other.w", (4,))]).parameters()
    adamw = tc.optim.AdamW(mine, lr=1e-3)
    with pytest.raises(tc.TensorCodeError, match=r"missing head\.w, which it owns; "
                       r"extra other\.w, which it does not own"):
        adamw.step(theirs, ones_like(theirs), 1e-3)
    resized = network([("encoder.w", (3, 2)), ("head.w", (2, 2))]).parameters()
    with pytest.raises(tc.TensorCodeError, match=r"changed head\.w"):
        adamw.step(resized, ones_like(resized), 1e-3)
    # the same parameters recorded again (same names, shapes, dtypes) are the same slots
    again = network([("encoder.w", (3, 2)), ("head.w", (2, 1))], seed=1).parameters()
    adamw.step(again, ones_like(again), 1e-3)


def test_bad_parameters_argument_is_refused():
    with pytest.raises(TypeError, match="parameter table"):
        tc.optim.Adam([np.zeros(3)])
    with pytest.raises(ValueError, match="lr"):
        tc.optim.Adam(lr=-1.0)


def test_trainer_takes_an_instance_or_a_factory_and_the_constructed_rate():
    layer = Linear(3, 2, seed=5, backend="reference")
    factory = Trainer.from_ops({"layer": layer}, backend="reference",
                               optimizer=lambda p: tc.optim.AdamW(p, lr=1e-3,
                                                                  backend="reference"))
    assert isinstance(factory.optimizer, tc.optim.AdamW) and factory.lr == 1e-3
    assert factory.optimizer.layout is factory.parameters.layout
    instance = tc.optim.Sgd(factory.parameters, lr=0.05, momentum=0.9, backend="reference")
    assert Trainer.from_ops({"layer": layer}, optimizer=instance).lr == 0.05
    assert Trainer.from_ops({"layer": layer}, optimizer=instance, lr=0.2).lr == 0.2
    assert Trainer.from_ops({"layer": layer}).lr == 0.01            # no rate anywhere
    other = Linear(5, 5, backend="reference")
    foreign = tc.optim.Adam(other.parameters, lr=1e-3)
    with pytest.raises(tc.TensorCodeError, match=r"missing weights, bias, which it owns; "
                       r"extra layer\.weights, layer\.bias, which it does not own"):
        Trainer.from_ops({"layer": layer}, optimizer=foreign)

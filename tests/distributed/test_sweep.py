"""Sweeps on Ray tasks: every configuration from a clone of the same initial table,
equal to training the configurations one by one."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from ray_builds import data, regression

import tensorcode as tc
from tensorcode.distributed import Config, sweep
from tensorcode.distributed.recording import record
from tensorcode.distributed.sweeps import minibatches
from tensorcode.errors import TensorCodeError, WorkerError

pytestmark = pytest.mark.usefixtures("local_ray")

CONFIGS = [Config(0.05), Config(0.02, "adam", seed=3),
           Config(0.1, "sgd", seed=1, options={"momentum": 0.9})]


def by_hand(config: Config, steps: int, pool: dict):
    """One configuration trained here with the plan and ``tc.optim`` directly."""
    recording = record(functools.partial(regression, 8))
    plan = recording.network.entry(recording.adjoints.roots()).lower()
    parameters = recording.network.parameters()
    optimizer = {"sgd": tc.optim.Sgd, "adam": tc.optim.Adam}[config.optimizer](**config.options)
    for feeds in minibatches(pool, 8, config.seed, steps):
        run = plan.forward(parameters, recording.feeds(feeds))
        parameters = optimizer.step(parameters, run.recorded_gradients(recording.adjoints),
                                    config.lr)
    final = plan.forward(parameters)
    return float(final.of(recording.loss)), parameters


def test_a_sweep_equals_the_configurations_run_one_by_one():
    pool = data(40)
    result = sweep(functools.partial(regression, 8), CONFIGS, 12, data=pool, timeout_s=120)
    expected = [by_hand(config, 12, pool) for config in CONFIGS]
    assert result.losses == [loss for loss, _ in expected]
    best = int(np.argmin(result.losses))
    assert result.best == best
    assert result.parameters.equals(expected[best][1])
    assert all(len(curve) == 12 for curve in result.curves)
    lines = result.table().splitlines()
    assert len(lines) == 1 + len(CONFIGS) and lines[1 + best].startswith("*")
    serial = sweep(functools.partial(regression, 8), CONFIGS, 12, data=pool, parallel=False)
    assert serial.losses == result.losses and serial.parameters.equals(result.parameters)


def test_a_failing_configuration_is_reported_by_name():
    build = functools.partial(regression, 8, misbehave="raise")  # raises in a worker only
    with pytest.raises(WorkerError, match=r"sgd momentum=0\.5 lr=0\.1 seed=0.*failed.*"
                                          r"cannot record"):
        sweep(build, [Config(0.1, options={"momentum": 0.5})], 2, timeout_s=120)


def test_optimizer_options_are_checked_before_any_task_runs():
    with pytest.raises(TensorCodeError, match=r"sgd options \{'momentum': -1\}: momentum "
                                              r"must be non-negative"):
        Config(0.1, options={"momentum": -1})
    with pytest.raises(TensorCodeError, match=r"adam options \{'beta': 0\.9\}: .*beta"):
        Config(0.1, "adam", options={"beta": 0.9})


def test_configurations_are_validated_on_the_driver():
    with pytest.raises(TensorCodeError, match="optimizer must be one of"):
        Config(0.1, "lbfgs")
    with pytest.raises(TensorCodeError, match="lr must be"):
        Config(float("nan"))
    with pytest.raises(TensorCodeError, match="at least one"):
        sweep(functools.partial(regression, 8), [], 2)

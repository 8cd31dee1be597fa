"""Data-parallel training on a local Ray instance: equal to single-process training,
and a worker that raises, hangs or dies is reported, never waited on forever."""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest
import ray
from ray_builds import data, regression

import tensorcode as tc
from tensorcode.distributed import DataParallel
from tensorcode.distributed.recording import Lowered, record, sum_gradients
from tensorcode.errors import FeedError, TensorCodeError, WorkerError

pytestmark = pytest.mark.usefixtures("local_ray")


def single_process(rows: int, batch: dict, steps: int, optimizer, lr: float):
    """The same training in this process on the whole batch: the reference."""
    recording = record(functools.partial(regression, rows))
    plan = recording.network.entry(recording.adjoints.roots()).lower()
    parameters = recording.network.parameters()
    feeds = recording.feeds(batch)
    losses = []
    for _ in range(steps):
        run = plan.forward(parameters, feeds)
        losses.append(float(run.of(recording.loss)))
        parameters = optimizer.step(parameters, run.recorded_gradients(recording.adjoints), lr)
    return losses, parameters


def test_two_workers_train_like_one_process_and_a_dead_worker_is_reported():
    batch = data(16)
    expected_losses, expected = single_process(16, batch, 4, tc.optim.Adam(), 0.02)
    trainer = DataParallel(functools.partial(regression, 8), workers=2,
                           optimizer=tc.optim.Adam(), timeout_s=120)
    losses = [trainer.step(batch, 0.02).loss for _ in range(4)]
    np.testing.assert_allclose(losses, expected_losses, rtol=0, atol=1e-6)
    for got, want in zip(trainer.parameters.payloads(), expected.payloads()):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert losses[-1] < losses[0]
    # a batch that does not split into the recorded shard size is refused up front
    with pytest.raises(FeedError, match="needs 16 rows"):
        trainer.step(data(12), 0.02)
    # a worker that dies: the step reports it and releases the others
    ray.kill(trainer.handles[1])  # the test plays the node that fails
    # ray.kill returns before the actor is gone (a call may still be answered): wait,
    # bounded, until a call to it fails, so the step below meets a dead worker however
    # loaded the machine is
    for _ in range(600):
        try:
            ray.get(trainer.handles[1].signature.remote(), timeout=120)
        except ray.exceptions.RayActorError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the killed worker still answered after a minute")
    with pytest.raises(WorkerError, match="worker 1 died"):
        trainer.step(batch, 0.02)
    with pytest.raises(TensorCodeError, match="closed"):
        trainer.step(batch, 0.02)


def test_a_worker_that_raises_is_reported_with_its_error():
    with pytest.raises(WorkerError,
                       match="worker 0 failed while starting: ValueError: this worker"):
        DataParallel(functools.partial(regression, 8, misbehave="raise"), workers=1,
                     timeout_s=120)


def test_a_worker_that_hangs_is_reported_after_the_timeout():
    with pytest.raises(WorkerError, match="worker 0 did not answer within 3 s"):
        DataParallel(functools.partial(regression, 8, misbehave="hang"), workers=1,
                     timeout_s=3)


def test_summed_gradients_are_the_gradient_of_the_sum_of_the_shard_losses():
    """reduce="sum" checked without Ray: the shards' gradients summed in the driver's
    table equal the gradient of the whole batch's summed loss (float64)."""
    batch = data(8, dtype="float64")
    whole = Lowered(record(functools.partial(regression, 8, "float64")), "reference")
    half = Lowered(record(functools.partial(regression, 4, "float64")), "reference")
    parameters = half.recording.network.parameters()
    parts = []
    for k in range(2):
        shard = {name: value[4 * k:4 * k + 4] for name, value in batch.items()}
        parts.append(dict(half.loss_and_gradients(parameters, shard)[1].buffers()))
    mean = sum_gradients(parameters.layout, parts, scale=0.5)
    _, full = whole.loss_and_gradients(whole.recording.network.parameters(), batch)
    for got, want in zip(mean.payloads(), full.payloads()):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    with pytest.raises(TensorCodeError, match="at least one"):
        sum_gradients(parameters.layout, [])

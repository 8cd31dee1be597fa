"""The guide's two parallel examples (``examples/guide/gradient_descent.py`` and
``examples/guide/makemore_mlp_parallel.py``) give exactly the serial computation.

Small sizes keep them fast; their speed-up printout is informative and never asserted.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_example(name: str):
    path = ROOT / "examples" / "guide" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"guide_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gradient_descent():
    return load_example("gradient_descent")


@pytest.fixture(scope="module")
def makemore():
    return load_example("makemore_mlp_parallel")


GD_SIZES = {"samples": 32, "hidden": 8}
MM_SIZES = {"shard": 8, "hidden": 16}


def test_three_states_on_three_threads_equal_serial(gradient_descent):
    problem = gradient_descent.build(**GD_SIZES)
    initial = problem.network.parameters()
    serial = gradient_descent.serial(problem, 6)
    threaded = gradient_descent.threaded(problem, 6)
    assert gradient_descent.same(serial, threaded)
    for (parameters, losses), (again, _) in zip(serial, threaded):
        assert losses[-1] < losses[0]
        assert not parameters.equals(initial) and again.equals(parameters)
    # one spec: the network still answers its initials
    assert problem.network.parameters().equals(initial)
    # and the three learning rates did give three different states
    assert not serial[0][0].equals(serial[2][0])
    # each what-if as one run_steps call per thread: the loop, bit for bit, and the same
    # calls one after another on this thread
    assert gradient_descent.same(serial, gradient_descent.fused(problem, 6))
    assert gradient_descent.same(serial, gradient_descent.fused(problem, 6, threads=False))
    # any number of what-ifs (four: two per core on two cores)
    four = gradient_descent.LEARNING_RATES + (0.02,)
    fused = gradient_descent.fused(problem, 6, rates=four)
    assert len(fused) == 4
    assert gradient_descent.same(fused, gradient_descent.fused(problem, 6, threads=False,
                                                               rates=four))
    assert gradient_descent.same(serial, fused[:3])


def test_three_threads_main_prints_its_lines(gradient_descent, capsys):
    gradient_descent.main(["--steps", "3", "--samples", "32", "--hidden", "8"])
    out = capsys.readouterr().out
    assert "threaded == serial, table for table and loss for loss: True" in out
    assert "speed-up" in out and out.count("lr ") == 3
    assert "run_steps, one call per thread == the loop, bit for bit: True" in out
    assert "run_steps: serial" in out and "3 threads" in out


def test_shards_on_threads_equal_serial_and_the_whole_minibatch(makemore):
    model = makemore.build(**MM_SIZES)
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded, threaded_losses = makemore.train(model, 4, 3, pool=pool, seed=5)
    serial, serial_losses = makemore.train(model, 4, 3, seed=5)
    assert threaded.equals(serial) and threaded_losses == serial_losses
    assert not serial.equals(model.network.parameters())
    # any number of groups: this thread runs the first, the pool the others
    for threads in (1, 3, 4):
        with ThreadPoolExecutor(max_workers=max(1, threads - 1)) as pool:
            grouped, grouped_losses = makemore.train(model, 4, 3, pool=pool, seed=5,
                                                     threads=threads)
        alone, alone_losses = makemore.train(model, 4, 3, seed=5, threads=threads)
        assert grouped.equals(alone) and grouped_losses == alone_losses
        np.testing.assert_allclose(grouped_losses, serial_losses, rtol=1e-5)
    # drawn with replacement, as makemore does: a minibatch may exceed the data set
    big = makemore.build(256, hidden=MM_SIZES["hidden"])
    with ThreadPoolExecutor(max_workers=4) as pool:
        many, many_losses = makemore.train(big, 4, 1, pool=pool)
    assert len(makemore.dataset()[1]) < 4 * 256
    alone, alone_losses = makemore.train(big, 4, 1)
    assert many.equals(alone) and many_losses == alone_losses

    # the shard gradients summed as tables are the gradient of the whole minibatch
    contexts, targets = makemore.dataset()
    picked = np.arange(4 * model.shard)
    parameters = model.network.parameters()
    shards = [makemore.shard_gradients(model, parameters, contexts[part], targets[part])[1]
              for part in np.split(picked, 4)]
    summed = sum(shards) * (1.0 / 4)
    network, adjoints, _, x, y = makemore.record(4 * model.shard, hidden=MM_SIZES["hidden"])
    whole = network.parameters()
    assert [p.shape for p in whole.payloads()] == [p.shape for p in parameters.payloads()]
    for a, b in zip(whole.payloads(), parameters.payloads()):
        np.testing.assert_array_equal(a, b)  # seeded: the same initial state
    full = network.forward(whole, {x: contexts[picked], y: targets[picked]}) \
        .recorded_gradients(adjoints)
    for got, want in zip(summed.payloads(), full.payloads()):
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_sharded_main_prints_its_lines(makemore, capsys):
    makemore.main(["--steps", "2", "--shards", "4", "--shard", "8", "--hidden", "16"])
    out = capsys.readouterr().out
    assert "threaded == serial, payload for payload and loss for loss: True" in out
    assert "speed-up" in out

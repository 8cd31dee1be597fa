"""``tc.cross_entropy`` takes class indices or a probability target of the logits' shape,
as ``torch.nn.functional.cross_entropy`` does: value and gradient checked against
PyTorch (the test extra installs it), on every backend, with the target as values and
as a fed input; a target that is not rows of probabilities is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorcode as tc
from tensorcode.compiler.backends import BACKENDS
from tensorcode.compiler.trace.composites import DISTRIBUTION_TOLERANCE
from tensorcode.errors import DTypeError, ShapeError, TrainingError

RNG = np.random.default_rng(7)
LOGITS = RNG.normal(size=(5, 4)) * 3
TARGET = RNG.dirichlet(np.ones(4), size=5)
TARGET[2] = [0.0, 1.0, 0.0, 0.0]  # a one-hot row and zeros are fine


def _torch(logits, target):
    x = torch.tensor(logits, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(x, torch.tensor(target))
    loss.backward()
    return loss.item(), x.grad.numpy()


def _cases():
    """Every backend with the target as values and fed, in float64 and float32; Numba
    (each case a compile of its own, seconds) takes the two cases that between them
    cover both forms and both dtypes, float32's approximated ``exp`` with a fed target
    (the kernels of a form do not change with the dtype but for those approximations)."""
    dtypes = {"float64": (np.float64, 1e-12), "float32": (np.float32, 2e-6)}
    numba = {("values", "float64"), ("fed", "float32")}
    cases = []
    for backend in BACKENDS:
        for form in ("values", "fed"):
            for name, (dtype, rtol) in dtypes.items():
                if backend != "numba" or (form, name) in numba:
                    cases.append(pytest.param(backend, form == "fed", dtype, rtol,
                                              id=f"{backend}-{form}-{name}-{rtol}"))
    return cases


@pytest.mark.parametrize("backend, fed, dtype, rtol", _cases())
def test_probability_targets_match_pytorch(backend, fed, dtype, rtol):
    logits, target = LOGITS.astype(dtype), TARGET.astype(dtype)
    tape = tc.Tape()
    p = tape.parameter(logits)
    t = tape.input(np.zeros_like(target)) if fed else target
    loss = tc.cross_entropy(p, t)
    adjoints = tape.differentiate(loss, [p])
    network = tape.into_network()
    plan = network.entry(adjoints.roots()).lower(backend)
    run = plan.forward(network.parameters(), {t: target} if fed else {})
    value, gradient = _torch(logits, target)
    assert float(run.of(loss)) == pytest.approx(value, rel=rtol)
    np.testing.assert_allclose(run.recorded_gradients(adjoints).of(p), gradient,
                               rtol=rtol * 10, atol=rtol)


def test_class_indices_still_match_pytorch():
    labels = np.array([0, 3, 1, 1, 2])
    tape = tc.Tape()
    p = tape.parameter(LOGITS)
    loss = tc.cross_entropy(p, labels)
    adjoints = tape.differentiate(loss, [p])
    network = tape.into_network()
    run = network.forward(network.parameters())
    x = torch.tensor(LOGITS, requires_grad=True)
    expected = torch.nn.functional.cross_entropy(x, torch.tensor(labels))
    expected.backward()
    assert float(run.of(loss)) == pytest.approx(expected.item(), rel=1e-12)
    np.testing.assert_allclose(run.recorded_gradients(adjoints).of(p), x.grad.numpy(),
                               rtol=1e-10)


def _bad(rows):
    target = TARGET.copy()
    for k, row in rows.items():
        target[k] = row
    return target


@pytest.mark.parametrize("target, error, fragment", [
    (_bad({1: [0.5, 0.5, 0.5, -0.5]}), TrainingError, "nonnegative; row 1, class 3"),
    (_bad({0: [np.nan, 0.5, 0.5, 0.0]}), TrainingError, "finite"),
    (_bad({0: [np.inf, 0.0, 0.0, 0.0]}), TrainingError, "finite"),
    (_bad({4: [0.5, 0.5, 0.1, 0.0]}), TrainingError, "row 4 sums to"),
    (_bad({4: [0.25, 0.25, 0.25, 0.25 + 10 * DISTRIBUTION_TOLERANCE]}), TrainingError,
     "sum to one"),
    (TARGET[:, :3], ShapeError, "logits' shape"),
    (TARGET > 0.3, DTypeError, "bool"),
])
@pytest.mark.parametrize("as_leaf", [False, True], ids=["array", "leaf"])
def test_targets_that_are_not_probabilities_are_refused(target, error, fragment, as_leaf):
    tape = tc.Tape()
    p = tape.parameter(LOGITS)
    value = tape.leaf(target) if as_leaf else target
    if as_leaf and target.dtype == bool:  # a recorded bool constant is stored as int64
        error, fragment = ShapeError, "must be float"
    with pytest.raises(error, match=fragment):
        tc.cross_entropy(p, value)


def test_rows_within_the_tolerance_are_accepted():
    tape = tc.Tape()
    p = tape.parameter(LOGITS)
    nearly = TARGET.copy()
    nearly[0, 0] += DISTRIBUTION_TOLERANCE / 2
    assert tc.cross_entropy(p, nearly).shape == ()
    assert tc.cross_entropy(p, TARGET.tolist()).shape == ()

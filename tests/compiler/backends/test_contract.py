"""The backend contract: every call a plan makes is declared in ``backends.Compiled``, and
a refused call reaches the plan as a ``Status`` and an argument index, the same on every
backend, from which the plan raises its documented error (no message is read)."""

from __future__ import annotations

import functools
import typing

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler import backends
from tensorcode.compiler.lower.program import Refused, Status
from tensorcode.compiler.plans.plan import CASE_AXIS, call_error
from tensorcode.errors import FeedError


@pytest.fixture(scope="module")
def program():
    tape = tc.Tape()
    table = tape.parameter(np.arange(12, dtype=np.float32).reshape(4, 3), name="table")
    x = tape.input(np.ones((2, 3), np.float32), name="x")
    idx = tape.input(np.array([0, 3], np.int64), name="idx")
    y = (table.take(idx, axis=0) * x).tanh()
    network = tape.into_network()
    plans = {name: network.entry([y]).lower(name) for name in backends.BACKENDS}
    return network, plans, (x, idx)


X = np.ones((2, 3), np.float32)
IDX = np.array([0, 3], np.int64)
#: (inputs, the status and index every backend reports)
REFUSED = {
    "arity": ((X,), Status.ARITY, 1),
    "dtype": ((X.astype(np.float64), IDX), Status.INPUT, 0),
    "strided": ((X, np.repeat(IDX, 2)[::2]), Status.INPUT, 1),
    "byte order": ((X.astype(">f4"), IDX), Status.INPUT, 0),
    "not an array": ((X.tolist(), IDX), Status.INPUT, 0),
    "shape": ((np.ones((3, 2), np.float32), IDX), Status.SHAPE, 0),
    "rank": ((X, IDX[None]), Status.SHAPE, 1),
}


def _refusal(plan, call, inputs, leading=None):
    compiled = plan._program()
    with pytest.raises(compiled.refused) as caught:
        call(*inputs)
    refused = compiled.refusal(caught.value, inputs, leading)
    assert isinstance(refused, Refused), caught.value
    return refused


@pytest.mark.parametrize("backend", backends.BACKENDS)
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_call_is_a_status_and_an_argument_index(program, backend, case):
    network, plans, _ = program
    plan = plans[backend]
    inputs, status, index = REFUSED[case]
    call = plan._program().bind(*plan._arguments(network.parameters()))
    refused = _refusal(plan, call, inputs)
    assert (refused.status, refused.index) == (status, index)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_every_backend_gives_the_same_documented_error(program, case):
    network, plans, _ = program
    inputs, _, _ = REFUSED[case]
    messages = {}
    for backend, plan in plans.items():
        with pytest.raises(FeedError) as caught:
            plan.bind(network.parameters())(*inputs)
        messages[backend] = str(caught.value)
    assert len(set(messages.values())) == 1, messages
    message = next(iter(messages.values()))
    assert ("takes 2 inputs" in message) if case == "arity" else \
        message.startswith(f'input "{"idx" if REFUSED[case][2] else "x"}"')


@pytest.mark.parametrize("backend", backends.BACKENDS)
def test_an_index_out_of_range_is_status_range_and_a_feed_error(program, backend):
    network, plans, (x, idx) = program
    plan = plans[backend]
    inputs = (X, np.array([0, 4], np.int64))
    call = plan._program().bind(*plan._arguments(network.parameters()))
    refused = _refusal(plan, call, inputs)
    assert refused.status is Status.RANGE and refused.detail
    with pytest.raises(FeedError, match="out of"):
        plan.forward(network.parameters(), {x: X, idx: inputs[1]})


@pytest.mark.parametrize("backend", backends.BACKENDS)
def test_a_batch_refusal_is_the_same_status_and_error_on_every_backend(program, backend):
    """``forward_batch`` checks its feeds before the call; the compiled batch entry point
    still refuses on its own, with the same status, index and error everywhere."""
    network, plans, _ = program
    plan = plans[backend]
    compiled = plan._program()
    inputs = (np.ones((5, 3, 2), np.float32), np.stack([IDX] * 5))
    refused = _refusal(plan, functools.partial(compiled.batch(),
                                               *plan._arguments(network.parameters())),
                       inputs, leading=0)
    assert (refused.status, refused.index) == (Status.SHAPE, 0)
    error = call_error(plan, refused, inputs, CASE_AXIS)
    assert str(error) == 'input "x": expected shape [2, 3] after the case axis, got [5, 3, 2]'


#: every member ``backends.Compiled`` declares
DECLARED = sorted((set(typing.get_type_hints(backends.Compiled)) | {
    name for name, value in vars(backends.Compiled).items()
    if callable(value) or isinstance(value, property)}) - set(vars(typing.Protocol))
    - {"_is_protocol", "_is_runtime_protocol", "__init__", "__subclasshook__",
       "__protocol_attrs__"})


@pytest.mark.parametrize("backend", backends.BACKENDS)
def test_every_backend_offers_every_declared_call(program, backend):
    _, plans, _ = program
    compiled = plans[backend]._program()
    assert {"bind", "bind_scalars", "bind_step", "refusal", "refused", "run"} <= set(DECLARED)
    missing = [name for name in DECLARED
               if not hasattr(type(compiled), name) and name not in vars(compiled)]
    assert not missing, missing
    assert callable(backends.get(backend).update)


def test_a_raw_refusal_is_a_feed_error_that_survives_pickling():
    import pickle

    refused = pickle.loads(pickle.dumps(Refused(Status.SHAPE, 2)))
    assert isinstance(refused, FeedError)
    assert (refused.status, refused.index) == (Status.SHAPE, 2)
    assert "argument #2" in str(refused)
    assert str(Refused(Status.RANGE, -1, "take: an index is out of range")) == \
        "take: an index is out of range"


@pytest.mark.parametrize("backend", backends.BACKENDS)
def test_the_raw_bound_calls_raise_what_the_bound_plan_declares(program, backend):
    network, plans, _ = program
    bound = plans[backend].bind(network.parameters())
    run, _ = bound.flat
    with pytest.raises(bound.refused):
        run(X.astype(np.float64), IDX)

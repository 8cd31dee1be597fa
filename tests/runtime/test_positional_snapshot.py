"""Positional snapshots: a module's payloads in visit order, restored into a new table."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError, DTypeError, ShapeError


@pytest.fixture()
def model():
    tape = tc.Tape()
    extra = tape.parameter(np.float32(5.0), name="extra")  # not the module's
    mlp = tc.nn.Mlp(tape, [3, 4, 2], activation="relu", init=tc.init.xavier(11))
    network = tape.into_network()
    return network, mlp, extra


def test_snapshot_copies_payloads_in_visit_order(model):
    network, mlp, _ = model
    parameters = network.parameters()
    payloads = tc.checkpoint.snapshot(parameters, mlp)
    assert [p.shape for p in payloads] == [(3, 4), (4,), (4, 2), (2,)]
    for payload, symbol in zip(payloads, mlp.parameters()):
        np.testing.assert_array_equal(payload, parameters.of(symbol))
        assert not np.shares_memory(payload, parameters.of(symbol))
    named = tc.checkpoint.named_snapshot(parameters, mlp)
    for payload, by_name in zip(payloads, named.values()):
        np.testing.assert_array_equal(payload, by_name)


def test_restore_builds_a_new_table_and_keeps_other_slots(model):
    network, mlp, extra = model
    before = network.describe()
    parameters = network.parameters()
    payloads = [p + 1 for p in tc.checkpoint.snapshot(parameters, mlp)]
    restored = tc.checkpoint.restore(parameters, mlp, payloads)
    assert restored is not parameters and restored.layout is parameters.layout
    for payload, symbol in zip(payloads, mlp.parameters()):
        np.testing.assert_array_equal(restored.of(symbol), payload)
        np.testing.assert_array_equal(parameters.of(symbol) + 1, payload)  # input untouched
    assert restored.of(extra) == 5.0
    assert network.describe() == before  # no graph touched
    # the round trip is exact
    again = tc.checkpoint.restore(parameters, mlp, tc.checkpoint.snapshot(parameters, mlp))
    assert again.equals(parameters)


def test_bad_snapshots_are_refused_with_nothing_built(model):
    network, mlp, _ = model
    parameters = network.parameters()
    good = tc.checkpoint.snapshot(parameters, mlp)
    kept = parameters.clone()
    with pytest.raises(ArtifactError, match="3 payloads, but the module has 4"):
        tc.checkpoint.restore(parameters, mlp, good[:3])
    with pytest.raises(ArtifactError, match="5 payloads"):
        tc.checkpoint.restore(parameters, mlp, good + [good[0]])
    with pytest.raises(ShapeError, match=r"payload 2: expected shape \[4, 2\], got \[2, 4\]"):
        tc.checkpoint.restore(parameters, mlp, good[:2] + [good[2].T] + good[3:])
    with pytest.raises(DTypeError, match="payload 1: expected float32, got float64"):
        tc.checkpoint.restore(parameters, mlp,
                              [good[0], good[1].astype(np.float64), *good[2:]])
    with pytest.raises(ArtifactError, match="named_restore"):
        tc.checkpoint.restore(parameters, mlp, tc.checkpoint.named_snapshot(parameters, mlp))
    assert parameters.equals(kept)

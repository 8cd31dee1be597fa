"""One identity per parameter from module to checkpoint: the slot id (its position in
recording order) and the path (its recorded name, or ``%<slot id>``). Messages, the
optimizer's slot tables, a fused step's update and checkpoint keys all use them."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ShapeError
from tensorcode.runtime.checkpoint import parameter_keys


def _network():
    tape = tc.Tape()
    x = tape.input(np.ones((2, 3), np.float32), name="x")  # node 0: slot ids differ
    tape.leaf(np.zeros(1, np.float32))
    w = tape.parameter(np.full((3, 2), 0.5, np.float32))  # unnamed: slot 0, node 2
    b = tape.parameter(np.zeros(2, np.float32), name="bias")
    v = tape.parameter(np.ones(2, np.float64))  # unnamed: slot 2
    loss = ((x @ w + b) ** 2).sum() + (v * v).sum().astype("float32")
    adjoints = tape.differentiate(loss, [w, b, v])
    return tape.into_network(), loss, adjoints


def test_an_unnamed_parameter_is_its_slot_id_everywhere():
    network, _, _ = _network()
    slots = network.layout.slots
    assert [s.index for s in slots] == [0, 1, 2]
    assert slots[0].node != 0  # the slot id, not the node id, names it
    assert [s.path for s in slots] == ["%0", "bias", "%2"]
    assert [s.label for s in slots] == ["%0", '"bias"', "%2"]
    assert parameter_keys(network.layout) == [f"parameters/{s.path}" for s in slots]
    parameters = network.parameters()
    with pytest.raises(ShapeError, match="parameter %0: expected shape"):
        parameters.replace({network.symbol(slots[0].node): np.zeros(4, np.float32)})


def test_the_update_tables_come_from_the_layout():
    network, loss, adjoints = _network()
    layout = network.layout
    ids, starts, sizes, skipped = layout.update_table("float32")
    assert ids.tolist() == [0, 1] and starts.tolist() == [0, 6] and sizes.tolist() == [6, 2]
    assert skipped == [] and not ids.flags.writeable
    ids, starts, sizes, skipped = layout.update_table("float32", (True, False, True))
    assert ids.tolist() == [0] and skipped == [(6, 8)]
    assert layout.update_table("float32") is layout.update_table("float32")  # cached
    plan = network.entry(adjoints.roots()).lower("reference", optimizer=tc.optim.Sgd(lr=0.1))
    gradient_offsets = [offset for _, offset, _ in plan.schedule.roots[1:]]
    assert plan.spec.slots == layout.step_slots(gradient_offsets)
    assert [t[0] for t in plan.spec.slots] == [s.index for s in layout.slots]

"""Feeds as the guide writes them: a list of ``(symbol, value)`` pairs is the same feeds
as a dict, on ``Network.forward``, ``Plan.forward``, ``forward_batch`` and step plans;
anything else is a ``FeedError`` saying to pass a dict (never a raw ``AttributeError``)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.backends import BACKENDS
from tensorcode.errors import FeedError


def _regression():
    tape = tc.Tape()
    w = tape.parameter(0.5)
    x = tape.input(0.0)
    y = tape.input(0.0)
    error = w * x - y
    loss = error * error
    return tape, w, x, y, loss


def test_network_forward_takes_a_list_of_pairs():
    tape, w, x, y, loss = _regression()
    network = tape.into_network()
    parameters = network.parameters()
    as_dict = float(network.forward(parameters, {x: 2.0, y: 4.0}).of(loss))
    assert float(network.forward(parameters, [(x, 2.0), (y, 4.0)]).of(loss)) == as_dict
    assert float(network.forward(parameters, ((x, 2.0), (y, 4.0))).of(loss)) == as_dict
    assert as_dict == pytest.approx(9.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_plans_take_a_list_of_pairs(backend):
    tape, w, x, y, loss = _regression()
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    parameters = network.parameters()
    plan = network.entry(adjoints.roots()).lower(backend)
    run = plan.forward(parameters, [(x, 2.0), (y, 4.0)])
    assert float(run.of(loss)) == pytest.approx(9.0)
    batch = plan.forward_batch(parameters, [(x, np.array([1.0, 2.0])),
                                            (y, np.array([0.0, 4.0]))])
    np.testing.assert_allclose(batch.of(loss), [0.25, 9.0])


@pytest.mark.parametrize("feeds, fragment", [
    ({1, 2}, "pass a dict"),
    ("x=2", "got str"),
    ([(1, 2)], "not an input symbol"),
    ([("x", 2.0)], "not an input symbol"),
    ([(None, 2.0, 3.0)], "not a \\(symbol, value\\) pair"),
    ([0.5], "not a \\(symbol, value\\) pair"),
])
def test_other_containers_are_a_feed_error_saying_to_pass_a_dict(feeds, fragment):
    tape, w, x, y, loss = _regression()
    network = tape.into_network()
    with pytest.raises(FeedError, match=fragment):
        network.forward(network.parameters(), feeds)
    plan = network.entry([loss]).lower("reference")
    with pytest.raises(FeedError, match=fragment):
        plan.forward(network.parameters(), feeds)


def test_a_symbol_fed_twice_in_pairs_is_refused():
    tape, w, x, y, loss = _regression()
    network = tape.into_network()
    with pytest.raises(FeedError, match="second time"):
        network.forward(network.parameters(), [(x, 1.0), (x, 2.0)])

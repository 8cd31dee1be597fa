"""Feeds reach compiled code only as native-order, C-contiguous arrays of the exact
dtype: ``forward`` and ``forward_batch`` convert other byte orders and layouts once,
``bind`` refuses them with a ``FeedError`` naming the input (Numba alone would say "No
matching definition"), and a feed for an input the plan does not read is refused. A feed
that already is what the compiled code reads goes to it as it is (no check, no copy)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc


@pytest.fixture(scope="module")
def net():
    tape = tc.Tape()
    x = tape.input(np.zeros(3, np.float32), name="x")
    unused = tape.input(np.zeros(2, np.float32), name="unused")
    w = tape.parameter(np.array([1.0, 2.0, 3.0], np.float32), name="w")
    y = (x * w).sum()
    network = tape.into_network()
    plans = {backend: network.entry([y]).lower(backend)
             for backend in ("numba", "llvm", "reference")}
    return network, plans, x, unused, y


VALUES = np.array([1.5, -2.0, 4.25], np.float32)
EXPECTED = float(np.dot(VALUES, [1.0, 2.0, 3.0]))


@pytest.mark.parametrize("backend", ["numba", "llvm", "reference"])
@pytest.mark.parametrize("feed", [
    VALUES.astype(">f4"),                                  # big-endian
    np.repeat(VALUES, 2)[::2],                             # strided
    np.asfortranarray(VALUES.astype(">f4")),               # both
], ids=["big-endian", "strided", "big-endian-view"])
def test_forward_converts_byte_order_and_layout_once(net, backend, feed):
    network, plans, x, unused, y = net
    plan = plans[backend]
    assert float(plan.forward(network.parameters(), {x: feed}).of(y)) == EXPECTED
    batch = np.stack([feed, feed]).astype(feed.dtype)
    got = plan.forward_batch(network.parameters(), {x: batch}).of(y)
    assert got.tolist() == [EXPECTED, EXPECTED]
    assert float(network.forward(network.parameters(), {x: feed}).of(y)) == EXPECTED


@pytest.mark.parametrize("backend", ["numba", "llvm", "reference"])
@pytest.mark.parametrize("feed, problem", [
    (VALUES.astype(">f4"), "non-native byte order"),
    (np.repeat(VALUES, 2)[::2], "non-contiguous"),
    (VALUES.astype(np.float64), "dtype float64"),
    (VALUES.tolist(), "got list"),
], ids=["big-endian", "strided", "float64", "list"])
def test_bind_refuses_what_it_cannot_read_with_a_feed_error(net, backend, feed, problem):
    network, plans, x, unused, y = net
    bound = plans[backend].bind(network.parameters())
    assert float(bound(VALUES)[0]) == EXPECTED
    with pytest.raises(tc.FeedError, match=f'input "x": .*{problem}.*ascontiguousarray'):
        bound(feed)


@pytest.mark.parametrize("backend", ["numba", "llvm", "reference"])
def test_a_feed_the_plan_does_not_read_is_refused(net, backend):
    network, plans, x, unused, y = net
    plan = plans[backend]
    with pytest.raises(tc.FeedError, match='"unused": this plan does not read it'):
        plan.forward(network.parameters(), {x: VALUES, unused: np.ones(2, np.float32)})
    with pytest.raises(tc.FeedError, match='"unused": this plan does not read it'):
        plan.forward_batch(network.parameters(), {unused: np.ones((1, 2), np.float32)})


@pytest.mark.parametrize("backend", ["numba", "llvm", "reference"])
def test_a_ready_feed_skips_the_checking_copy_and_others_still_meet_it(net, backend,
                                                                         monkeypatch):
    network, plans, x, unused, y = net
    plan = plans[backend]
    parameters = network.parameters()
    checked: list[dict] = []
    check_feeds = network.check_feeds
    monkeypatch.setattr(network, "check_feeds",
                        lambda feeds: checked.append(feeds) or check_feeds(feeds))
    ready = VALUES.copy()
    assert float(plan.forward(parameters, {x: ready}).of(y)) == EXPECTED
    assert float(plan.forward(parameters, [(x, ready)]).of(y)) == EXPECTED
    assert checked == []  # taken as it is: the lean path of a plan called from threads
    assert ready.flags.writeable and ready.tolist() == VALUES.tolist()  # and left alone
    # anything else goes through check_feeds: converted, or refused naming the input
    assert float(plan.forward(parameters, {x: VALUES.astype(">f4")}).of(y)) == EXPECTED
    with pytest.raises(tc.FeedError, match='input "x": expected float32\\[3\\], got '
                                           'float32\\[4\\]'):
        plan.forward(parameters, {x: np.zeros(4, np.float32)})
    with pytest.raises(tc.FeedError, match='"unused": this plan does not read it'):
        plan.forward(parameters, {x: ready, unused: np.ones(2, np.float32)})
    stranger = tc.Tape().input(np.zeros(3, np.float32), name="x")
    with pytest.raises(tc.FeedError, match="belongs to another network"):
        plan.forward(parameters, {stranger: ready})
    assert len(checked) == 4

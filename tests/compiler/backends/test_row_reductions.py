"""Reductions over the innermost loop in two passes (``lower/layout.py``'s ``row_terms``), and large
plans' ``run`` over a reused per-thread scratch arena (``CompiledModule._run_reusing``):
the same results as the reference interpreter, NaN and infinities included, and results
that never alias between calls or threads."""

from __future__ import annotations

import threading

import numpy as np

import tensorcode as tc
from tensorcode.compiler.backends.numba import backend as numba_cache
from tensorcode.compiler.lower.layout import ROW_REDUCTION_MIN


def _rows_program(rows: int, width: int):
    """Softmax, mean, min and a scaled sum over the last axis of ``x [rows, width]``."""
    tape = tc.Tape()
    x = tape.input(np.zeros((rows, width), np.float32), name="x")
    outs = [x.softmax(-1), (x * 3.0).mean(axis=-1), x.min(axis=-1),
            (x.exp() / 7.0).sum(axis=-1)]
    return x, outs, tape.into_network()


def _both(x, outs, network, value):
    entry = network.entry(outs)
    got = entry.lower("numba").forward(network.parameters(), {x: value})
    want = entry.lower("reference").forward(network.parameters(), {x: value})
    return [got.of(o) for o in outs], [want.of(o) for o in outs], entry


def test_row_reductions_match_the_reference_with_nan_and_infinities():
    x, outs, network = _rows_program(5, 40)
    rng = np.random.default_rng(0)
    value = rng.normal(size=(5, 40)).astype(np.float32)
    value[1, 7] = np.nan      # a NaN row: max, min, sum all NaN
    value[2, :] = -np.inf     # softmax of an all -inf row
    value[3, 11] = np.inf
    value[4, 3] = 80.0        # the max must be found to keep exp in range
    got, want, entry = _both(x, outs, network, value)
    source = entry.lower("numba").source()
    assert "row_sum(" in source and "row_max(" in source and "row_min(" in source
    with np.errstate(invalid="ignore"):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-7, equal_nan=True)
    assert np.isnan(got[2][1]) and np.isnan(got[1][1]) and np.isnan(got[3][1])
    assert got[2][2] == -np.inf and got[1][2] == -np.inf  # min and mean of -inf terms


def test_short_rows_keep_the_running_reduction():
    x, outs, network = _rows_program(3, ROW_REDUCTION_MIN - 1)
    value = np.random.default_rng(1).normal(size=(3, ROW_REDUCTION_MIN - 1)).astype(np.float32)
    got, want, entry = _both(x, outs, network, value)
    assert "row_" not in entry.lower("numba").source()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-7)


def test_rows_live_past_the_schedule_scratch():
    x, outs, network = _rows_program(4, 64)
    plan = network.entry(outs).lower("numba")
    sizes = {a.dtype: a.size for a in plan.program.scratch}
    own = plan.schedule.arena.get("float32", 0)
    assert sizes["float32"] >= own + 64  # at least one row of 64 float32 terms


def _large_plan():
    """A plan whose arenas pass ``REUSE_BYTES``: its ``run`` reuses scratch."""
    tape = tc.Tape()
    n = 192
    x = tape.input(np.zeros((n, n), np.float32), name="x")
    w = tape.parameter(np.eye(n, dtype=np.float32) * 0.5, name="w")
    y = ((x @ w).tanh() @ w).softmax(-1)
    network = tape.into_network()
    return x, y, network, network.entry([y]).lower("numba")


def test_a_large_plan_reuses_scratch_and_never_aliases_results():
    x, y, network, plan = _large_plan()
    program = plan._program()
    assert program.run == program._run_reusing  # the arenas pass REUSE_BYTES
    parameters = network.parameters()
    bound = plan.bind(parameters)
    rng = np.random.default_rng(2)
    a = rng.normal(size=(192, 192)).astype(np.float32)
    b = rng.normal(size=(192, 192)).astype(np.float32)
    (first,) = bound(a)
    kept = first.copy()
    scratch = program._local.scratch
    (second,) = bound(b)
    assert program._local.scratch is scratch  # the same arena, reused
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, kept)  # the first result was not overwritten
    want = network.entry([y]).lower("reference").forward(parameters, {x: b}).of(y)
    np.testing.assert_allclose(second, want, rtol=1e-5, atol=1e-6)


def test_threads_each_use_their_own_scratch():
    x, y, network, plan = _large_plan()
    parameters = network.parameters()
    bound = plan.bind(parameters)
    rng = np.random.default_rng(3)
    cases = [rng.normal(size=(192, 192)).astype(np.float32) for _ in range(4)]
    want = [bound(c)[0].copy() for c in cases]
    got: dict[int, list[bool]] = {}

    def worker(k: int) -> None:
        got[k] = [np.array_equal(bound(cases[k])[0], want[k]) for _ in range(20)]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(not t.is_alive() for t in threads)
    assert got == {k: [True] * 20 for k in range(4)}


def test_small_plans_allocate_inside_the_call():
    tape = tc.Tape()
    x = tape.input(np.zeros(8, np.float32), name="x")
    y = (x * 2.0).sum()
    network = tape.into_network()
    plan = network.entry([y]).lower("numba")
    program = plan._program()
    assert program.run != program._run_reusing
    assert numba_cache.REUSE_BYTES > 8 * 4
    assert float(plan.forward(network.parameters(), {x: np.arange(8, dtype=np.float32)})
                 .of(y)) == 56.0

"""Invariant loads hoisted out of inner loops: which move, which stay, and that the
compiled backends give the reference's results and each other's bits with them moved."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.lower import loops
from tensorcode.compiler.lower.hoist import invariant_loads
from tensorcode.compiler.lower.kernels import Arena
from tensorcode.compiler.lower.loops import Index, Let, Load, Loop, LoopKernel, Ref, Store
from tensorcode.compiler.trace.composites import where

W = Arena("scratch", "float32")
OUT = Arena("output", "float32")
X = Arena("input", "float32")


def _masked_softmax(tape):
    t = 16
    rng = np.random.default_rng(0)
    scores = tape.input(rng.standard_normal((4, t, t)).astype(np.float32), name="s")
    allowed = tape.leaf(np.tril(np.ones((t, t), np.float32)))
    return where(allowed, scores, -1e9).softmax(axis=-1)


def _inner_loads(kernel):
    """The loads left inside a loop nested in another loop."""
    found = []

    def walk(body, depth):
        for s in body:
            if isinstance(s, Loop):
                walk(s.body, depth + 1)
            elif depth >= 2 and isinstance(s, Let) and isinstance(s.value, Load):
                found.append(s.value.index)
    walk(kernel.body, 0)
    return found


def test_a_softmax_reads_its_row_maximum_once_per_row():
    tape = tc.Tape()
    weights = _masked_softmax(tape)
    program = tape.into_network().entry([weights]).lower("reference").program
    exp_kernel = next(k for k in program.loops if "exp(" in loops.describe(k))
    outer = exp_kernel.body[0]
    inner = next(s for s in outer.body if isinstance(s, Loop))
    # every load left in the inner loop steps with it; the row's maximum moved out
    for index in _inner_loads(exp_kernel):
        assert any(stride and term == Ref(inner.var) for stride, term in index.terms)
    hoisted = [s for s in outer.body if isinstance(s, Let) and isinstance(s.value, Load)]
    assert hoisted and all(all(stride for stride, _ in s.value.index.terms)
                           for s in hoisted)


def _nest(inner: tuple, outer_extent: int = 4, inner_extent: int = 8) -> LoopKernel:
    return LoopKernel((Loop("i0", outer_extent, (Loop("i1", inner_extent, inner),)),))


def _load(arena: Arena, base: int) -> Load:
    return Load(arena, "float32", Index(base, ((1, Ref("i0")),)))


def _moved(kernel: LoopKernel) -> bool:
    return invariant_loads(kernel) != kernel


def test_a_load_moves_when_no_store_in_the_loop_reaches_it():
    store = Store(W, "float32", Index(0, ((8, Ref("i0")), (1, Ref("i1")))), Ref("a"))
    # the stores cover elements 0..31, the load reads 32..35
    kernel = _nest((Let("a", _load(W, 32)), store))
    moved = invariant_loads(kernel)
    assert moved.body[0].body[0] == Let("a", _load(W, 32))
    assert moved.body[0].body[1].body == (store,)


@pytest.mark.parametrize("case", ["overlap", "accumulated", "rebound", "steps",
                                  "unknown_arena", "top_level"])
def test_a_load_stays_where_a_write_may_reach_it_or_its_name_is_rebound(case):
    store = Store(W, "float32", Index(0, ((8, Ref("i0")), (1, Ref("i1")))), Ref("a"))
    if case == "overlap":  # the stores cover 0..31, the load reads 28..31
        kernel = _nest((Let("a", _load(W, 28)), store))
    elif case == "accumulated":  # a sum kept in memory: read, add, write back
        kernel = _nest((Let("a", _load(OUT, 0)),
                        Store(OUT, "float32", Index(0, ((1, Ref("i0")),)), Ref("a"))))
    elif case == "rebound":
        kernel = _nest((Let("a", _load(W, 32)), store, Let("a", _load(W, 40))))
    elif case == "steps":  # the index moves with the inner loop
        kernel = _nest((Let("a", Load(W, "float32", Index(32, ((1, Ref("i1")),)))), store))
    elif case == "unknown_arena":  # an output store may alias an input it is handed
        kernel = _nest((Let("a", _load(X, 0)),
                        Store(OUT, "float32", Index(0, ((1, Ref("i1")),)), Ref("a"))))
    else:  # a partitioned top-level loop reads nothing bound outside it
        kernel = LoopKernel((Loop("i0", 4, (Let("a", Load(W, "float32", Index(32))),
                                            store)),))
    assert not _moved(kernel)


@pytest.mark.parametrize("backend", ["llvm", "numba"])
def test_hoisted_kernels_match_the_reference_and_each_other(backend):
    def run(name):
        tape = tc.Tape()
        x = tape.input(np.random.default_rng(1).standard_normal((6, 40)).astype(np.float32),
                       name="x")
        roots = [_masked_softmax(tape), tc.layer_norm(x), (x - x.max(axis=1, keepdims=True))
                 .exp().sum(axis=1)]
        network = tape.into_network()
        run = network.entry(roots).lower(name).forward(network.parameters())
        return [np.array(run.of(root)) for root in roots]
    expected = run("reference")
    got = run(backend)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)
    if backend == "numba":
        for a, b in zip(got, run("llvm")):
            assert np.array_equal(a.view(np.int32), b.view(np.int32))

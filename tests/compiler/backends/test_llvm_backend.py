"""The llvm backend against the reference interpreter, and against Numba bit for bit.

The plans of ``test_numba_backend`` (every op of the registry, integer programs, random
programs) are lowered with ``backend="llvm"`` and checked against the reference
backend's plan and the runtime backward; where the two compiled backends run the same
operations in the same order (elementwise code, loop matmuls, BLAS matmuls, random
draws), the llvm plan's results equal the numba plan's bit for bit. (The every-op
program, the classifier and the exact-math program are compared in
``test_numba_backend``, against the Numba plans that file compiles anyway.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from compiler_graphs import mlp_program, random_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_numba_backend import all_ops_program, compare, int_program

import tensorcode as tc
from tensorcode.compiler.backends.llvm import ops
from tensorcode.compiler.core import registry as primitives
from tensorcode.compiler.lower.program import Refused, Status
from tensorcode.errors import FeedError


@pytest.fixture(scope="module", params=["float32", "float64"])
def all_ops(request):
    dtype = request.param
    network, loss, adjoints, extras = all_ops_program(dtype)
    entry = network.entry(adjoints.roots() + extras)
    return dtype, network, loss, adjoints, extras, entry.lower("llvm"), entry.lower("reference")


def test_every_op_lowers_and_matches(all_ops):
    dtype, network, loss, adjoints, extras, plan, reference = all_ops
    random = {n for n in primitives.REGISTRY if primitives.is_random(n)}
    lowered = {n.op for n in plan.graph.nodes}
    assert set(primitives.REGISTRY) - {"detach"} - random <= lowered
    compare(dtype, network, loss, adjoints, extras, plan, reference)
    assert "define i32 @\"tc_run\"(ptr" in plan.source()


def test_every_elementwise_op_has_a_lowering_and_the_approximations_are_one_table():
    elementwise = {n for n in primitives.REGISTRY if primitives.is_elementwise(n)}
    assert elementwise == set(ops.LOWERINGS)
    from tensorcode.compiler.backends.numba.lowerings import LOWERINGS
    from tensorcode.compiler.lower import approximations, loops

    # the float32 approximations are scalar graphs of registry ops, which each op table
    # renders; neither backend holds an approximation of its own
    used = set()

    def walk(e):
        if isinstance(e, loops.Apply):
            used.add(e.op)
            for a in e.args:
                walk(a)

    for op in approximations.APPROXIMATIONS:
        lets, value = approximations.expand(op, loops.Ref("x"), "0")
        for v in [let.value for let in lets] + [value]:
            walk(v)
    assert {"floor", "shift_left", "shift_right", "bitcast", "where"} <= used
    assert used <= set(LOWERINGS) and used <= set(ops.LOWERINGS)
    assert not hasattr(ops, "APPROXIMATIONS")
    # so is the Philox stream (lower/random_fills.py): no backend holds a round of it
    from tensorcode.compiler.lower import random_fills
    from tensorcode.compiler.lower.kernels import Arena, Strided

    used.clear()
    key = Strided(Arena("input", "int64"), 0, (4,), (1,), "int64")
    for op, dtype, attrs in (("random_uniform", "float32", {}), ("random_uniform", "float64", {}),
                             ("random_normal", "float32", {}), ("bernoulli", "int32", {"p": 0.5})):
        out = Strided(Arena("output", dtype), 0, (7,), (1,), dtype)
        for stmt in loops.LoopKernel(tuple(random_fills.fill(op, out, key, 3, attrs))).statements():
            for v in [getattr(stmt, "value", None), getattr(stmt, "index", None)]:
                if v is not None:
                    walk(v)
    assert {"mul_wide", "bitwise_xor", "bitwise_and", "bitcast", "sqrt"} <= used
    assert used <= set(LOWERINGS) and used <= set(ops.LOWERINGS)
    backends = Path(ops.__file__).parents[1]
    assert not [p for p in backends.rglob("*.py") if "philox4x32" in p.read_text() or
                "philox.M" in p.read_text()]


def test_integer_programs():
    network, roots = int_program()
    plan = network.entry(roots).lower("llvm")
    parameters = network.parameters()
    run, interp = plan.forward(parameters), network.forward(parameters)
    for sym in roots:
        got, want = run.of(sym), interp.of(sym)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), dtype=st.sampled_from(["float32", "float64"]))
def test_random_programs_compile_and_match(seed, dtype):
    network, loss, adjoints, extras = random_program(seed, dtype, steps=14, parts=4)
    entry = network.entry(adjoints.roots() + extras)
    compare(dtype, network, loss, adjoints, extras, entry.lower("llvm"),
            entry.lower("reference"))


def test_an_index_out_of_range_is_a_feed_error():
    tape = tc.Tape()
    table = tape.parameter(np.ones((4, 3), np.float32), name="table")
    idx = tape.input(np.array([0, 3], np.int64), name="idx")
    out = table.take(idx, axis=0)
    network = tape.into_network()
    plan = network.entry([out]).lower("llvm")
    with pytest.raises(FeedError, match="take: an index is out of range for an axis of size 4"):
        plan.forward(network.parameters(), {idx: np.array([0, 4], np.int64)})
    with pytest.raises(FeedError, match="out of range"):
        plan.forward(network.parameters(), {idx: np.array([-1, 0], np.int64)})
    bound = plan.bind(network.parameters())
    with pytest.raises(FeedError, match='input "idx"'):
        bound(np.zeros(3, np.int64))
    with pytest.raises(FeedError, match="dtype int32"):
        bound(np.zeros(2, np.int32))
    assert np.array_equal(bound(np.array([1, 2], np.int64))[0], np.ones((2, 3), np.float32))


def test_batch_bound_and_scalar_calls():
    network, value, adjoints, syms = mlp_program([3, 8, 1], "tanh", batch=5)
    entry = network.entry([value])
    llvm, reference = entry.lower("llvm"), entry.lower("reference")
    parameters = network.parameters()
    rng = np.random.default_rng(0)
    feeds = {}
    for symbol in llvm.inputs():
        shape, dtype = llvm._input_types[symbol.index]
        feeds[symbol] = rng.normal(size=(4,) + shape).astype(dtype)
    got = llvm.forward_batch(parameters, feeds).of(value)
    want = reference.forward_batch(parameters, feeds).of(value)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    bound = llvm.bind(parameters)
    (number,) = bound.scalars(*[x[1] for x in feeds.values()])
    assert isinstance(number, float)
    np.testing.assert_allclose(number, want[1], rtol=1e-5)
    np.testing.assert_allclose(bound(*[x[2] for x in feeds.values()])[0], want[2], rtol=1e-5)


def test_random_draws_match_the_reference_bit_for_bit():
    from test_random_ops import _program

    network, roots = _program()  # every random op, categorical with top-k/top-p and views
    llvm = network.entry(roots).lower("llvm")
    reference = network.entry(roots).lower("reference")
    assert llvm.takes_randomness and llvm.random_blocks == reference.random_blocks
    for seed in (0, 7):
        a, b = tc.random.Generator(seed), tc.random.Generator(seed)
        for _ in range(2):
            left = llvm.forward(network.parameters(), generator=a)
            right = reference.forward(network.parameters(), generator=b)
            for r in roots:
                x, y = left.of(r), right.of(r)
                assert x.dtype == y.dtype and np.array_equal(x, y), r


def test_fused_steps_equal_numba_bit_for_bit_or_are_refused():
    """Adam with weight decay through ``step`` and ``run_steps``: the llvm step plan lowers
    the optimizer's rule graph with its own op table and equals the Numba step plan bit
    for bit (losses, parameters). An optimizer whose rule is not a graph is refused with
    a ``CompileError`` naming the backend that lowers it."""
    from tensorcode.compiler.lower import update
    from tensorcode.errors import CompileError

    graphs = all(hasattr(update, name) for name in ("SLOT", "ELEMENT", "closure"))
    # One optimizer: each is a Numba step plan of its own (its lowering, step and
    # run_steps compiles, about 10 s of CPU). Adam's rule (two moments, a square root, a
    # division) is the larger, and AdamW's is Adam's with decoupled decay. SGD stays tied
    # to both backends elsewhere: its fused Numba step equals Numba's eager update bit
    # for bit, and the fused llvm steps (SGD with Nesterov momentum among them) equal the
    # unfused path (tests/compiler/plans/test_step.py); tests/runtime/test_optim.py holds
    # every eager update to the reference bit for bit on both compiled backends.
    factories = [lambda: tc.optim.Adam(weight_decay=0.1)]
    for factory in factories:
        results = {}
        for backend in ("numba", "llvm"):
            network, value, adjoints, syms = mlp_program([3, 16, 1], "tanh", batch=20)
            opt = factory()
            if backend == "llvm" and not graphs:
                with pytest.raises(CompileError, match="backend='numba'"):
                    network.entry(adjoints.roots()).lower(backend, optimizer=opt)
                continue
            plan = network.entry(adjoints.roots()).lower(backend, optimizer=opt)
            parameters = network.parameters()
            losses = [plan.step(parameters, opt, None, 0.01) for _ in range(3)]
            batches = {s: np.stack([plan._defaults[k]] * 3) for k, s in
                       enumerate(plan.inputs())}
            losses += list(plan.run_steps(parameters, opt, batches, 0.01))
            results[backend] = (losses, {d: b.copy() for d, b in
                                         parameters.buffers().items()})
        if graphs:
            (a, pa), (b, pb) = results["numba"], results["llvm"]
            assert a == b
            assert all(np.array_equal(pa[d], pb[d]) for d in pa)


def test_no_caller_array_is_kept_past_a_call():
    import gc
    import weakref

    network, value, adjoints, syms = mlp_program([3, 8, 1], "tanh", batch=5)
    plan = network.entry([value]).lower("llvm")
    bound = plan.bind(network.parameters())
    rng = np.random.default_rng(0)
    inputs = [rng.normal(size=plan._input_types[s.index][0]).astype(np.float32)
              for s in plan.inputs()]
    refs = [weakref.ref(x) for x in inputs]
    outputs = bound(*inputs)
    plan.forward(network.parameters(), dict(zip(plan.inputs(), inputs)))
    del inputs
    gc.collect()
    assert all(r() is None for r in refs)
    assert np.isfinite(outputs[0]).all()
    # a bound step (its own pointer array, inputs remembered only weakly) neither
    step_opt = tc.optim.Adam()
    step_plan = network.entry(adjoints.roots()).lower("llvm", optimizer=step_opt)
    bound_step = step_plan.bind(network.parameters(), step_opt)
    fresh = [rng.normal(size=step_plan._input_types[s.index][0]).astype(np.float32)
             for s in step_plan.inputs()]
    refs = [weakref.ref(x) for x in fresh]
    first = bound_step(0.01, *fresh)
    assert bound_step(0.01, *fresh) != first  # the same arrays again: a second step
    del fresh
    gc.collect()
    assert all(r() is None for r in refs)


def test_data_pointers_read_from_the_array_object_match_the_array_interface():
    # the bound calls read ``PyArrayObject.data``; on CPython the layout probe holds
    import sys

    from tensorcode.compiler.backends.llvm import program

    if sys.implementation.name == "cpython":
        assert program._address is not program._interface_address
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for array in (base, base[1:], base[:, 2], base.T, base[..., ::2], np.empty(0),
                  np.frombuffer(b"abcdefgh", np.uint8)[3:], np.ones(())):
        assert type(array) is np.ndarray  # what every caller checks before reading
        assert program._address(array) == program._interface_address(array)


def test_bound_calls_through_array_objects_equal_calls_through_pointers(monkeypatch):
    # ``tc_run_objects`` reads each input's and output's data pointer from its array
    # object; the entry with pointers read in Python must give the same bits, and both
    # refuse the same wrong inputs
    import sys

    from tensorcode.compiler.backends.llvm import program

    if sys.implementation.name == "cpython":
        assert program._OBJECTS
    network, value, adjoints, syms = mlp_program([3, 8, 1], "tanh", batch=5)
    plan = network.entry([value]).lower("llvm")
    compiled, head = plan._program(), plan._arguments(network.parameters())
    through_objects = compiled.bind(*head)
    monkeypatch.setattr(program, "_OBJECTS", False)
    through_pointers = compiled.bind(*head)
    rng = np.random.default_rng(3)
    shapes = [plan._input_types[s.index][0] for s in plan.inputs()]
    for _ in range(3):
        # an offset view of a larger array: its data pointer is not its buffer's start
        inputs = [rng.normal(size=(2,) + shape).astype(np.float32)[1] for shape in shapes]
        got, want = through_objects(*inputs), through_pointers(*inputs)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        assert got[0] is not through_objects(*inputs)[0]  # fresh outputs per call
    assert shapes[0] == (5, 3)
    for call in (through_objects, through_pointers):
        for wrong in (np.asfortranarray(inputs[0]), inputs[0].astype(np.float64),
                      list(inputs[0])):
            with pytest.raises(Refused) as refused:
                call(wrong, *inputs[1:])
            assert (refused.value.status, refused.value.index) == (Status.INPUT, 0)
        with pytest.raises(Refused) as refused:
            call(np.ones((7,) + shapes[0], np.float32), *inputs[1:])
        assert (refused.value.status, refused.value.index) == (Status.SHAPE, 0)
        with pytest.raises(Refused) as refused:
            call(*inputs, inputs[0])
        assert (refused.value.status, refused.value.index) == (Status.ARITY, len(inputs) + 1)

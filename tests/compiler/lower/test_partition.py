"""Parallel partitions: which loops the cost model splits into chunks, and that a chunk's
size never depends on the thread count."""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.compiler.backends import threads
from tensorcode.compiler.lower import loops, partition


def _loops(roots, tape):
    network = tape.into_network()
    plan = network.entry(roots).lower("reference")
    return plan.program.loops


def _partitions(kernels):
    return [s.annotations.partition for k in kernels for s in k.body
            if isinstance(s, loops.Loop)]


def test_large_elementwise_and_row_kernels_are_partitioned():
    tape = tc.Tape()
    x = tape.input(np.ones((512, 256), np.float32), name="x")
    kernels = _loops([x.tanh() * 2.0, x.softmax(axis=1), tc.layer_norm(x)], tape)
    chunks = [p for p in _partitions(kernels) if p]
    assert len(chunks) >= 3
    for kernel in kernels:
        for s in kernel.body:
            if isinstance(s, loops.Loop) and s.annotations.partition:
                assert 1 <= s.annotations.partition < s.extent
                assert partition.chunks(s) >= 2


def test_small_loops_stay_on_one_thread():
    tape = tc.Tape()
    x = tape.input(np.ones((48, 16), np.float32), name="x")
    assert not any(_partitions(_loops([x.tanh() * 2.0, x.softmax(axis=1)], tape)))


def test_loops_that_carry_state_between_iterations_are_not_split():
    tape = tc.Tape()
    x = tape.input(np.ones((1024, 256), np.float32), name="x")
    # one accumulator over every iteration of the outer loop
    assert not any(_partitions(_loops([x.sum()], tape)))
    tape = tc.Tape()
    table = tape.input(np.ones((64, 256), np.float32), name="table")
    ids = tape.input(np.zeros(4096, np.int64), name="ids")
    # a gather checks its indices: its kernel may stop with a status
    assert not any(_partitions(_loops([table.take(ids)], tape)))


def test_a_large_random_fill_is_partitioned_and_its_chunks_read_the_key_again():
    tape = tc.Tape()
    key = tape.random_key()
    (kernel,) = _loops([tc.random.random_uniform(key, (300, 70))], tape)
    lets = [s for s in kernel.body if isinstance(s, loops.Let)]
    (fill,) = [s for s in kernel.body if isinstance(s, loops.Loop)]
    assert fill.annotations.partition and partition.chunks(fill) >= 2
    # the key's four words are read once before the loop; each chunk binds them again
    assert len(lets) == 4 and partition.outer_lets(lets, fill) == lets
    assert all(isinstance(let.value.args[0], loops.Load) for let in lets)


def test_chunks_do_not_depend_on_the_thread_count():
    def decided():
        tape = tc.Tape()
        x = tape.input(np.ones((512, 256), np.float32), name="x")
        return _partitions(_loops([x.tanh(), x.softmax(axis=1)], tape))
    tc.set_num_threads(1)
    one = decided()
    tc.set_num_threads(3)
    assert decided() == one and any(one)
    tc.set_num_threads(threads.available_cpus())


def test_a_large_matrix_product_splits_into_row_blocks_with_the_same_bits():
    tape = tc.Tape()
    x = tape.input(np.random.default_rng(0).normal(size=(128, 256)).astype(np.float32),
                   name="x")
    w = tape.parameter(np.random.default_rng(1).normal(size=(256, 384)).astype(np.float32))
    y = x @ w
    network = tape.into_network()
    (kernel,) = network.entry([y]).lower("reference").program.loops
    (blocks,) = kernel.body
    assert isinstance(blocks, loops.Loop) and blocks.annotations.partition == 1
    (gemm,) = [s for s in blocks.body if isinstance(s, loops.Gemm)]
    assert gemm.m * blocks.extent == 128 and gemm.n == 384
    answers = {}
    for backend in ("llvm", "numba"):
        plan = network.entry([y]).lower(backend)
        for n in (1, 2, 3):
            tc.set_num_threads(n)
            answers[backend, n] = plan.forward(network.parameters()).of(y).copy()
    tc.set_num_threads(threads.available_cpus())
    first = answers["llvm", 1]
    assert all(np.array_equal(first, other) for other in answers.values())
    want = network.entry([y]).lower("reference").forward(network.parameters()).of(y)
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4)

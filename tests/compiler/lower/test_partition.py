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


def test_a_large_row_product_with_a_vector_splits_into_blocks_of_rows_with_the_same_bits():
    # the vocabulary head of a decode step: x [1, k] @ table.T, the table read row by row
    k, n = 128, 2 * (partition.MATVEC_CHUNK // 128) + 100
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    x = tape.input(rng.normal(size=(1, k)).astype(np.float32), name="x")
    table = tape.parameter(rng.normal(size=(n, k)).astype(np.float32))
    columns = tape.parameter(rng.normal(size=(k, n)).astype(np.float32))
    head, projected = x @ table.T, x @ columns
    network = tape.into_network()
    kernels = network.entry([head, projected]).lower("reference").program.loops
    split = [k for k in kernels if isinstance(k.body[0], loops.Loop)]
    assert len(split) == 1  # the axpy form (columns) stays whole: see ``_split_mat_vec``
    blocks, *rest = split[0].body
    assert blocks.annotations.partition == 1 and blocks.extent == 2
    (block,) = [s for s in blocks.body if isinstance(s, loops.MatVec)]
    (tail,) = [s for s in rest if isinstance(s, loops.MatVec)]
    assert block.form == "dot" and block.n * blocks.extent + tail.n == n and tail.n == 100
    answers = {}
    for backend in ("llvm", "numba"):
        plan = network.entry([head, projected]).lower(backend)
        for threads_ in (1, 2, 3):
            tc.set_num_threads(threads_)
            run = plan.forward(network.parameters())
            answers[backend, threads_] = [run.of(head).copy(), run.of(projected).copy()]
    tc.set_num_threads(threads.available_cpus())
    first = answers["llvm", 1]
    assert all(np.array_equal(a, b) for other in answers.values() for a, b in zip(first, other))
    reference = network.entry([head, projected]).lower("reference").forward(network.parameters())
    for got, root in zip(first, (head, projected)):
        np.testing.assert_allclose(got, reference.of(root), rtol=1e-4, atol=1e-4)

"""Parallel partitions: which loops the cost model splits into chunks, and that a chunk's
size never depends on the thread count."""

from __future__ import annotations

import numpy as np
import pytest

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


@pytest.mark.parametrize("layout", ["C", "F"])
def test_a_large_matrix_product_splits_into_row_blocks_with_the_same_bits(layout):
    """Row-major ``a`` (``x @ w``) and transposed ``a`` (a backward pass's ``x.T @ g``:
    a block of its stored columns, read with the whole product's leading dimension)."""
    tape = tc.Tape()
    shape = (128, 256) if layout == "C" else (256, 128)
    x = tape.input(np.random.default_rng(0).normal(size=shape).astype(np.float32),
                   name="x")
    w = tape.parameter(np.random.default_rng(1).normal(size=(256, 384)).astype(np.float32))
    y = (x if layout == "C" else x.T) @ w
    network = tape.into_network()
    (kernel,) = network.entry([y]).lower("reference").program.loops
    (blocks,) = kernel.body
    assert isinstance(blocks, loops.Loop) and blocks.annotations.partition == 1
    (gemm,) = [s for s in blocks.body if isinstance(s, loops.Gemm)]
    assert gemm.m * blocks.extent == 128 and gemm.n == 384
    assert gemm.a_layout == layout and gemm.a_ld == (128 if layout == "F" else 0)
    _same_bits_everywhere(network, y)


def _same_bits_everywhere(network, y):
    """``y`` the same bits on llvm and numba at 1, 2 and 3 threads, and within float32
    rounding of the reference interpreter."""
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


def test_a_batched_product_runs_its_matrices_in_chunks():
    """Attention's ``q @ k`` over (batch, head): each iteration of the batch loop writes
    a matrix of its own, so the loop is partitioned; a small one stays whole."""
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    q = tape.input(rng.normal(size=(16, 4, 128, 16)).astype(np.float32), name="q")
    k = tape.input(rng.normal(size=(16, 4, 16, 128)).astype(np.float32), name="k")
    y = q @ k
    network = tape.into_network()
    (kernel,) = network.entry([y]).lower("reference").program.loops
    (batch,) = kernel.body
    assert isinstance(batch, loops.Loop) and batch.extent == 16
    assert batch.annotations.partition == 1
    _same_bits_everywhere(network, y)
    small = tc.Tape()
    q = small.input(rng.normal(size=(2, 2, 8, 4)).astype(np.float32), name="q")
    k = small.input(rng.normal(size=(2, 2, 4, 8)).astype(np.float32), name="k")
    assert not any(_partitions(_loops([q @ k], small)))


def test_a_batched_product_writing_one_matrix_for_every_iteration_stays_whole():
    """The check reads the product's output place: the same block for every iteration
    (or an operand overlapping the output) keeps the loop on one thread."""
    from dataclasses import replace

    rng = np.random.default_rng(0)
    tape = tc.Tape()
    q = tape.input(rng.normal(size=(16, 4, 128, 16)).astype(np.float32), name="q")
    k = tape.input(rng.normal(size=(16, 4, 16, 128)).astype(np.float32), name="k")
    y = q @ k
    (kernel,) = tape.into_network().entry([y]).lower("reference").program.loops
    (batch,) = kernel.body
    plain = replace(batch, annotations=loops.Annotations())

    def with_output_at(index):
        def rewrite(body):
            return tuple(loops.Let(s.name, index) if isinstance(s, loops.Let) and
                         s.name == "ob" else replace(s, body=rewrite(s.body))
                         if isinstance(s, loops.Loop) else s for s in body)
        return replace(kernel, body=rewrite((plain,)))

    def partitioned(k):
        (decided,) = partition.annotate([k], {})
        return decided.body[0].annotations.partition

    (ob,) = [s.value for s in partition._walk(batch.body)
             if isinstance(s, loops.Let) and s.name == "ob"]
    assert partitioned(with_output_at(ob)) == 1
    assert partitioned(with_output_at(loops.Index(ob.base, ()))) == 0
    (ab,) = [s.value for s in partition._walk(batch.body)
             if isinstance(s, loops.Let) and s.name == "ab"]
    assert partitioned(with_output_at(ab)) == 0  # blocks of q's stride overlap: 2048 < 128 * 128

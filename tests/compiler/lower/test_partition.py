"""Parallel partitions: which loops the cost model splits into chunks, and that a chunk's
size never depends on the thread count."""

from __future__ import annotations

import numpy as np
import pytest
from backends_agree import same_bits_everywhere

import tensorcode as tc
from tensorcode.compiler.backends import threads
from tensorcode.compiler.lower import depth, loops, partition


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


#: (a's shape, read transposed, b's shape, read transposed) -> (split side, blocks,
#: the block's rows or columns, columns left over)
PRODUCTS = {
    "rows": ((1024, 256), False, (256, 128), False, "rows", 8, 128, 0),
    "rows of a transposed a": ((256, 1024), True, (256, 128), False, "rows", 8, 128, 0),
    "columns": ((128, 256), False, (256, 384), False, "columns", 3, 128, 0),
    "columns of a transposed b": ((128, 256), False, (384, 256), True, "columns", 3, 128, 0),
    "columns and the rest": ((128, 256), False, (256, 400), False, "columns", 3, 128, 16),
    # the block width rounded down: fewer columns left over for the calling thread
    "columns rounded down": ((128, 64), False, (64, 4000), False, "columns", 15, 256, 160),
    # a batch of one around the product (GPT-2's head on one sequence) is the product
    "a batch of one": ((1, 128, 256), False, (256, 384), False, "columns", 3, 128, 0),
}


@pytest.mark.parametrize("case", list(PRODUCTS))
def test_a_large_matrix_product_splits_into_blocks_with_the_same_bits(case):
    """Rows when the product has at least as many rows as columns, else columns: the
    larger operand is the one split, each block reading its part once; a block of a
    transposed operand is a block of its stored columns (rows), read with the whole
    product's leading dimension."""
    a_shape, a_t, b_shape, b_t, side, count, size, rest = PRODUCTS[case]
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    x = tape.input(rng.normal(size=a_shape).astype(np.float32), name="x")
    w = tape.parameter(rng.normal(size=b_shape).astype(np.float32))
    y = (x.T if a_t else x) @ (w.T if b_t else w)
    network = tape.into_network()
    (kernel,) = network.entry([y]).lower("reference").program.loops
    blocks = kernel.body[0]
    assert isinstance(blocks, loops.Loop) and blocks.annotations.partition == 1
    assert blocks.var == side and blocks.extent == count
    (gemm,) = [s for s in blocks.body if isinstance(s, loops.Gemm)]
    m, n = y.shape[-2:]
    if side == "rows":
        assert (gemm.m, gemm.n, gemm.a_ld) == (size, n, m if a_t else 0)
    else:
        assert (gemm.m, gemm.n, gemm.out_ld, gemm.b_ld) == (m, size, n, 0 if b_t else n)
    tail = [s for s in kernel.body[1:] if isinstance(s, loops.Gemm)]
    assert [t.n for t in tail] == ([rest] if rest else [])
    same_bits_everywhere(network, y)


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
    same_bits_everywhere(network, y)
    one = tc.Tape()  # one sequence's heads: the loop inside the batch of one is split
    q = one.input(rng.normal(size=(1, 12, 128, 64)).astype(np.float32), name="q")
    k = one.input(rng.normal(size=(1, 12, 64, 128)).astype(np.float32), name="k")
    scores = q @ k
    network = one.into_network()
    (kernel,) = network.entry([scores]).lower("reference").program.loops
    heads = [s for s in kernel.body if isinstance(s, loops.Loop)]
    assert [(h.extent, h.annotations.partition) for h in heads] == [(12, 1)]
    same_bits_everywhere(network, scores)
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

    (ob,) = [s.value for s in partition.walk(batch.body)
             if isinstance(s, loops.Let) and s.name == "ob"]
    assert partitioned(with_output_at(ob)) == 1
    assert partitioned(with_output_at(loops.Index(ob.base, ()))) == 0
    (ab,) = [s.value for s in partition.walk(batch.body)
             if isinstance(s, loops.Let) and s.name == "ab"]
    assert partitioned(with_output_at(ab)) == 0  # blocks of q's stride overlap: 2048 < 128 * 128


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


@pytest.mark.parametrize("a_t", [False, True])
@pytest.mark.parametrize("b_t", [False, True])
def test_a_product_with_a_long_shared_dimension_splits_along_it(a_t, b_t):
    """A weight gradient's shape, 64 x 2048 by 2048 x 192: too few rows and columns for
    blocks of either, so blocks of the shared dimension write partial products to
    scratch and a loop adds them in block order; the same bits at any thread count and
    on both compiled backends."""
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    x = tape.input(rng.normal(size=(2048, 64) if a_t else (64, 2048)).astype(np.float32),
                   name="x")
    w = tape.parameter(rng.normal(size=(192, 2048) if b_t else (2048, 192)).astype(np.float32))
    y = (x.T if a_t else x) @ (w.T if b_t else w)
    network = tape.into_network()
    (kernel,) = network.entry([y]).lower("reference").program.loops
    blocks, *_, sums = kernel.body
    assert isinstance(blocks, loops.Loop) and blocks.var == "depth"
    assert blocks.annotations.partition == 1 and blocks.extent == depth.blocks(64, 2048, 192)
    (gemm,) = [s for s in blocks.body if isinstance(s, loops.Gemm)]
    assert gemm.k == 2048 // blocks.extent and gemm.out.base.role == "scratch"
    assert isinstance(sums, loops.Loop) and sums.extent == 64 * 192
    assert not sums.annotations.partition
    same_bits_everywhere(network, y)


def test_the_shared_dimension_splits_only_where_rows_and_columns_cannot():
    assert depth.blocks(64, 2048, 192) == 8
    assert depth.blocks(512, 2048, 64) == 0  # its rows split
    assert depth.blocks(64, 2048, 512) == 0  # its columns split
    assert depth.blocks(64, 256, 64) == 0  # too small to pay
    assert depth.blocks(64, 2049, 192) == 0  # no equal blocks

"""Epilogues: an elementwise kernel after a split product runs inside the product's
blocks, with the same bits as before on every backend and thread count, and only where
each element reads its own."""

from __future__ import annotations

import numpy as np
import pytest
from backends_agree import same_bits_everywhere

import tensorcode as tc
from tensorcode.compiler.lower import epilogue, loops


def _lowered(tape, roots):
    network = tape.into_network()
    return network, network.entry(roots).lower("reference").program.loops


def _dense(rows, inputs, outputs, seed=0):
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    x = tape.input(rng.normal(size=(rows, inputs)).astype(np.float32), name="x")
    w = tape.parameter(rng.normal(size=(inputs, outputs)).astype(np.float32) / 16)
    b = tape.parameter(rng.normal(size=(outputs,)).astype(np.float32))
    return tape, x, w, b


@pytest.mark.parametrize("shape, side", [((512, 256, 256), "rows"),
                                         ((128, 784, 256), "columns")])
def test_a_bias_and_activation_run_inside_the_products_blocks(shape, side):
    tape, x, w, b = _dense(*shape)
    y = (x @ w + b).relu()
    network, kernels = _lowered(tape, [y])
    (fused,) = [k for k in kernels if " + " in k.title]
    blocks = fused.body[0]
    assert isinstance(blocks, loops.Loop) and blocks.var == side
    assert blocks.annotations.partition
    kinds = [type(s).__name__ for s in blocks.body]
    assert kinds.index("Gemm") < len(kinds) - 1  # the epilogue's loop follows the product
    after = kernels[kernels.index(fused) + 1]
    assert after.body == () and after.title in fused.title  # its place, kept empty
    same_bits_everywhere(network, y)


def test_an_epilogue_reading_another_element_stays_a_kernel_of_its_own():
    tape, x, w, _ = _dense(512, 256, 512)
    y = x @ w
    z = y * y.T  # element (i, j) reads (j, i), which another block writes
    network, kernels = _lowered(tape, [z])
    assert not any(" + " in k.title for k in kernels)
    same_bits_everywhere(network, z)


def test_a_row_reduction_after_a_product_is_not_an_epilogue():
    tape, x, w, b = _dense(512, 256, 256)
    y = (x @ w + b).softmax(axis=1)
    network, kernels = _lowered(tape, [y])
    assert not any(" + " in k.title for k in kernels)


def test_fuse_leaves_kernels_without_a_split_product_alone():
    tape = tc.Tape()
    x = tape.input(np.ones((64, 16), np.float32), name="x")
    w = tape.parameter(np.ones((16, 16), np.float32))
    _, kernels = _lowered(tape, [(x @ w).tanh()])  # too small to split
    assert epilogue.fuse(kernels) == tuple(kernels)

"""Our register-tiled products (``Gemm`` of method ``"tiles"``): chosen by shape, and
the same bits on the llvm backend's vector tiles and the Numba backend's scalar chains
at every thread count, within float32 rounding of the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from backends_agree import same_bits_everywhere

import tensorcode as tc
from tensorcode.compiler.lower import loops
from tensorcode.compiler.lower.partition import walk


def _product(form, m, k, n, seed=0):
    """``form``: ``"atb"`` a weight gradient ``x.T @ g``, ``"ab"`` ``x @ w``, ``"abt"``
    ``x @ w.T`` (its ``B`` read across rows: packed a panel at a time)."""
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    if form == "atb":
        x = tape.input(rng.normal(size=(k, m)).astype(np.float32), name="x")
        g = tape.input(rng.normal(size=(k, n)).astype(np.float32), name="g")
        y = x.T @ g
    else:
        x = tape.input(rng.normal(size=(m, k)).astype(np.float32), name="x")
        shape = (k, n) if form == "ab" else (n, k)
        w = tape.parameter(rng.normal(size=shape).astype(np.float32))
        y = x @ (w if form == "ab" else w.T)
    return tape.into_network(), y


def _methods(network, y):
    kernels = network.entry([y]).lower("reference").program.loops
    return [s.method for kernel in kernels for s in walk(kernel.body)
            if isinstance(s, loops.Gemm)]


@pytest.mark.parametrize("form, m, k, n", [
    ("atb", 37, 300, 45),    # rows and columns left over from whole tiles and vectors
    ("atb", 64, 2048, 192),  # long shared dimension: split into partials on the pool
    ("ab", 2048, 33, 20),    # many rows: split by rows on the pool
    ("abt", 40, 70, 40),     # packed B
])
def test_tiled_products_give_the_same_bits_on_every_backend_and_thread_count(form, m, k, n):
    network, y = _product(form, m, k, n)
    assert _methods(network, y) == ["tiles"] * len(_methods(network, y)) != []
    same_bits_everywhere(network, y)


def test_batched_attention_products_are_tiled_per_head():
    rng = np.random.default_rng(1)
    tape = tc.Tape()
    q = tape.input(rng.normal(size=(4, 64, 16)).astype(np.float32), name="q")
    v = tape.input(rng.normal(size=(4, 64, 16)).astype(np.float32), name="v")
    y = (q @ q.transpose((0, 2, 1))) @ v
    network = tape.into_network()
    assert _methods(network, y) == ["tiles", "tiles"]
    same_bits_everywhere(network, y)


def test_wide_and_non_float32_products_keep_blas():
    assert loops.tiles_suit(128, 768, 2304, "C", "C", "float32") is False  # wide
    assert loops.tiles_suit(2048, 512, 64, "C", "C", "float32") is False  # long and narrow
    assert loops.tiles_suit(64, 2048, 192, "F", "C", "float64") is False
    assert loops.tiles_suit(64, 2048, 8, "F", "C", "float32") is False  # under a vector
    assert loops.tiles_suit(64, 4096, 64, "C", "F", "float32") is False  # too deep to pack
    assert loops.tiles_suit(256, 4096, 256, "F", "C", "float32") is True  # x.T @ g
    assert loops.tiles_suit(2048, 64, 96, "C", "F", "float32") is True
    network, y = _product("ab", 128, 384, 512)
    assert _methods(network, y) and set(_methods(network, y)) == {"blas"}

"""Views as strided locations: a reshape reads its input in place whenever NumPy's
would, and the attention's head split of a sliced projection is no copy."""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.compiler.lower.kernels import reshaped_strides


def _factorings(n: int) -> list[tuple[int, ...]]:
    """Shapes of ``n`` elements with up to three axes (ones included)."""
    found = {(n,)}
    for a in range(1, n + 1):
        if n % a == 0:
            found.add((a, n // a))
            for b in range(1, n // a + 1):
                if (n // a) % b == 0:
                    found.add((a, b, n // a // b))
    return sorted(found)


def test_a_reshape_is_a_view_exactly_when_numpy_reshapes_in_place():
    base = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    views = [base[:, :, 2:6], base[:, 1:4, :], base.transpose(1, 0, 2)[:, :, ::2],
             base[:, :, :4].transpose(0, 2, 1), base[::2, :, 4:], base[:, 3:4, :]]
    checked = 0
    for view in views:
        strides = tuple(s // view.itemsize for s in view.strides)
        for shape in _factorings(view.size):
            found = reshaped_strides(view.shape, strides, shape)
            try:
                in_place = view.view()
                in_place.shape = shape  # raises where NumPy must copy
            except AttributeError:
                in_place = None
            if in_place is None:
                assert found is None, (view.shape, strides, shape)
                continue
            assert found is not None, (view.shape, strides, shape)
            read = np.lib.stride_tricks.as_strided(
                view, shape, tuple(s * view.itemsize for s in found))
            np.testing.assert_array_equal(read, view.reshape(shape))
            checked += 1
    assert checked > 20


def test_the_heads_of_a_sliced_projection_are_split_in_place():
    tape = tc.Tape()
    qkv = tape.input(np.random.default_rng(0).standard_normal((2, 8, 12)).astype(np.float32),
                     name="qkv")
    qkv = qkv * 2.0  # a computed value: its views are located once it has a buffer
    heads = [qkv.slice(k * 4, (k + 1) * 4, axis=2).reshape(2, 8, 2, 2).transpose(0, 2, 1, 3)
             for k in range(3)]
    scores = heads[0] @ heads[1].transpose(0, 1, 3, 2)
    out = (scores.softmax(axis=-1) @ heads[2]).sum()
    network = tape.into_network()
    plans = {b: network.entry([out, scores]).lower(b) for b in ("reference", "llvm", "numba")}
    reshapes = [line for line in plans["llvm"].describe().splitlines()
                if "= reshape" in line]
    assert len(reshapes) == 3 and all("(view: W_f32" in line for line in reshapes)
    runs = {b: p.forward(network.parameters()) for b, p in plans.items()}
    for b in ("llvm", "numba"):
        np.testing.assert_allclose(runs[b].of(scores), runs["reference"].of(scores),
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(runs[b].of(out), runs["reference"].of(out), rtol=1e-5)
    assert np.array_equal(runs["llvm"].of(scores), runs["numba"].of(scores))

"""render: integers times one scale per tensor, and the rounded tensors are what the
text shows (the text, run as edit statements, rebuilds them bit for bit)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tensorcode.errors import PatchError
from tensorcode.weights import apply_edits, render, tensor_sha256
from tensorcode.weights.render import choose_scale


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and tensor_sha256(a) == tensor_sha256(b)


def test_scale_keeps_digits_of_the_largest_entry():
    w = np.array([[0.123456, -2.71828], [0.0004, 1.5]], dtype=np.float32)
    shown = render({"w": w}, digits=3)
    assert shown.scales["w"] == 0.01
    assert "# w: float32[2, 2] = integers x 0.01" in shown.text
    assert "w[0] = [12, -272]" in shown.text
    assert "w[1] = [0, 150]" in shown.text
    oracle = (np.rint(w.astype(np.float64) / 0.01) * 0.01).astype(np.float32)
    assert np.array_equal(shown.rounded["w"], oracle)


@pytest.mark.parametrize("largest, digits, scale", [
    (9.9996, 3, 0.1), (9.994, 3, 0.01), (1.0, 3, 0.01), (999.0, 3, 1.0), (1000.0, 3, 10.0),
    (0.00123, 2, 1e-4),
    (123456.0, 1, 100000.0), (7.0, 1, 1.0), (1e-30, 3, 1e-32), (3e300, 4, 1e297),
])
def test_choose_scale_counts_digits_exactly(largest, digits, scale):
    found = choose_scale(np.array([largest, -largest / 7]), digits)
    assert found == scale
    leading = round(largest / found)
    assert 10 ** (digits - 1) <= leading < 10 ** digits


def test_rendered_units_for_every_rank_and_kind():
    mapping = {
        "scalar": np.array(-3.14159),
        "vector": np.array([0.5, 0.25, -0.125], dtype=np.float32),
        "cube": np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7,
        "zeros": np.zeros((2, 2), dtype=np.float16),
        "counts": np.array([1, -2, 3_000_000_000], dtype=np.int64),
        "mask": np.array([True, False]),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "0.weights": np.ones((1, 2), dtype=np.float32),
        "odd name!": np.ones(2, dtype=np.float32),
    }
    shown = render(mapping, digits=4)
    assert shown.scales["scalar"] == 0.001 and "scalar = -3142" in shown.text
    assert "vector = [5000, 2500, -1250]" in shown.text
    assert "cube[1, 2] = [" in shown.text
    assert shown.scales["zeros"] == 1.0 and "zeros[1] = [0, 0]" in shown.text
    assert "counts = [1, -2, 3000000000]" in shown.text and shown.scales["counts"] == 1.0
    assert "mask = [1, 0]" in shown.text
    assert "(empty is empty)" in shown.text
    assert "0.weights[0] = [1000, 1000]" in shown.text
    assert '"odd name!" = [1000, 1000]' in shown.text
    for name, array in mapping.items():
        assert shown.rounded[name].dtype == array.dtype
        assert shown.rounded[name].shape == array.shape
    assert np.array_equal(shown.rounded["counts"], mapping["counts"])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("digits", [1, 2, 3, 6])
def test_text_rebuilds_rounded_bit_for_bit(dtype, digits):
    rng = np.random.default_rng(digits)
    mapping = {"w": (rng.normal(size=(5, 7)) * 3).astype(dtype),
               "b": (rng.normal(size=7) * 1e-3).astype(dtype),
               "tiny": np.array([-1e-4, 1e-4, 0.5], dtype=dtype)}
    shown = render(mapping, digits=digits)
    start = {name: np.full_like(array, 99) for name, array in mapping.items()}
    rebuilt = apply_edits(start, shown.text, shown.scales)
    for name in mapping:
        assert _same_bits(rebuilt[name], shown.rounded[name]), name
    # No negative zero survives: the text shows "0", which reads back as +0.0.
    assert not np.any(np.signbit(shown.rounded["tiny"]) & (shown.rounded["tiny"] == 0))


def test_rounding_error_is_within_half_a_unit():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(20, 20))
    shown = render({"w": w}, digits=3)
    assert np.max(np.abs(shown.rounded["w"] - w)) <= shown.scales["w"] / 2 + 1e-15
    integers = [int(v) for v in re.findall(r"-?\d+", "\n".join(
        line.split("=", 1)[1] for line in shown.text.splitlines() if line.startswith("w[")))]
    assert max(abs(v) for v in integers) < 1000


def test_render_refuses_bad_input():
    with pytest.raises(PatchError, match="non-finite"):
        render({"w": np.array([1.0, np.nan])})
    with pytest.raises(PatchError, match="digits"):
        render({"w": np.ones(2)}, digits=0)
    with pytest.raises(PatchError, match="NumPy array or a PyTorch tensor"):
        render({"w": "not a tensor"})
    with pytest.raises(PatchError, match="dtype"):
        render({"w": np.array(["a"])})


def test_any_name_renders_as_a_statement_that_reads_back():
    names = ["a#b", "h\u00e9llo", 'q"uote', "back\\slash", "new\nline", "tab\tx", "123",
             "-x", ""]
    mapping = {name: np.arange(3, dtype=np.float32) * (k + 1) for k, name in enumerate(names)}
    shown = render(mapping)
    rebuilt = apply_edits({name: np.zeros(3, dtype=np.float32) for name in names},
                          shown.text, shown.scales)
    for name in names:
        assert _same_bits(rebuilt[name], shown.rounded[name]), name

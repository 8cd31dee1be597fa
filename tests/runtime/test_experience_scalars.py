"""NumPy scalars in an experience come back as the same NumPy scalar type, not as 0-d
arrays (nor, for ``np.float64``, as a Python float)."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode.errors import ArtifactError
from tensorcode.files import decode as decode_json
from tensorcode.files import dumps
from tensorcode.runtime.experience_codecs import decode, encode, validate


@pytest.mark.parametrize("value", [np.float32(1.5), np.float64(-2.25), np.int32(7),
                                   np.int64(-(2 ** 40)), np.bool_(True)])
def test_numpy_scalars_round_trip_as_their_type(value):
    text = dumps(encode({"x": value, "xs": [value]}, {}))
    node = decode_json(text)
    validate(node, {}, None, "value")
    back = decode(node, {})
    for item in (back["x"], back["xs"][0]):
        assert type(item) is type(value) and item == value and np.ndim(item) == 0


def test_a_zero_d_array_stays_an_array():
    back = decode(encode(np.array(3.0, np.float32), {}), {})
    assert isinstance(back, np.ndarray) and back.shape == ()


@pytest.mark.parametrize("node", [
    {"t": "scalar", "dtype": "float32", "v": "1"},
    {"t": "scalar", "dtype": "complex64", "v": 1},
    {"t": "scalar", "dtype": "int32", "v": 2 ** 40},
    {"t": "scalar", "dtype": "float32", "v": 1, "shape": []},
])
def test_malformed_scalars_are_refused(node):
    with pytest.raises(ArtifactError):
        validate(node, {}, None, "value")

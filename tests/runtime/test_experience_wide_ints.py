"""Integers wider than 53 bits in experience data are written as hex strings, so a
JavaScript reader (IEEE doubles) restores them exactly; the older form, plain JSON
integers, keeps loading."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode.errors import ArtifactError
from tensorcode.files import decode as decode_json
from tensorcode.files import dumps
from tensorcode.files.strict_json import MAX_SAFE_INTEGER, read_safe_int, safe_int
from tensorcode.runtime.experience_codecs import decode, encode, validate

WIDE = [2 ** 53, -(2 ** 53) - 7, 2 ** 63 - 1, -(2 ** 63), 10 ** 30]


def _no_wide_json_numbers(node) -> bool:
    """True when no JSON number in ``node`` lies beyond what a double holds exactly."""
    if isinstance(node, bool):
        return True
    if isinstance(node, int):
        return abs(node) <= MAX_SAFE_INTEGER
    if isinstance(node, dict):
        return all(_no_wide_json_numbers(v) for v in node.values())
    if isinstance(node, list):
        return all(_no_wide_json_numbers(v) for v in node)
    return True


def test_wide_ints_scalars_and_int64_arrays_round_trip_exactly():
    value = {"ints": WIDE + [MAX_SAFE_INTEGER, -5],
             "scalar": np.int64(2 ** 62 + 1),
             "array": np.array([2 ** 62 + 3, -(2 ** 63), 12], np.int64)}
    node = decode_json(dumps(encode(value, {})))
    assert _no_wide_json_numbers(node)
    validate(node, {}, None, "value")
    back = decode(node, {})
    assert back["ints"] == WIDE + [MAX_SAFE_INTEGER, -5]
    assert type(back["scalar"]) is np.int64 and back["scalar"] == 2 ** 62 + 1
    np.testing.assert_array_equal(back["array"], value["array"])
    assert back["array"].dtype == np.int64


def test_the_older_plain_integer_form_still_loads():
    node = {"t": "dict", "v": {"n": {"t": "int", "v": 2 ** 60},
                               "a": {"t": "array", "dtype": "int64", "shape": [1],
                                     "v": [2 ** 60]}}}
    validate(node, {}, None, "value")
    back = decode(node, {})
    assert back["n"] == 2 ** 60 and back["a"][0] == 2 ** 60


@pytest.mark.parametrize("node", [
    {"t": "int", "v": "12"},                      # not hex-prefixed
    {"t": "int", "v": "0xZZ"},
    {"t": "int", "v": "0X1F"},                    # the form is lowercase
    {"t": "array", "dtype": "int64", "shape": [1], "v": ["0x" + "f" * 17]},  # > int64
    {"t": "array", "dtype": "float32", "shape": [1], "v": ["0x1"]},          # floats stay numbers
])
def test_malformed_wide_ints_are_refused(node):
    with pytest.raises(ArtifactError):
        validate(node, {}, None, "value")


def test_the_shared_rule():
    assert safe_int(MAX_SAFE_INTEGER) == MAX_SAFE_INTEGER
    assert safe_int(2 ** 53) == "0x20000000000000" and safe_int(-(2 ** 53)) == "-0x20000000000000"
    assert read_safe_int("-0x20000000000000") == -(2 ** 53)
    assert read_safe_int(True) is None and read_safe_int(1.0) is None

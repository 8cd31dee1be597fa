"""The compiled batch reader takes a body only where the shared validator returns the same
arrays (bit for bit, the sign of zero included) and gives up on everything else, which
the validator then reads or refuses with its own message."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tensorcode.distill.inputs import InputError, read_batch
from tensorcode.serve.batch_reader import BatchReader

from .test_fast_reader import _mutations

LIMIT = 1 << 20
BATCH = {"x": (2, 2), "s": ()}
FLAT = {"features": (4,)}


def _validator(body, contract, max_cases=50):
    try:
        return read_batch(body, contract, LIMIT, max_cases)
    except InputError as error:
        return error


def _agrees(body, contract, max_cases=50):
    """``True`` when the reader took ``body`` (and agreed), ``False`` when it gave up."""
    taken = BatchReader(contract).read(body, max_cases)
    if taken is None:
        return False
    expected = _validator(body, contract, max_cases)
    assert not isinstance(expected, InputError), (body, expected)
    assert set(taken) == set(expected)
    for name, array in taken.items():
        assert array.dtype == np.float64 and array.shape == expected[name].shape
        assert array.flags.c_contiguous
        assert np.array_equal(array, expected[name]), (body, name)
        assert np.array_equal(np.signbit(array), np.signbit(expected[name])), (body, name)
    return True


def test_a_canonical_batch_is_read_in_any_member_order_and_spacing():
    assert _agrees(b'[{"x": [[1, 2], [3, 4]], "s": 5}, {"s": 6, "x": [[7, 8], [9, 10]]}]',
                   BATCH)
    assert _agrees(b' [ {"s" :-1.5e-3 ,"x":[ [1.25,2E2],[ 3 ,-0.0 ] ] } ]\n', BATCH)
    body = json.dumps([{"features": [i, -i, i / 4, 1e-3]} for i in range(300)]).encode()
    assert _agrees(body, FLAT, max_cases=300)


@pytest.mark.parametrize("body", [
    b'[{"x": [[1, 2], [3, 4]], "s": 5, "s": 6}]',            # a repeated name
    b'[{"x": [[1, 2], [3, 4]], "\\u0073": 5}]',                # an escaped name
    b'[{"x": [[1, 2], [3, 4]], "t": 5}]', b'[{"x": [[1, 2], [3, 4]]}]',
    b'[{"x": [[1, 2], [3, 4]], "s": true}]', b'[{"x": [[1, 2], [3, 4]], "s": null}]',
    b'[{"x": [[1, 2], [3, 4]], "s": "5"}]', b'[{"x": [[1, 2], [3]], "s": 5}]',
    b'[{"x": [[1, 2], [3, [4]]], "s": 5}]', b'[{"x": [[1, 2], [3, 4]], "s": {"a": 1}}]',
    b'[{"x": [[1, 2], [3, 4]], "s": [5]}]', b'[{"x": [[1, 2], [3, 4], [5, 6]], "s": 5}]',
    b'[{"x": [[1, 2], [3, 4]], "s": 1' + b"0" * 30 + b"}]",   # 10**30 as an integer
    b'[{"x": [[1, 2], [3, 4]], "s": 1' + b"0" * 400 + b"}]",  # past float64
    b'[{"x": [[1, 2], [3, 4]], "s": 1e400}]', b'[{"x": [[1, 2], [3, 4]], "s": NaN}]',
    b'[{"x": [[1, 2], [3, 4]], "s": 9007199254740993}]',      # past 2**53: exact elsewhere
    b'[{"x": [[1, 2], [3, 4]], "s": 0.1000000000000000055511151231257827}]',
    b'[{"x": [[1, 2], [3, 4]], "s": 01}]', b'[{"x": [[1, 2], [3, 4]], "s": 1.}]',
    b'[{"x": [[1, 2], [3, 4]], "s": .5}]', b'[{"x": [[1, 2], [3, 4]], "s": +1}]',
    b'[{"x": [[1, 2], [3, 4]], "s": -}]', b'[{"x": [[1, 2], [3, 4]], "s": 1e}]',
    b'[{"x": [[1, 2], [3, 4]], "s": 1e+}]', b'[{"x": [[1, 2], [3, 4]], "s": 1.5.5}]',
    b'{"x": [[1, 2], [3, 4]], "s": 5}', b"[]", b"[1, 2]", b"", b" ",
    b'[{"x": [[1, 2], [3, 4]], "s": 5}', b'[{"x": [[1, 2], [3, 4]], "s": 5},]',
    b'[{"x": [[1, 2], [3, 4]], "s": 5}] x', b'[{"x": [[1, 2], [3, 4]], "s": 5}]\x00',
    b'\xef\xbb\xbf[{"x": [[1, 2], [3, 4]], "s": 5}]', b'[{"x\xff": [[1, 2], [3, 4]], "s": 5}]',
    b'[{"x": [[1, 2], [3, 4]], "s": 5, "\xed\xa0\x80": 1}]',  # a raw surrogate
    b'[{"x": [[1, 2], [3, 4]], "s\xed\xa0\x80": 5}]',
    b'[{"x": ' + b"[" * 64 + b"1" + b"]" * 64 + b', "s": 5}]',   # deep nesting
    b"[" + b",".join([b'{"x": [[1, 2], [3, 4]], "s": 5}'] * 51) + b"]",  # past max_cases
])
def test_anything_else_is_left_to_the_validator(body):
    assert BatchReader(BATCH).read(body, 50) is None


def test_numbers_are_read_exactly_or_left_to_the_validator():
    rng = random.Random(41)
    tokens = ["0", "-0", "-0.0", "0e5", "-0e-5", "1E2", "1e+2", "1.5e-3", "5e-324", "1e22",
              "1e23", "1e-22", "1e-23", "9007199254740992", "9007199254740993", "0.1",
              "123456789012345678", "1.7976931348623157e308", "4.9e-324", "100000000000000000000"]
    for _ in range(2000):
        kind = rng.randrange(4)
        if kind == 0:
            tokens.append(repr(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)))
        elif kind == 1:
            tokens.append(str(rng.randint(-10 ** rng.randint(1, 18), 10 ** rng.randint(1, 18))))
        elif kind == 2:
            tokens.append(f"{rng.randint(0, 10 ** rng.randint(1, 9))}.{rng.randint(0, 10 ** 8)}"
                          f"e{rng.randint(-26, 26)}")
        else:
            tokens.append(f"-{rng.randint(0, 999)}.{rng.randint(0, 999):03d}")
    taken = 0
    for at in range(0, len(tokens), 4):
        chunk = (tokens[at:at + 4] + ["0"] * 4)[:4]
        body = ('[{"features": [' + ", ".join(chunk) + "]}]").encode()
        taken += _agrees(body, FLAT)
    assert taken > 100  # short numbers take the compiled path


def test_fuzzed_batches_are_taken_only_where_the_validator_agrees():
    rng = random.Random(43)
    cases = [json.dumps({"x": [[rng.randint(-3, 3), round(rng.random(), 3)], [0, 1]],
                         "s": rng.choice([1, -0.5, 2e-3])}).encode() for _ in range(5)]
    outcomes = {"taken": 0, "left": 0}
    for body in _mutations(seed=47, count=2000, seeds=cases):
        joined = b"[" + b",".join(cases[:2] + [body]) + b"]"
        outcomes["taken" if _agrees(joined, BATCH) else "left"] += 1
    print(f"fuzzed batches: {outcomes}")
    assert _agrees(b"[" + b",".join(cases) + b"]", BATCH)
    assert outcomes["taken"] > 30 and outcomes["left"] > 500


def test_contracts_the_reader_cannot_take():
    assert not BatchReader.takes({})
    assert not BatchReader.takes({'a"b': (2,)})
    assert not BatchReader.takes({"a\\b": (2,)})
    assert not BatchReader.takes({"a\nb": (2,)})
    assert not BatchReader.takes({"x": (0,)})
    assert not BatchReader.takes({"x": (1,) * 63})
    assert BatchReader.takes({"x": (2, 3), "é": ()})
    assert _agrees('[{"é": 1, "x": [[1, 2, 3], [4, 5, 6]]}]'.encode(), {"x": (2, 3), "é": ()})

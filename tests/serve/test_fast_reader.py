"""orjson reads request bodies only where its result is the strict reader's: the same
documents, the same numbers, the same refusals with the same messages, on the bad bodies
the strict reader was tested with and on the cases a faster parser could break."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tensorcode.distill import inputs
from tensorcode.distill.inputs import InputError, check_batch, read_batch, read_document

CONTRACT = {"x": (3,), "s": ()}
LIMIT = 1 << 20


def _strict(text):
    """What the strict reader alone says about ``text``."""
    try:
        return ("document", inputs._strict_document(text, LIMIT))
    except InputError as error:
        return ("refused", error.kind, error.field, str(error))


def _read(text):
    try:
        return ("document", read_document(text, LIMIT))
    except InputError as error:
        return ("refused", error.kind, error.field, str(error))


def _same(a, b):
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and repr(a) == repr(b)


BAD_BODIES = [
    b'{"x": [1, 2, 3], "x": [4, 5, 6], "s": 1}',               # a duplicate key
    b'{"x": [1, 2, 3], "s": 1, "s": 1}',                        # the same value twice
    b'{"x": [1, 2, 3], "s": {"a": 1, "a": 2}}',                 # a nested duplicate
    b'{"x": [NaN, 2, 3], "s": 1}', b'{"x": [Infinity], "s": -Infinity}',
    b'{"\\ud800": 1}', b'{"x": "\\ud800", "s": 1}', b'["\\udc00\\ud800"]',  # lone surrogates
    b'{"x": ["\xed\xa0\x80"], "s": 1}',                        # a surrogate as raw UTF-8
    b"[" * 65 + b"]" * 65, b'{"x": ' + b"[" * 64 + b"1" + b"]" * 64 + b"}",  # deep nesting
    b'{"x": [1' + b"0" * 30 + b', 2, 3], "s": 1}',              # 10**30 as an integer
    b'{"x": [1' + b"0" * 400 + b', 2, 3], "s": 1}',             # past float64
    b'{"x": [-9223372036854775809, 2, 3], "s": 18446744073709551616}',
    b'{"x": [1e400, 2, 3], "s": 1}',
    b'{"x": [1, 2, 3], "s": 1', b'{"x": [1, 2', b"", b" ", b'{"x"',  # cut short
    b'\xef\xbb\xbf{"x": [1, 2, 3], "s": 1}', b"\xff", b'{"x": [1, 2, 3], "s": 1}\x00',
    b'{"a:b": 1, "x": [1, 2, 3], "s": 1}', b'{"x": "a:b", "s": 1}',
    b'{"x": [1, 2, 3], "s": 1} {}', b"[1,]", b"[01]", b"[.5]", b"[+1]",
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_the_fast_reader_says_what_the_strict_reader_says(body):
    assert _same(_read(body), _strict(body))


def test_the_cases_a_faster_parser_could_break():
    with pytest.raises(InputError, match="duplicate key"):
        read_document(b'{"x": [1, 2, 3], "x": [4, 5, 6], "s": 1}')
    with pytest.raises(InputError, match="deeper than 64"):
        read_document(b"[" * 65 + b"]" * 65)
    with pytest.raises(InputError, match="not JSON"):
        read_document(b'{"x": [1, 2')
    assert read_document(b'{"\\ud800": 1}') == {"\ud800": 1}  # the validator refuses it
    assert read_document(b"[1" + b"0" * 30 + b"]") == [1e30]  # one rule: float64's range
    assert read_document(b"[1" + b"0" * 400 + b"]") == [float("inf")]  # refused as not_finite


def _mutations(seed: int, count: int, seeds=None):
    """Seeded mutations of valid bodies: bytes flipped, dropped, repeated, spliced."""
    rng = random.Random(seed)
    numbers = [0, 1, -2.5, 1e-7, 12345678901234567890]
    seeds = seeds or [json.dumps({"x": [rng.choice(numbers) for _ in range(3)],
                                  "s": rng.random()}).encode() for _ in range(20)]
    alphabet = b'{}[]",:\\0123456789eE.-+ ntrufalsNIy\xff\xed\xa0'
    for _ in range(count):
        body = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(body) + 1)
            action = rng.randrange(4)
            if action == 0 and body:
                body[min(at, len(body) - 1)] = rng.choice(alphabet)
            elif action == 1:
                del body[at:at + rng.randint(1, 4)]
            elif action == 2:
                body[at:at] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
            else:
                body[at:at] = body[max(0, at - 8):at]
        yield bytes(body)


def test_fuzzed_bodies_read_alike():
    outcomes = {"document": 0, "refused": 0}
    for body in _mutations(seed=29, count=3000):
        fast, strict = _read(body), _strict(body)
        assert _same(fast, strict), body
        outcomes[fast[0]] += 1
    print(f"fuzzed bodies: {outcomes}")
    assert outcomes["document"] > 100 and outcomes["refused"] > 100


def _batch_strict(text, contract):
    try:
        documents = inputs._strict_document(text, LIMIT)
        if isinstance(documents, list) and len(documents) > 50:
            raise InputError("too many", None, "too_many")
        stacked = check_batch(documents, contract)
        return ("stacked", {k: v.tolist() for k, v in stacked.items()})
    except InputError as error:
        return ("refused", error.kind, error.field)


def _batch(text, contract):
    try:
        stacked = read_batch(text, contract, LIMIT, max_cases=50)
        assert all(v.dtype == np.float64 for v in stacked.values())
        return ("stacked", {k: v.tolist() for k, v in stacked.items()})
    except InputError as error:
        return ("refused", error.kind, error.field)


BATCH = {"x": (2, 2), "s": ()}


@pytest.mark.parametrize("body", [
    b'[{"x": [[1, 2], [3, 4]], "s": 5}, {"s": 6, "x": [[7, 8], [9, 10]]}]',
    b'[{"x": [[1, 2], [3, 4]], "s": 5, "s": 6}]',
    b'[{"x": [[1, 2], [3, 4]], "s": 1' + b"0" * 30 + b"}]",
    b'[{"x": [[1, 2], [3, 4]], "s": 1' + b"0" * 400 + b"}]",
    b'[{"x": [[1, 2], [3, 4]], "s": true}]', b'[{"x": [[1, 2], [3, 4]], "s": null}]',
    b'[{"x": [[1, 2], [3, 4]], "s": "5"}]', b'[{"x": [[1, 2], [3]], "s": 5}]',
    b'[{"x": [[1, 2], [3, [4]]], "s": 5}]', b'[{"x": [[1, 2], [3, 4]], "t": 5}]',
    b'[{"x": [[1, 2], [3, 4]], "s": {"a": 1}}]', b'[{"x": [[1, 2], [3, 4]]}]',
    b'{"x": [[1, 2], [3, 4]], "s": 5}', b"[]", b"[1, 2]", b'[{"x": [[1, 2], [3, 4]], "s": 5}',
    b'[{"x": [[1, 2], [3, 4]], "s": 5}]' + b" " * 3,
    b"[" + b",".join([b'{"x": [[1, 2], [3, 4]], "s": 5}'] * 51) + b"]",
    b'[{"x": [[1, 2], [3, 4]], "\\u0073": 5}]',
])
def test_the_fast_batch_reader_stacks_and_refuses_as_the_strict_one(body):
    assert _batch(body, BATCH) == _batch_strict(body, BATCH)


def test_fuzzed_batches_read_alike():
    rng = random.Random(30)
    cases = [json.dumps({"x": [[rng.randint(-3, 3), rng.random()], [0, 1]], "s": 1}).encode()
             for _ in range(5)]
    outcomes = {"stacked": 0, "refused": 0}
    for body in _mutations(seed=31, count=1500, seeds=cases):
        joined = b"[" + b",".join(cases[:2] + [body]) + b"]"
        fast, strict = _batch(joined, BATCH), _batch_strict(joined, BATCH)
        assert fast == strict, joined
        outcomes[fast[0]] += 1
    print(f"fuzzed batches: {outcomes}")
    assert outcomes["refused"] > 100 and outcomes["stacked"] > 50

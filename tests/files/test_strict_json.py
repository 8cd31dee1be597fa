"""Strict, bounded JSON: every refusal is an ArtifactError naming the file."""

from __future__ import annotations

import json

import pytest

from tensorcode import files
from tensorcode.errors import ArtifactError


def _read(tmp_path, text, **limits):
    path = tmp_path / "doc.json"
    path.write_text(text)
    kwargs = {"limits": files.JsonLimits(**limits)} if limits else {}
    return path, lambda: files.read_json(path, **kwargs)


@pytest.mark.parametrize("text, words", [
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ('{"outer": {"k": 1, "k": 1}}', "duplicate key 'k'"),
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('[Infinity]', "Infinity is not a JSON number"),
    ('[-Infinity]', "-Infinity is not a JSON number"),
    ('{"a": ', "not valid JSON"),
    ('[' + '9' * 5000 + ']', "outside"),
    ('[18446744073709551616]', "outside"),
    ('[-9223372036854775809]', "outside"),
])
def test_what_is_refused(tmp_path, text, words):
    path, read = _read(tmp_path, text)
    with pytest.raises(ArtifactError, match=words) as caught:
        read()
    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)


def test_the_integer_range_is_inclusive_and_configurable(tmp_path):
    _, read = _read(tmp_path, "[18446744073709551615, -9223372036854775808]")
    assert read() == [2 ** 64 - 1, -(2 ** 63)]
    _, read = _read(tmp_path, "[11]", max_integer=10)
    with pytest.raises(ArtifactError, match="outside"):
        read()


def test_depth_is_limited_before_parsing(tmp_path):
    _, read = _read(tmp_path, "[" * 200_000 + "]" * 200_000)
    with pytest.raises(ArtifactError, match="deeper than 64 levels"):
        read()
    _, read = _read(tmp_path, "[[[1]]]", max_depth=2)
    with pytest.raises(ArtifactError, match="deeper than 2 levels"):
        read()
    # brackets inside strings are text, not structure
    _, read = _read(tmp_path, json.dumps({"s": "[[[[[[\"[[[["}), max_depth=1)
    assert read() == {"s": "[[[[[[\"[[[["}


def test_size_is_checked_before_reading(tmp_path):
    _, read = _read(tmp_path, "[" + "0," * 100 + "0]", max_bytes=50)
    with pytest.raises(ArtifactError, match="more than the 50 allowed"):
        read()
    with pytest.raises(ValueError, match="more than the 10 allowed"):
        files.decode(b"[1,2,3,4,5,6,7]", files.JsonLimits(max_bytes=10))


def test_decode_raises_value_errors_with_positions():
    with pytest.raises(json.JSONDecodeError) as caught:
        files.decode('{"a": 1,,}')
    assert caught.value.lineno == 1
    with pytest.raises(ValueError, match="duplicate"):
        files.decode('{"a": 1, "a": 1}')
    assert files.decode(b'{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}


def test_dumps_is_strict_and_round_trips():
    document = {"a": [1, 0.1, 1e-300], "b": "é"}
    assert files.decode(files.dumps(document)) == document
    with pytest.raises(ValueError):
        files.dumps({"a": float("inf")})

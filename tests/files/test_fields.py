"""The validating reader names the file and the field path in every complaint."""

from __future__ import annotations

import re

import pytest

from tensorcode import files
from tensorcode.errors import ArtifactError


def test_paths_are_built_like_the_document():
    assert files.at("a", "b", 3, "c") == "a.b[3].c"
    assert files.at("", "top") == "top"
    assert files.at("nodes", 0, 1) == "nodes[0][1]"


def test_messages_say_file_field_expected_and_found():
    read = files.Fields("model/plan.json")
    with pytest.raises(ArtifactError) as caught:
        read.integer("7", files.at("a", "b", 3, "c"))
    error = caught.value
    assert error.path == "model/plan.json" and error.field == "a.b[3].c"
    assert str(error) == ("model/plan.json: field 'a.b[3].c': expected an integer, "
                          "found the text '7'")


@pytest.mark.parametrize("check, words", [
    (lambda r: r.object([], "x"), "expected an object, found a list"),
    (lambda r: r.list({}, "x"), "expected a list, found an object"),
    (lambda r: r.list([1, 2, 3], "x", max_length=2), "at most 2"),
    (lambda r: r.integer(True, "x"), "expected an integer, found true/false"),
    (lambda r: r.integer(5, "x", 0, 3), "expected an integer in 0..3, found 5"),
    (lambda r: r.integer(-1, "x", 0), "in 0..inf"),
    (lambda r: r.number("1", "x"), "expected a number"),
    (lambda r: r.number(float("inf"), "x"), "expected a finite number"),
    (lambda r: r.string(3, "x"), "expected text, found the number 3"),
    (lambda r: r.string("Ab", "x", re.compile("^[a-z]+$"), what="lowercase"),
     "expected lowercase"),
    (lambda r: r.sha256("abc", "x"), "64 lowercase hex digits"),
    (lambda r: r.choice("c", "x", ["a", "b"]), "expected one of ['a', 'b']"),
    (lambda r: r.integers([0, -1], "x"), "in 0..inf, found -1"),
    (lambda r: r.get({}, "k", "x.k"), "is missing"),
    (lambda r: r.keys({"a": 1}, "x", {"a", "b"}), "missing fields ['b']"),
    (lambda r: r.keys({"a": 1, "z": 2}, "x", {"a"}), "unexpected fields ['z']"),
])
def test_each_check(check, words):
    read = files.Fields("f.json")
    with pytest.raises(ArtifactError, match=re.escape(words)) as caught:
        check(read)
    assert caught.value.path == "f.json"
    assert caught.value.field is not None and caught.value.field.startswith("x")


def test_checks_return_what_they_accept():
    read = files.Fields("f.json")
    assert read.integer(3, "x", 0, 3) == 3
    assert read.number(2, "x") == 2.0 and isinstance(read.number(2, "x"), float)
    assert read.integers([0, 4], "x") == [0, 4]
    assert read.keys({"a": 1, "o": 2}, "x", {"a"}, {"o"}) == {"a": 1, "o": 2}
    assert read.keys({"a": 1, "z": 2}, "x", {"a"}, exact=False) == {"a": 1, "z": 2}
    assert files.describe(None) == "null" and files.describe({}) == "an object"

"""The linear scanner reads exactly the grammar's language: the same records as lark's
tree for every reply lark accepts, the same error (message, line, column) for every
reply it refuses, and a valid reply never reaches lark."""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_edits import _base, _mutate, _random_statement, _valid_statement

from tensorcode.weights import edits
from tensorcode.weights.edits import EditError, ListValue, Number, apply_edits, parse_edits

BOUNDS = (edits.MAX_STATEMENTS, edits.MAX_DEPTH, edits.MAX_NUMBERS)


def plain(value):
    if isinstance(value, Number):
        return ("number", value.text, value.value, value.line, value.column)
    if isinstance(value, ListValue):
        return ("list", value.line, value.column, tuple(plain(v) for v in value.items))
    return value


def records(statements):
    return [(s.name, s.index, s.op, plain(s.value), s.line, s.column, s.name_column,
             s.op_column) for s in statements]


def outcome(parse, text):
    try:
        return "ok", records(parse(text))
    except EditError as error:
        return "error", (error.message, error.line, error.column)


def by_lark(text):
    return edits._parse_tree(text, BOUNDS, text.split("\n"), 0)


EXTRA = [
    "w = [[1, 2, 3, 4],\n     [5, 6, 7, 8],  # a comment inside\n     [9, 10, 11, 12,],\n]\n",
    "# reply\r\n```python\r\n\r\n\tb[0] = 1  # set\r\n   \r\n```\r\nb[1]\t=\t2",
    'b = [1, 2,\n 3, 4]\n"odd name!"[0] = 1e3\nb[ -1 : ] += [ .5 ]\nb = []\nb = [ ]\n',
    "b = [1,, 2]", "b = [,]", "b = [1 2]", "b = [1e999]", "b = [1, 2\n", "b[0] = 1e999",
    "b[" + "9" * 40 + "] = 1", '"\\q"[0] = 1', "b = [1, [2, 3], 4]", "b = [1] 2",
    "w[0] = 1\n" * 3 + "w[0] = [1,\n2,\n3 4]\n", "b = [+1, -2., .3e-1, 4E+2]",
]


def test_E_the_scanner_and_the_grammar_agree_on_fuzzed_replies():
    rng = random.Random(5)
    base = _base()
    texts = list(EXTRA)
    for case in range(600):
        lines = [_valid_statement(rng, base) if rng.random() < 0.7 else _random_statement(rng)
                 for _ in range(rng.randint(1, 4))]
        text = "\n".join(lines)
        texts.append(_mutate(rng, text) if case % 2 else text)
    kinds = {"ok": 0, "error": 0}
    for text in texts:
        scanned, grammar = outcome(parse_edits, text), outcome(by_lark, text)
        assert scanned == grammar, text
        kinds[scanned[0]] += 1
    assert kinds["ok"] > 120 and kinds["error"] > 120, kinds


def test_E_a_valid_reply_never_reaches_the_grammar(monkeypatch):
    def refuse(*args):
        raise AssertionError("lark was asked to parse a valid reply")

    monkeypatch.setattr(edits, "_parser", refuse)
    text = "".join(f"w[{i % 3}, {i % 4}] = {i}.5  # note\n" for i in range(2000))
    text += "b = [" + ", ".join(str(i) for i in range(4)) + "]\n```\n"
    assert len(parse_edits(text)) == 2001
    numbers = "w = [" + ",".join("1" for _ in range(12)) + "]"
    assert len(parse_edits(numbers)[0].value.items) == 12


def test_E_replies_near_the_limits_are_read_and_applied():
    """A fraction of the documented limits (the full sizes are timed by
    ``python -m benchmarks --only weights``)."""
    count = 20_000
    text = "\n".join(f"b[{i % 4}] += {i % 10}" for i in range(count))
    statements = parse_edits(text)
    assert len(statements) == count and statements[-1].line == count
    size = 400_000
    values = np.random.default_rng(0).integers(-9, 10, size)
    text = "v = [" + ", ".join(map(str, values.tolist())) + ",]"
    edited = apply_edits({"v": np.zeros(size, np.float32)}, text)
    assert np.array_equal(edited["v"], values.astype(np.float32))
    few = values[:10_000]
    ints = apply_edits({"v": np.zeros(few.size, np.int64)},
                       "v = [" + ", ".join(map(str, few.tolist())) + "]")
    assert np.array_equal(ints["v"], few)


def test_E_the_bounds_are_checked_before_numbers_are_converted(monkeypatch):
    from tensorcode.weights import edit_scan

    monkeypatch.setattr(edit_scan, "_floats",
                        lambda pieces: pytest.fail("numbers converted past the bound"))
    with pytest.raises(EditError, match="more than 5 numbers") as caught:
        parse_edits("b = [1, 2, 3, 4, 5, 6, 7]", max_numbers=5)
    assert (caught.value.line, caught.value.column) == (1, 21)  # the sixth number
    with pytest.raises(EditError, match="more than 3 statements") as caught:
        parse_edits("b[0] = 1\n" * 4, max_statements=3)
    assert (caught.value.line, caught.value.column) == (4, 6)


def test_E_an_error_after_many_statements_points_at_its_line():
    text = "b[0] = 1\n" * 5000 + "b[0] = [1, 2,, 3]\n"
    with pytest.raises(EditError, match="unexpected ','") as caught:
        parse_edits(text)
    assert (caught.value.line, caught.value.column) == (5001, 14)
    assert "b[0] = [1, 2,, 3]" in str(caught.value)

"""Edit statements: every grammar rule, every error (with line and column), the bounds,
and fuzzed text that must end in a PatchError or a valid patch, never anything else."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tensorcode.errors import PatchError
from tensorcode.weights import EditError, Patch, apply_edits, parse_edits, tensor_sha256
from tensorcode.weights.edits import ListValue, Number, Point, Range, grammar_text


def _base() -> dict[str, np.ndarray]:
    return {
        "w": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b": np.zeros(4, dtype=np.float64),
        "s": np.array(2.0, dtype=np.float32),
        "t": np.zeros((2, 2, 3), dtype=np.float32),
        "i": np.array([1, 2, 3], dtype=np.int64),
        "u": np.array([250, 3], dtype=np.uint8),
        "m": np.array([True, False]),
        "h": np.zeros(2, dtype=np.float16),
        "0.weights": np.zeros((2, 2), dtype=np.float32),
        "odd name!": np.zeros(2, dtype=np.float32),
    }


def _edit(text: str, scales=None) -> dict[str, np.ndarray]:
    return apply_edits(_base(), text, scales)


# -- the grammar, rule by rule ------------------------------------------------------------

def test_grammar_file_is_the_reference():
    text = grammar_text()
    for rule in ("statement:", "target:", "index:", "part:", "value:", "ASSIGN:", "NAME:",
                 "NUMBER:", "FENCE:", "COMMENT:"):
        assert rule in text


def test_parse_records_positions_and_structure():
    statements = parse_edits("w[6, -1:] = 80\n\n  b[:3] += [1, [2]]\n")
    first, second = statements
    assert (first.name, first.op, first.line, first.column) == ("w", "=", 1, 1)
    assert first.index == (Point(6, 1, 3), Range(-1, None, 1, 6))
    assert isinstance(first.value, Number) and first.value.value == 80.0
    assert (second.line, second.column, second.op) == (3, 3, "+=")
    assert second.index == (Range(None, 3, 3, 5),)
    assert isinstance(second.value, ListValue) and isinstance(second.value.items[1], ListValue)


def test_assign_add_and_subtract():
    edited = _edit("w[0, 0] = 7\nw[0, 1] += 10\nw[0, 2] -= 0.5\n")
    assert edited["w"][0].tolist() == [7.0, 11.0, 1.5, 3.0]


def test_statements_run_in_order_and_see_each_other():
    edited = _edit("b[1] = 3\nb[1] += 4\nb[:] -= 1\n")
    assert edited["b"].tolist() == [-1.0, 6.0, -1.0, -1.0]


def test_index_forms_points_ranges_negatives_and_partial_rank():
    edited = _edit("w[-1, -1] = 100\nw[1] = 5\nw[:, 1:3] += 1000\nw[2:, :1] = -1\n"
                   "t[1, :, 2:] = 9\nt[0, 1,] = [1, 2, 3]\n")
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    w[-1, -1] = 100
    w[1] = 5
    w[:, 1:3] += 1000
    w[2:, :1] = -1
    assert np.array_equal(edited["w"], w)
    t = np.zeros((2, 2, 3), dtype=np.float32)
    t[1, :, 2:] = 9
    t[0, 1] = [1, 2, 3]
    assert np.array_equal(edited["t"], t)


def test_no_index_means_the_whole_tensor_and_scalars():
    edited = _edit("s = 4.5\nb = [1, 2, 3, 4]\nw += 1\n")
    assert edited["s"].shape == () and float(edited["s"]) == 4.5
    assert edited["b"].tolist() == [1, 2, 3, 4]
    assert np.array_equal(edited["w"], np.arange(12, dtype=np.float32).reshape(3, 4) + 1)


@pytest.mark.parametrize("written, value", [
    ("5", 5.0), ("-5", -5.0), ("+5", 5.0), ("2.5", 2.5), (".5", 0.5), ("5.", 5.0),
    ("1e2", 100.0), ("-1.5E-1", -0.15), ("007", 7.0),
])
def test_number_forms(written, value):
    assert _edit(f"b[0] = {written}\n")["b"][0] == value


def test_lists_nested_trailing_commas_and_spanning_lines():
    edited = _edit("w = [[1, 2, 3, 4],\n     [5, 6, 7, 8],  # a comment inside\n"
                   "     [9, 10, 11, 12,],\n]\n")
    assert np.array_equal(edited["w"], np.arange(1, 13, dtype=np.float32).reshape(3, 4))


def test_names_bare_dotted_digit_first_and_quoted():
    edited = _edit('0.weights[1, 1] = 3\n"odd name!"[0] = 2\n"w"[0, 0] = -1\n')
    assert edited["0.weights"][1, 1] == 3 and edited["odd name!"][0] == 2
    assert edited["w"][0, 0] == -1


def test_comments_blank_lines_fences_crlf_and_tabs():
    text = ("# the reply\r\n```python\r\n\r\n\tb[0] = 1  # set\r\n   \r\n```\r\nb[1]\t=\t2")
    edited = _edit(text)
    assert edited["b"].tolist() == [1.0, 2.0, 0.0, 0.0]


def test_empty_reply_changes_nothing():
    assert parse_edits("") == [] and parse_edits("# nothing\n\n") == []
    base = _base()
    assert Patch.from_edits(base, "# no edits\n").changes == {}


def test_values_in_rendered_units():
    edited = _edit("w[0, 0] = 80\nb[3] += -5\n", scales={"w": 0.01, "b": 1e-3, "s": 1.0})
    assert edited["w"][0, 0] == np.float32(0.8)
    assert edited["b"][3] == -0.005


def test_integer_and_bool_tensors_are_exact():
    base = {"i": np.array([2**62, 0], dtype=np.int64), "m": np.array([True, False])}
    edited = apply_edits(base, "i[0] += 7\ni[1] = -9223372036854775808\nm = [0, 1]\n")
    assert edited["i"].tolist() == [2**62 + 7, -2**63]
    assert edited["m"].tolist() == [False, True]


def test_base_is_never_modified_and_untouched_tensors_are_shared():
    base = _base()
    before = {name: tensor_sha256(array) for name, array in base.items()}
    edited = apply_edits(base, "w[0, 0] = 99\n")
    assert {name: tensor_sha256(array) for name, array in base.items()} == before
    assert edited["b"] is base["b"] and edited["w"] is not base["w"]


# -- errors, each with its position -------------------------------------------------------

@pytest.mark.parametrize("text, line, column, words", [
    ("q[0] = 1", 1, 1, "unknown tensor 'q'"),
    ("b[0] = 1\n  zz[1] = 2", 2, 3, "unknown tensor 'zz'"),
    ("w[3, 0] = 1", 1, 3, "index 3 is out of range for axis 0"),
    ("w[0, -5] = 1", 1, 6, "index -5 is out of range for axis 1"),
    ("w[0:9] = 1", 1, 3, "range bound 9 is out of range"),
    ("w[-4:] = 1", 1, 3, "range bound -4 is out of range"),
    ("w[2:1] = 1", 1, 3, "selects nothing"),
    ("w[1:1] = 1", 1, 3, "selects nothing"),
    ("w[0, 0, 0] = 1", 1, 9, "rank 2"),
    ("s[0] = 1", 1, 3, "rank 0"),
    ("w[0] = [1, 2]", 1, 8, "the list has shape [2] but w[0] selects shape [4]"),
    ("w = [1, 2, 3, 4]", 1, 5, "selects shape [3, 4]"),
    ("b = []", 1, 5, "the list has shape [0]"),
    ("w[0:2, 0] = [[1], [2, 3]]", 1, 19, "ragged list"),
    ("b = [1, [2], 3, 4]", 1, 9, "ragged list"),
    ("i[0] = 1.5", 1, 8, "not an exact integer"),
    ("u[0] += 10", 1, 9, "outside the range of uint8"),
    ("m[0] = 2", 1, 8, "outside the range of bool"),
    ("h[0] = 70000", 1, 8, "non-finite"),
    ("b[0] = 1e400", 1, 8, "too large to represent"),
    ("w[99999999999999999999999999999999999] = 1", 1, 3, "more than 30 digits"),
    ('"bad\\q"[0] = 1', 1, 1, "not a valid JSON string"),
])
def test_semantic_errors_name_the_problem_and_its_place(text, line, column, words):
    with pytest.raises(EditError) as caught:
        _edit(text)
    error = caught.value
    assert isinstance(error, PatchError)
    assert (error.line, error.column) == (line, column), str(error)
    assert words in str(error)
    assert f"line {line}, column {column}" in str(error)
    assert "^" in error.excerpt


@pytest.mark.parametrize("text, line, column, words", [
    ("w[0] ** 2", 1, 6, "unexpected character '*'"),
    ("w[0 = 1", 1, 5, "unexpected '='"),
    ("w[0] = 1 2", 1, 10, "unexpected '2'"),
    ("w[0] =", 1, 7, "unexpected end of the line"),
    ("w[0] = [1,", 1, 11, "unexpected end of the reply"),
    ("w[] = 1", 1, 3, "unexpected ']'"),
    ("w[0:1:2] = 1", 1, 6, "unexpected ':'"),
    ("w[0.5] = 1", 1, 4, "unexpected '.5'"),
    ("w[0] = nan", 1, 8, "unexpected 'nan'"),
    ("w[0] = inf", 1, 8, "unexpected 'inf'"),
    ("w[0] = __import__('os')", 1, 8, "unexpected '__import__'"),
    ("w[0]\n= 1", 1, 5, "unexpected end of the line"),
    ("w[0] = (1, 2)", 1, 8, "unexpected character '('"),
    ("[1] = 2", 1, 1, "unexpected '['"),
    ("w[0\nb[0] = 1", 1, 4, "unexpected end of the line"),
])
def test_syntax_errors_give_line_column_and_what_was_expected(text, line, column, words):
    with pytest.raises(EditError) as caught:
        parse_edits(text)
    error = caught.value
    assert (error.line, error.column) == (line, column), str(error)
    assert words in str(error) and "expected" in str(error)


def test_scales_must_cover_edited_tensors_and_be_positive():
    with pytest.raises(EditError, match="scales were given but none for tensor 'b'"):
        _edit("b[0] = 1", scales={"w": 0.1})
    with pytest.raises(PatchError, match="positive finite"):
        _edit("b[0] = 1", scales={"b": -1.0})
    with pytest.raises(PatchError, match="not a number"):
        _edit("b[0] = 1", scales={"b": "x"})


def test_bounds_on_statements_depth_numbers_and_length():
    with pytest.raises(EditError, match="more than 3 statements"):
        parse_edits("b[0] = 1\n" * 4, max_statements=3)
    with pytest.raises(EditError, match="nest deeper than 16") as caught:
        parse_edits("b = " + "[" * 40 + "1" + "]" * 40)
    assert caught.value.column == 5 + 16
    with pytest.raises(EditError, match="more than 5 numbers"):
        parse_edits("b = [1, 2, 3, 4, 5, 6]", max_numbers=5)
    with pytest.raises(EditError, match="characters"):
        parse_edits("b[0] = 1\n" * 10, max_text_chars=50)
    with pytest.raises(PatchError, match="must be text"):
        parse_edits(b"b[0] = 1")


def test_a_failed_edit_changes_nothing():
    base = _base()
    before = {name: tensor_sha256(array) for name, array in base.items()}
    with pytest.raises(EditError):
        Patch.from_edits(base, "w[0, 0] = 5\nw[0, 0] += [1, 2]\n")
    assert {name: tensor_sha256(array) for name, array in base.items()} == before


# -- fuzzing ------------------------------------------------------------------------------

_NAMES = ["w", "b", "s", "t", "i", "u", "m", "h", "0.weights", '"odd name!"', "q", '"w"']
_PIECES = ["[", "]", ",", ":", "=", "+=", "-=", "-", "+", ".", "e", "#", "\n", " ", '"',
           "\\", "```", "0", "1", "-1", "99", "1e308", "1e-320", "[[", "]]", "\t", "\r",
           "\u00e9", "\x00", "nan", "9" * 40]


def _random_number(rng: random.Random) -> str:
    return rng.choice(["0", "1", "-3", "2.5", ".5", "1e3", "-7e-2", "255", "70000", "1e39",
                       "+4", str(rng.randint(-300, 300))])


def _random_value(rng: random.Random, depth: int = 0) -> str:
    if depth > 3 or rng.random() < 0.5:
        return _random_number(rng)
    items = [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return "[" + ", ".join(items) + ("," if rng.random() < 0.2 else "") + "]"


def _random_part(rng: random.Random) -> str:
    choice = rng.random()
    if choice < 0.5:
        return str(rng.randint(-4, 4))
    start = str(rng.randint(-4, 4)) if rng.random() < 0.6 else ""
    stop = str(rng.randint(-4, 4)) if rng.random() < 0.6 else ""
    return f"{start}:{stop}"


def _random_statement(rng: random.Random) -> str:
    name = rng.choice(_NAMES)
    index = ""
    if rng.random() < 0.8:
        index = "[" + ", ".join(_random_part(rng) for _ in range(rng.randint(1, 4))) + "]"
    return f"{name}{index} {rng.choice(['=', '+=', '-='])} {_random_value(rng)}"


def _valid_statement(rng: random.Random, base: dict[str, np.ndarray]) -> str:
    """A statement that fits its tensor, so mutations start from something meaningful."""
    name = rng.choice([n for n, a in base.items() if a.size])
    shape = base[name].shape
    parts, selected = [], []
    for size in shape[:rng.randint(0, len(shape))]:
        if rng.random() < 0.5:
            parts.append(str(rng.randint(-size, size - 1)))
        else:
            start = rng.randint(0, size - 1)
            stop = rng.randint(start + 1, size)
            parts.append(f"{start}:{stop}")
            selected.append(stop - start)
    selected.extend(shape[len(parts):])
    small = ["0", "1", "-1", "2", "3"]

    def value(dims):
        if not dims:
            return rng.choice(small)
        return "[" + ", ".join(value(dims[1:]) for _ in range(dims[0])) + "]"

    written = value(selected) if rng.random() < 0.6 else rng.choice(small)
    shown = name if name.replace(".", "").replace("_", "").isalnum() else f'"{name}"'
    index = "[" + ", ".join(parts) + "]" if parts else ""
    return f"{shown}{index} {rng.choice(['=', '+=', '-='])} {written}"


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        action = rng.random()
        position = rng.randint(0, len(chars))
        if action < 0.4 and chars:
            del chars[min(position, len(chars) - 1)]
        elif action < 0.8:
            chars.insert(position, rng.choice(_PIECES))
        elif chars:
            chars[min(position, len(chars) - 1)] = rng.choice(_PIECES)
    return "".join(chars)


def _must_end_well(base, text, scales):
    try:
        patch = Patch.from_edits(base, text, scales=scales)
    except PatchError:
        return "error"
    # A valid patch applies to its base and reproduces exactly what the edits made.
    applied = patch.apply(base)
    for name, change in patch.changes.items():
        assert tensor_sha256(applied[name]) == change.edited_sha256
    return "patch"


def test_fuzzed_statements_end_in_patch_error_or_valid_patch():
    rng = random.Random(20240601)
    base = _base()
    scales = {name: rng.choice([1.0, 0.01, 1e-3]) for name in base}
    outcomes = {"error": 0, "patch": 0}
    for case in range(2500):
        lines = [_valid_statement(rng, base) if rng.random() < 0.7 else _random_statement(rng)
                 for _ in range(rng.randint(1, 4))]
        text = "\n".join(lines)
        if case % 2:
            text = _mutate(rng, text)
        outcomes[_must_end_well(base, text, scales if case % 3 else None)] += 1
    assert outcomes["error"] > 100 and outcomes["patch"] > 100, outcomes


def test_fuzzed_random_bytes_end_in_patch_error_or_valid_patch():
    rng = random.Random(7)
    base = _base()
    alphabet = "wbsti0123456789[](),:=+-.e# \n\t\"'\\`_abc\u00e9"
    for _ in range(1500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        _must_end_well(base, text, None)


def test_fuzzed_mutations_of_a_rendering_end_well():
    from tensorcode.weights import render

    rng = random.Random(11)
    base = _base()
    shown = render(base, digits=2)
    lines = [line for line in shown.text.splitlines() if line and not line.startswith("#")]
    for _ in range(600):
        picked = rng.sample(lines, rng.randint(1, 3))
        text = _mutate(rng, "\n".join(picked))
        _must_end_well(shown.rounded, text, shown.scales)


@pytest.mark.parametrize("tensor, scale, text", [
    ("i", 1e300, "i[0] = 1e10"), ("i", 1e300, "i[0] += 1e10"), ("m", 1e300, "m[0] = 1e10"),
    ("u", 1e308, "u[1] -= 10"), ("i", 1e300, "i = [1e10, 1, 1]"),
])
def test_a_huge_finite_scale_on_an_integer_tensor_is_a_patch_error(tensor, scale, text):
    with pytest.raises(EditError, match="overflows") as error:
        _edit(text, scales={tensor: scale})
    assert error.value.line == 1

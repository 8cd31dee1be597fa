"""Edit statements: parse a reply such as ``w[6, 122] = 80`` and apply it to tensors.

The reply comes from a reader of rendered weights (often a language model), so it is
untrusted text. It is parsed with the fixed grammar in ``tensorcode/grammars/edits.lark``
(LALR, contextual lexer, positions kept) and the tree is read as data: no statement is
ever evaluated. Every complaint is an ``EditError`` (a ``PatchError``) carrying the line
and column it points at and the offending line with a caret, so the reply can be fixed
and sent again. Sizes are bounded before any work is done: the text length, the number
of statements, the nesting of lists and the count of numbers written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import PatchError, SourceLocated
from .edit_scan import Bounds, OutOfBounds, Unreadable, scan
from .edits_records import ListValue, Number, NumberList, Point, Range, Statement
from .tensors import to_numpy

#: Bounds on one reply; each has a keyword of the same name (lower case) on parse_edits.
MAX_TEXT_CHARS = 16_000_000
MAX_STATEMENTS = 100_000
MAX_DEPTH = 16
MAX_NUMBERS = 4_000_000


class EditError(SourceLocated, PatchError):
    """An edit statement that cannot be parsed or applied.

    ``line`` and ``column`` are 1-based and point at the offending part of the
    statement; ``excerpt`` is that source line with a caret under the column.
    """


# -- parsing ------------------------------------------------------------------------------

class _Limits:
    """Counts brackets, statements and numbers while the lexer runs, and treats newlines
    inside a value's brackets as whitespace so a long list may span lines."""

    always_accept = ("_NEWLINE",)

    def __init__(self, max_statements: int, max_depth: int, max_numbers: int) -> None:
        self.max_statements = max_statements
        self.max_depth = max_depth
        self.max_numbers = max_numbers

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        in_value = False
        statements = 0
        numbers = 0
        for token in stream:
            kind = token.type
            if kind == "_NEWLINE":
                if in_value and depth > 0:
                    continue  # a list value may span lines; an index may not
                depth = 0
                in_value = False
            elif kind == "LSQB":
                depth += 1
                if depth > self.max_depth:
                    raise _Bound(f"brackets nest deeper than {self.max_depth} levels", token)
            elif kind == "RSQB":
                depth = max(depth - 1, 0)
            elif kind == "ASSIGN":
                in_value = True
                depth = 0
                statements += 1
                if statements > self.max_statements:
                    raise _Bound(f"more than {self.max_statements} statements in one reply; "
                                 "split the edits into several patches", token)
            elif kind == "NUMBER":
                numbers += 1
                if numbers > self.max_numbers:
                    raise _Bound(f"more than {self.max_numbers} numbers in one reply; use "
                                 "diff() on edited tensors for edits this large", token)
            yield token


class _Bound(Exception):
    def __init__(self, message: str, token: Token) -> None:
        super().__init__(message)
        self.message = message
        self.token = token


@lru_cache(maxsize=1)
def grammar_text() -> str:
    """The edit-statement grammar (the language reference)."""
    return (resources.files("tensorcode") / "grammars" / "edits.lark").read_text("utf-8")


@lru_cache(maxsize=8)
def _parser(max_statements: int, max_depth: int, max_numbers: int) -> Lark:
    return Lark(grammar_text(), parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=False,
                postlex=_Limits(max_statements, max_depth, max_numbers))


_EXPECTED_NAMES = {
    "NAME": "a tensor name", "STRING": "a quoted tensor name", "ASSIGN": "'=', '+=' or '-='",
    "NUMBER": "a number", "INT": "an integer", "LSQB": "'['", "RSQB": "']'",
    "COMMA": "','", "COLON": "':'", "_NEWLINE": "the end of the line", "$END": "the end",
    "FENCE": "a code fence",
}


def _excerpt(lines: Sequence[str], line: int | None, column: int | None) -> str | None:
    if line is None or not 1 <= line <= len(lines):
        return None
    text = lines[line - 1].rstrip("\r")
    if len(text) > 160:
        start = max(0, (column or 1) - 80)
        text = text[start:start + 160]
        column = (column or 1) - start
    caret = " " * max((column or 1) - 1, 0) + "^"
    return f"  {text}\n  {caret}"


def _error(lines: Sequence[str], message: str, line: int | None, column: int | None
           ) -> EditError:
    return EditError(message, line, column, _excerpt(lines, line, column))


def _describe_expected(expected: Iterable[str]) -> str:
    names = sorted({_EXPECTED_NAMES.get(name, repr(name)) for name in expected})
    return ", ".join(names) if names else "nothing more"


def _end_position(lines: Sequence[str]) -> tuple[int, int]:
    """Just after the last character of the last non-blank line."""
    for number in range(len(lines), 0, -1):
        text = lines[number - 1].rstrip()
        if text:
            return number, len(text) + 1
    return 1, 1


def _syntax_error(lines: Sequence[str], error: UnexpectedInput) -> EditError:
    line = getattr(error, "line", None)
    column = getattr(error, "column", None)
    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type == "$END":
            found = "end of the reply"
            line, column = _end_position(lines)
        elif token.type == "_NEWLINE":
            found = "end of the line"
        else:
            found = repr(str(token))
        expected = _describe_expected(error.accepts or error.expected)
        message = f"unexpected {found}; expected {expected}"
    elif isinstance(error, UnexpectedCharacters):
        char = error.char
        expected = _describe_expected(error.allowed or ())
        message = f"unexpected character {char!r}; expected {expected}"
    elif isinstance(error, UnexpectedEOF):
        message = f"the reply ends early; expected {_describe_expected(error.expected)}"
        line, column = _end_position(lines)
    else:  # pragma: no cover - lark's three kinds are covered above
        message = f"cannot parse the edit statements: {error}"
    if line is not None and line < 1:
        line, column = None, None
    return _error(lines, message + ". Statements look like w[0, 3] = 1.5, b[2] += -4 or "
                  "w[1, 0:3] = [1, 2, 3], one per line", line, column)


def parse_edits(text: str, *, max_text_chars: int = MAX_TEXT_CHARS,
                max_statements: int = MAX_STATEMENTS, max_depth: int = MAX_DEPTH,
                max_numbers: int = MAX_NUMBERS) -> list[Statement]:
    """Parse edit statements into ``Statement`` records (data only, nothing run)."""
    if not isinstance(text, str):
        raise PatchError(f"edit statements must be text (str), got {type(text).__name__}")
    if len(text) > max_text_chars:
        raise EditError(f"the edit text has {len(text)} characters, more than the bound "
                        f"{max_text_chars}; split it into several patches")
    bounds = (max_statements, max_depth, max_numbers)
    try:  # linear: replies at the bounds are read in seconds
        return scan(text, Bounds(*bounds))
    except OutOfBounds as bound:
        raise _error(text.split("\n"), bound.message, bound.line, bound.column) from None
    except Unreadable as stop:
        unreadable = stop
    # The reply is wrong at ``unreadable.offset``: lark parses the statement it is in, from
    # the start of its line to the end of the offending line, for the grammar's message.
    lines = text.split("\n")
    end = text.find("\n", unreadable.offset)
    piece = text[unreadable.line_offset:len(text) if end < 0 else end]
    if len(piece) <= _DIAGNOSE_CHARS:
        shift = unreadable.line - 1
        try:
            _parse_tree(piece, bounds, lines, shift)
        except EditError:
            raise
        # lark took the piece: its records say what is wrong (a quoted name, a long index)
    else:
        raise _error(lines, f"unexpected {text[unreadable.offset:unreadable.offset + 12]!r}; "
                     f"expected {unreadable.expected}" + _STATEMENT_HINT,
                     *_position(text, unreadable.offset)) from None
    return _parse_tree(text, bounds, lines, 0)


#: an unreadable statement longer than this is described by the scanner, not lark
_DIAGNOSE_CHARS = 1 << 16

_STATEMENT_HINT = (". Statements look like w[0, 3] = 1.5, b[2] += -4 or "
                   "w[1, 0:3] = [1, 2, 3], one per line")


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _parse_tree(text: str, bounds: tuple[int, int, int], lines: Sequence[str], shift: int
                ) -> list[Statement]:
    """Statements of ``text`` through lark's tree; ``text`` starts on line ``shift + 1``
    of the reply whose ``lines`` are given (errors point into the whole reply)."""
    own = text.split("\n")
    try:
        try:
            tree = _parser(*bounds).parse(text + "\n")
        except _Bound as bound:
            raise _error(own, bound.message, bound.token.line, bound.token.column) from None
        except UnexpectedInput as error:
            raise _syntax_error(own, error) from None
        return [_statement(own, child) for child in tree.children
                if isinstance(child, Tree) and child.data == "statement"]
    except EditError as error:
        if not shift:
            raise
        line = None if error.line is None else error.line + shift
        raise _error(lines, error.message, line, error.column) from None


def _tree(node: Tree | Token) -> Tree:
    """A parse-tree branch the grammar guarantees to be a subtree."""
    if not isinstance(node, Tree):  # pragma: no cover - the grammar rules this out
        raise TypeError(f"edit grammar: expected a subtree, got token {node!r}")
    return node


def _token(node: Tree | Token) -> Token:
    """A parse-tree branch the grammar guarantees to be a token."""
    if not isinstance(node, Token):  # pragma: no cover - the grammar rules this out
        raise TypeError(f"edit grammar: expected a token, got subtree {node.data!r}")
    return node


def _column(token: Token) -> int:
    """A token's 1-based column; the lexer records positions on every token it makes."""
    if token.column is None:  # pragma: no cover - lark always sets it here
        raise TypeError(f"edit grammar: token {token!r} has no position")
    return token.column


def _line(token: Token) -> int:
    """A token's 1-based line; the lexer records positions on every token it makes."""
    if token.line is None:  # pragma: no cover - lark always sets it here
        raise TypeError(f"edit grammar: token {token!r} has no position")
    return token.line


def _statement(lines: Sequence[str], tree: Tree) -> Statement:
    target, op, value = _tree(tree.children[0]), _token(tree.children[1]), tree.children[2]
    name_tree = _tree(target.children[0])
    token = _token(name_tree.children[0])
    if name_tree.data == "quoted_name":
        try:
            name = json.loads(str(token))
        except ValueError:
            raise _error(lines, f"the quoted name {token!s} is not a valid JSON string",
                         token.line, token.column) from None
    else:
        name = str(token)
    index = None
    if len(target.children) > 1:
        index = tuple(_part(lines, _tree(part))
                      for part in _tree(target.children[1]).children)
    return Statement(name=name, index=index, op=str(op), value=_value(lines, _tree(value)),
                     line=tree.meta.line, column=tree.meta.column,
                     name_column=_column(token), op_column=_column(op))


def _integer(lines: Sequence[str], token: Token) -> int:
    text = str(token)
    if len(text.lstrip("+-")) > 30:
        raise _error(lines, f"the index {text[:12]}... has more than 30 digits; no tensor "
                     "axis is that long", token.line, token.column)
    return int(text)


def _part(lines: Sequence[str], tree: Tree) -> Point | Range:
    if tree.data == "point":
        token = _token(tree.children[0])
        return Point(_integer(lines, token), _line(token), _column(token))
    start_tree, stop_tree = (_tree(child) for child in tree.children)
    start = _integer(lines, _token(start_tree.children[0])) if start_tree.children else None
    stop = _integer(lines, _token(stop_tree.children[0])) if stop_tree.children else None
    return Range(start, stop, tree.meta.line, tree.meta.column)


def _value(lines: Sequence[str], tree: Tree) -> Number | ListValue:
    if tree.data == "number":
        token = _token(tree.children[0])
        value = float(str(token))
        if not math.isfinite(value):
            raise _error(lines, f"the number {token!s} is too large to represent",
                         token.line, token.column)
        return Number(str(token), value, _line(token), _column(token))
    return ListValue(tuple(_value(lines, _tree(item)) for item in tree.children),
                     tree.meta.line, tree.meta.column)


# -- applying -----------------------------------------------------------------------------

def _list_array(lines: Sequence[str], value: ListValue) -> tuple[tuple[int, ...], list]:
    """The shape of a nested list and its numbers in C order, as ``Number`` records and
    whole ``NumberList`` rows (kept compact); ragged lists refused."""
    if isinstance(value, NumberList):
        return (len(value),), [value]
    if not value.items:
        return (0,), []
    shapes: list[tuple[int, ...]] = []
    flat: list[Number | NumberList] = []
    for item in value.items:
        if isinstance(item, Number):
            shapes.append(())
            flat.append(item)
        else:
            shape, numbers = _list_array(lines, item)
            shapes.append(shape)
            flat.extend(numbers)
    first = shapes[0]
    for position, shape in enumerate(shapes):
        if shape != first:
            item = value.items[position]
            raise _error(lines, f"ragged list: item {position} has shape {list(shape)} but "
                         f"item 0 has shape {list(first)}; every row must have the same "
                         "length", item.line, item.column)
    return (len(value.items),) + first, flat


def _selection(lines: Sequence[str], statement: Statement, shape: tuple[int, ...]
               ) -> tuple[tuple, tuple[int, ...]]:
    """The NumPy index for a statement and the shape it selects."""
    if statement.index is None:
        return (), shape
    parts = statement.index
    if len(parts) > len(shape):
        first_extra = parts[len(shape)]
        plural = "s" if len(parts) > 1 else ""
        advice = " (write a rank-0 tensor without brackets)" if not shape else ""
        raise _error(lines, f"tensor {statement.name!r} has rank {len(shape)} (shape "
                     f"{list(shape)}) but the index has {len(parts)} part{plural}; use at "
                     f"most {len(shape)}{advice}", first_extra.line, first_extra.column)
    index: list[int | slice] = []
    selected: list[int] = []
    for axis, part in enumerate(parts):
        size = shape[axis]
        if isinstance(part, Point):
            if not -size <= part.index < size:
                raise _error(lines, f"index {part.index} is out of range for axis {axis} of "
                             f"tensor {statement.name!r}, which has size {size} (valid: "
                             f"{-size} to {size - 1})", part.line, part.column)
            index.append(part.index % size)
        else:
            start = 0 if part.start is None else part.start
            stop = size if part.stop is None else part.stop
            for bound in (start, stop):
                if not -size <= bound <= size:
                    raise _error(lines, f"range bound {bound} is out of range for axis "
                                 f"{axis} of tensor {statement.name!r}, which has size "
                                 f"{size} (valid bounds: {-size} to {size})",
                                 part.line, part.column)
            start = start + size if start < 0 else start
            stop = stop + size if stop < 0 else stop
            if start >= stop:
                raise _error(lines, f"the range {part.start if part.start is not None else ''}"
                             f":{part.stop if part.stop is not None else ''} selects nothing "
                             f"on axis {axis} of tensor {statement.name!r} (size {size}); "
                             "start must be below stop", part.line, part.column)
            index.append(slice(start, stop))
            selected.append(stop - start)
    selected.extend(shape[len(parts):])
    return tuple(index), tuple(selected)


def _scale_for(lines: Sequence[str], statement: Statement,
               scales: Mapping[str, float] | None) -> float:
    if scales is None:
        return 1.0
    if statement.name not in scales:
        raise _error(lines, f"scales were given but none for tensor {statement.name!r}; "
                     "pass the scales of the rendering the edits were written against",
                     statement.line, statement.name_column)
    scale = scales[statement.name]
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise PatchError(f"the scale for tensor {statement.name!r} is {scale!r}, not a "
                         "number") from None
    if not math.isfinite(scale) or scale <= 0:
        raise PatchError(f"the scale for tensor {statement.name!r} is {scale!r}; scales "
                         "must be positive finite numbers")
    return scale


def _float_values(lines, statement, current: np.ndarray, numbers: np.ndarray,
                  scale: float, dtype: np.dtype) -> np.ndarray:
    amount = numbers * scale
    if statement.op == "=":
        result = amount
    elif statement.op == "+=":
        result = current.astype(np.float64) + amount
    else:
        result = current.astype(np.float64) - amount
    with np.errstate(over="ignore", invalid="ignore"):
        cast = np.asarray(np.asarray(result).astype(dtype))
    introduced = ~np.isfinite(cast)
    if statement.op != "=":
        introduced &= np.isfinite(current)
    if np.any(introduced):
        raise _error(lines, f"the edit makes tensor {statement.name!r} non-finite "
                     f"(beyond the range of {dtype.name}); use a smaller value",
                     statement.value.line, statement.value.column)
    return cast


def _integer_values(lines, statement, current: np.ndarray, numbers: list,
                    scale: float, dtype: np.dtype) -> np.ndarray:
    """Exact integer arithmetic (Python ints) so int64 tensors lose nothing."""
    if dtype == np.bool_:
        low, high = 0, 1
    else:
        info = np.iinfo(dtype)
        low, high = int(info.min), int(info.max)
    amounts = []
    for number in numbers:
        if scale == 1.0 and _is_integer_literal(number.text) and len(number.text) < 40:
            amounts.append(int(number.text))
            continue
        amount = number.value * scale
        if not math.isfinite(amount):
            raise _error(lines, f"{number.text} (x scale {scale!r}) overflows: tensor "
                         f"{statement.name!r} holds {dtype.name} values from {low} to "
                         f"{high}; use a smaller value or the tensor's own scale",
                         number.line, number.column)
        if amount != math.floor(amount) or abs(amount) > 2 ** 53:
            raise _error(lines, f"tensor {statement.name!r} holds {dtype.name} values but "
                         f"{number.text} (x scale {scale!r}) is not an exact integer",
                         number.line, number.column)
        amounts.append(int(amount))
    base = [int(v) for v in np.asarray(current).reshape(-1).tolist()]
    if len(amounts) == 1 and len(base) != 1:
        amounts = amounts * len(base)
    if statement.op == "=":
        result = amounts
    elif statement.op == "+=":
        result = [b + a for b, a in zip(base, amounts)]
    else:
        result = [b - a for b, a in zip(base, amounts)]
    for value in result:
        if not low <= value <= high:
            raise _error(lines, f"the edit gives tensor {statement.name!r} the value {value}, "
                         f"outside the range of {dtype.name} ({low} to {high})",
                         statement.value.line, statement.value.column)
    return np.array(result, dtype=dtype).reshape(np.shape(current))


def _is_integer_literal(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return body.isdigit()


def apply_statements(base: Mapping[str, Any], statements: Sequence[Statement],
                     scales: Mapping[str, float] | None = None, *,
                     source: str = "") -> dict[str, Any]:
    """Run parsed statements in order on copies of the tensors they touch.

    Returns a new mapping: untouched tensors are the same objects as in ``base``, touched
    ones are fresh NumPy arrays. ``base`` is never modified, and nothing is returned when
    any statement fails.
    """
    return {**base, **run_statements(base, statements, scales, source=source)}


def run_statements(base: Mapping[str, Any], statements: Sequence[Statement],
                   scales: Mapping[str, float] | None = None, *,
                   source: str = "") -> dict[str, np.ndarray]:
    """Like ``apply_statements`` but returns only the touched tensors, so tensors no
    statement names (say bfloat16 ones in a PyTorch state dictionary) are never read."""
    lines = source.split("\n")
    edited: dict[str, np.ndarray] = {}
    for statement in statements:
        if statement.name not in base:
            names = sorted(str(name) for name in base)
            known = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
            raise _error(lines, f"unknown tensor {statement.name!r}; the tensors are: "
                         f"{known or '(none)'}", statement.line, statement.name_column)
        if statement.name not in edited:
            edited[statement.name] = np.array(to_numpy(statement.name, base[statement.name]),
                                              copy=True)
        array = edited[statement.name]
        index, selected = _selection(lines, statement, array.shape)
        if isinstance(statement.value, ListValue):
            shape, numbers = _list_array(lines, statement.value)
            if shape != selected:
                raise _error(lines, f"the list has shape {list(shape)} but "
                             f"{statement.name}{_index_text(statement)} selects shape "
                             f"{list(selected)}; write a list of exactly that shape or a "
                             "single number", statement.value.line, statement.value.column)
        else:
            numbers = [statement.value]
        scale = _scale_for(lines, statement, scales)
        current = array[index]
        if array.dtype.kind == "f":
            if isinstance(statement.value, ListValue):
                values = _float_array(numbers).reshape(selected)
            else:
                values = np.array(statement.value.value, dtype=np.float64)
            new = _float_values(lines, statement, current, values, scale, array.dtype)
        else:
            new = _integer_values(lines, statement, current, _numbers(numbers), scale,
                                  array.dtype)
        array[index] = new
    return edited


def _float_array(parts: Sequence[Number | NumberList]) -> np.ndarray:
    """The values of ``_list_array``'s parts as one float64 vector."""
    if len(parts) == 1 and isinstance(parts[0], NumberList):
        return parts[0].values
    chunks = [part.values if isinstance(part, NumberList) else np.array([part.value])
              for part in parts]
    return np.concatenate(chunks) if chunks else np.empty(0)


def _numbers(parts: Sequence[Number | NumberList]) -> list[Number]:
    """``_list_array``'s parts as ``Number`` records (integer tensors need the texts)."""
    numbers: list[Number] = []
    for part in parts:
        if isinstance(part, NumberList):
            numbers.extend(item for item in part.items if isinstance(item, Number))
        else:
            numbers.append(part)
    return numbers


def _index_text(statement: Statement) -> str:
    if statement.index is None:
        return ""
    parts = []
    for part in statement.index:
        if isinstance(part, Point):
            parts.append(str(part.index))
        else:
            parts.append(f"{'' if part.start is None else part.start}:"
                         f"{'' if part.stop is None else part.stop}")
    return "[" + ", ".join(parts) + "]"


def apply_edits(base: Mapping[str, np.ndarray], text: str,
                scales: Mapping[str, float] | None = None) -> dict[str, np.ndarray]:
    """Parse ``text`` and run its statements on ``base`` (see ``apply_statements``)."""
    return apply_statements(base, parse_edits(text), scales, source=text)


__all__ = ["EditError", "Statement", "Point", "Range", "Number", "ListValue", "parse_edits",
           "apply_statements", "run_statements", "apply_edits", "grammar_text", "MAX_TEXT_CHARS",
           "MAX_STATEMENTS", "MAX_DEPTH", "MAX_NUMBERS"]

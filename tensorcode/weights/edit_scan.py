"""The linear-time reader of edit statements, for replies that are valid.

A reply may hold up to 100,000 statements and 4,000,000 numbers. The grammar
(``grammars/edits.lark``) stays the language reference and lark its diagnostician, but
building a parse tree costs hundreds of microseconds per statement and tens per number.
This scanner reads the same language with compiled regular expressions, one statement at
a time, and a bracketed list of plain numbers with one match and one ``findall`` (both
in C), so a reply at the limits is read in seconds. Bounds are checked as it goes, before
any number is converted.

It never decides what is wrong with a reply: at the first token it cannot take it raises
``Unreadable`` with the statement's offset, and ``edits.parse_edits`` asks lark to parse
that statement alone for the message, so errors read exactly as the grammar gives them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import numpy as np

from .edits_records import (
    NUMBER,
    ListValue,
    Number,
    NumberList,
    Point,
    Range,
    Span,
    Statement,
)

_GAP = r"(?:[ \t\f\r\n]|#[^\n]*)*"  # inside a value's brackets newlines are spaces too

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\/\-]*")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_INT = re.compile(r"[+-]?[0-9]+")
_ASSIGN = re.compile(r"\+=|-=|=")
_FENCE = re.compile(r"```[^\n]*")
_SPACE = re.compile(r"(?:[ \t\f\r]|#[^\n]*)*")
_SPACE_NL = re.compile(_GAP)
#: what a list of plain numbers is written with (no brackets, no comment)
_PLAIN = re.compile(r"[0-9+\-.eE, \t\f\r\n]*")


class Unreadable(Exception):
    """The scanner cannot take the token at ``offset``; the statement starts on the line
    beginning at ``line_offset``, which is line ``line``. ``expected`` says what would
    have been taken (for replies too long to hand to lark)."""

    def __init__(self, offset: int, line_offset: int, line: int, expected: str) -> None:
        super().__init__(expected)
        self.offset = offset
        self.line_offset = line_offset
        self.line = line
        self.expected = expected


class OutOfBounds(Exception):
    """A bound of the reply was passed at ``line``/``column``."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Bounds:
    statements: int
    depth: int
    numbers: int


class _Scanner:
    """One pass over ``text``; ``line``/``line_offset`` follow ``pos``."""

    def __init__(self, text: str, bounds: Bounds) -> None:
        self.text = text
        self.bounds = bounds
        self.pos = 0
        self.line = 1
        self.line_offset = 0
        self.numbers = 0
        self.statement_line = 1
        self.statement_offset = 0
        # a value the grammar takes but no record can hold (a bad quoted name, a long
        # index, a number past float64): reported once the whole reply has been read,
        # as lark's tree builder would, so that any syntax error comes first
        self.deferred: OutOfBounds | None = None

    def defer(self, message: str, offset: int) -> None:
        if self.deferred is None:
            self.deferred = OutOfBounds(message, self.line, self.column(offset))

    # -- positions ----------------------------------------------------------------------
    def column(self, offset: int) -> int:
        return offset - self.line_offset + 1

    def advance(self, end: int) -> None:
        """Move to ``end``, counting the newlines passed."""
        newlines = self.text.count("\n", self.pos, end)
        if newlines:
            self.line += newlines
            self.line_offset = self.text.rfind("\n", self.pos, end) + 1
        self.pos = end

    def skip(self, pattern: re.Pattern[str]) -> None:
        end = pattern.match(self.text, self.pos).end()  # type: ignore[union-attr]
        if pattern is _SPACE:  # spaces and comments within one line
            self.pos = end
        else:
            self.advance(end)

    def fail(self, expected: str) -> Unreadable:
        return Unreadable(self.pos, self.statement_offset, self.statement_line, expected)

    # -- the reply --------------------------------------------------------------------------
    def statements(self) -> list[Statement]:
        text, end = self.text, len(self.text)
        result: list[Statement] = []
        while True:
            self.skip(_SPACE)
            if self.pos >= end:
                if self.deferred is not None:
                    raise self.deferred
                return result
            if text[self.pos] == "\n":
                self.advance(self.pos + 1)
                continue
            self.statement_line, self.statement_offset = self.line, self.line_offset
            fence = _FENCE.match(text, self.pos)
            if fence:
                self.pos = fence.end()  # the fence runs to the end of its line
                continue
            result.append(self.statement(len(result)))
            self.skip(_SPACE)
            if self.pos < end and text[self.pos] != "\n":
                raise self.fail("the end of the line")

    def statement(self, count: int) -> Statement:
        text = self.text
        line, column = self.line, self.column(self.pos)
        bare = _NAME.match(text, self.pos)
        quoted = None if bare else _STRING.match(text, self.pos)
        token = bare or quoted
        if token is None:
            raise self.fail("a tensor name")
        name = token.group()
        if quoted is not None:
            try:
                name = json.loads(name)
            except ValueError:
                self.defer(f"the quoted name {name} is not a valid JSON string", self.pos)
        self.pos = token.end()
        self.skip(_SPACE)
        index = None
        if text.startswith("[", self.pos):
            index = self.index()
            self.skip(_SPACE)
        op = _ASSIGN.match(text, self.pos)
        if op is None:
            raise self.fail("'=', '+=' or '-='")
        op_column = self.column(self.pos)
        if count + 1 > self.bounds.statements:
            raise OutOfBounds(f"more than {self.bounds.statements} statements in one reply; "
                              "split the edits into several patches", self.line, op_column)
        self.pos = op.end()
        self.skip(_SPACE)
        value = self.value()
        return Statement(name=name, index=index, op=op.group(), value=value, line=line,
                         column=column, name_column=column, op_column=op_column)

    def index(self) -> tuple[Point | Range, ...]:
        text = self.text
        if self.bounds.depth < 1:
            raise OutOfBounds(f"brackets nest deeper than {self.bounds.depth} levels",
                              self.line, self.column(self.pos))
        self.pos += 1
        parts: list[Point | Range] = []
        while True:
            self.skip(_SPACE)
            start_column = self.column(self.pos)
            first = _INT.match(text, self.pos)
            if first:
                self.check_index(first)
                self.pos = first.end()
                self.skip(_SPACE)
            if text.startswith(":", self.pos):
                self.pos += 1
                self.skip(_SPACE)
                second = _INT.match(text, self.pos)
                if second:
                    self.check_index(second)
                    self.pos = second.end()
                parts.append(Range(_integer(first), _integer(second), self.line, start_column))
            elif first:
                parts.append(Point(_whole(first), self.line, start_column))
            else:
                raise self.fail("an integer or ':'")
            self.skip(_SPACE)
            if text.startswith(",", self.pos):
                self.pos += 1
                self.skip(_SPACE)
                if text.startswith("]", self.pos):
                    break
                continue
            if text.startswith("]", self.pos):
                break
            raise self.fail("',' or ']'")
        self.pos += 1
        return tuple(parts)

    def check_index(self, token: re.Match[str]) -> None:
        written = token.group()
        if len(written.lstrip("+-")) > 30:
            self.defer(f"the index {written[:12]}... has more than 30 digits; no tensor axis "
                       "is that long", token.start())

    def value(self) -> Number | ListValue:
        if self.text.startswith("[", self.pos):
            return self.list_value(1)
        return self.number()

    def number(self) -> Number:
        token = NUMBER.match(self.text, self.pos)
        if token is None:
            raise self.fail("a number or '['")
        self.count_numbers(1, token.start())
        written = token.group()
        value = float(written)
        if not math.isfinite(value):
            self.defer(f"the number {written} is too large to represent", self.pos)
        number = Number(written, value, self.line, self.column(self.pos))
        self.pos = token.end()
        return number

    def count_numbers(self, count: int, offset: int) -> None:
        if self.numbers + count > self.bounds.numbers:
            if count > 1:  # the first number past the bound, for the message's position
                over = self.bounds.numbers - self.numbers
                found = list(NUMBER.finditer(self.text, offset))[over]
                self.advance(found.start())
            raise OutOfBounds(f"more than {self.bounds.numbers} numbers in one reply; use "
                              "diff() on edited tensors for edits this large", self.line,
                              self.column(self.pos))
        self.numbers += count

    def list_value(self, depth: int) -> ListValue:
        text = self.text
        if depth > self.bounds.depth:
            raise OutOfBounds(f"brackets nest deeper than {self.bounds.depth} levels",
                              self.line, self.column(self.pos))
        line, column, start = self.line, self.column(self.pos), self.pos
        pieces = _plain_items(text, start)
        values = None
        if pieces is not None:
            end = text.find("]", start) + 1
            if self.numbers + len(pieces) > self.bounds.numbers:
                self.count_numbers(len(pieces), start)  # the bound, before any conversion
            values = _floats(pieces)
        if pieces is not None and values is not None:
            self.numbers += len(pieces)
            if self.deferred is None and not np.isfinite(values).all():
                bad = int(np.flatnonzero(~np.isfinite(values))[0])
                found = list(NUMBER.finditer(text, start, end))[bad]
                self.advance(found.start())
                self.defer(f"the number {found.group()} is too large to represent",
                           found.start())
            line_offset = self.line_offset
            self.advance(end)
            return NumberList(values, line, column, Span(text, start, end, line_offset))
        self.pos += 1  # '[': items one by one (nested lists, or comments inside)
        items: list[Number | ListValue] = []
        while True:
            self.skip(_SPACE_NL)
            if text.startswith("]", self.pos):
                break
            if text.startswith("[", self.pos):
                items.append(self.list_value(depth + 1))
            else:
                items.append(self.number())
            self.skip(_SPACE_NL)
            if text.startswith(",", self.pos):
                self.pos += 1
                continue
            if text.startswith("]", self.pos):
                break
            raise self.fail("',' or ']'")
        self.pos += 1
        return ListValue(tuple(items), line, column)


def _plain_items(text: str, start: int) -> list[str] | None:
    """The items of the list of plain numbers opening at ``start``, or ``None`` when it
    is anything else (nested or commented: read item by item then).

    Only digits, signs, points, exponents, commas and spaces may appear before the
    ``]``; the items between commas (a trailing comma allowed) are then exactly the
    grammar's numbers when ``float`` takes each of them, since with those characters
    the two accept the same texts."""
    close = text.find("]", start)
    if close < 0:
        return None
    inner = text[start + 1:close]
    if _PLAIN.fullmatch(inner) is None:
        return None
    pieces = inner.split(",")
    if not pieces[-1].strip():  # ``[]``, or a trailing comma
        pieces.pop()
    return pieces


def _floats(pieces: list[str]) -> np.ndarray | None:
    """The items as float64, or ``None`` when one is not a number (an empty item, two
    numbers without a comma: read item by item, which finds the place)."""
    try:
        return np.fromiter(map(float, pieces), np.float64, len(pieces))
    except ValueError:
        return None


def _integer(token: re.Match[str] | None) -> int | None:
    return None if token is None else _whole(token)


def _whole(token: re.Match[str]) -> int:
    """The integer, or 0 for one past 30 digits (refused by ``check_index`` at the end)."""
    written = token.group()
    return 0 if len(written.lstrip("+-")) > 30 else int(written)


def scan(text: str, bounds: Bounds) -> list[Statement]:
    """The statements of a reply (``Unreadable`` or ``OutOfBounds`` otherwise)."""
    return _Scanner(text, bounds).statements()

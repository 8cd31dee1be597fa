"""The parsed form of edit statements: plain records, never code.

``parse_edits`` (``edits.py``) builds them with lark's tree or, for valid replies, with the
linear scanner (``edit_scan.py``); both make the same records. A bracketed list of plain
numbers is kept compact (``NumberList``: the texts and a float64 array), since a reply may
hold millions of numbers; its ``Number`` items are built only when asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

#: a number as edit statements write it (the scanner and ``number_positions`` share it)
NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Point:
    """One integer index part (negative counts from the end)."""

    index: int
    line: int
    column: int


@dataclass(frozen=True)
class Range:
    """A ``start:stop`` index part; ``None`` is an omitted bound."""

    start: int | None
    stop: int | None
    line: int
    column: int


@dataclass(frozen=True)
class Number:
    """A number as written (``text``) and as a float."""

    text: str
    value: float
    line: int
    column: int


@dataclass(frozen=True)
class ListValue:
    """A bracketed list of numbers or lists."""

    items: tuple[Number | ListValue, ...]
    line: int
    column: int


@dataclass(frozen=True)
class Statement:
    """``name[index] op value``; ``index`` is ``None`` for the whole tensor."""

    name: str
    index: tuple[Point | Range, ...] | None
    op: str
    value: Number | ListValue
    line: int
    column: int
    name_column: int
    op_column: int



@dataclass(frozen=True)
class Span:
    """Where a ``NumberList`` was written: the reply, its ``[``...``]`` offsets and the
    offset of the line it starts on."""

    text: str
    start: int
    end: int
    line_offset: int


class NumberList(ListValue):
    """A bracketed list of plain numbers: ``values`` (float64) and where it was written,
    with ``items`` (``Number`` records: text as written, value, position) made on first
    use."""

    values: np.ndarray
    span: Span

    def __init__(self, values: np.ndarray, line: int, column: int, span: Span) -> None:
        for name, value in (("values", values), ("line", line), ("column", column),
                            ("span", span), ("_items", None)):
            object.__setattr__(self, name, value)

    @property
    def items(self) -> tuple[Number | ListValue, ...]:
        made = self.__dict__.get("_items")
        if made is None:
            made = tuple(self._numbers())
            object.__setattr__(self, "_items", made)
        return made

    def _numbers(self) -> Any:
        for written, line, column, value in zip(*number_positions(self.span, self.line),
                                               self.values.tolist()):
            yield Number(written, value, line, column)

    def __len__(self) -> int:
        return len(self.values)


def number_positions(span: Span, first_line: int
                     ) -> tuple[list[str], list[int], list[int]]:
    """The text, line and column of each number of a ``NumberList``'s span, which starts
    on line ``first_line``."""
    texts: list[str] = []
    lines: list[int] = []
    columns: list[int] = []
    text, line, line_offset = span.text, 0, span.line_offset
    position = span.start
    for token in NUMBER.finditer(text, span.start, span.end):
        newlines = text.count("\n", position, token.start())
        if newlines:
            line += newlines
            line_offset = text.rfind("\n", position, token.start()) + 1
        position = token.start()
        texts.append(token.group())
        lines.append(first_line + line)
        columns.append(token.start() - line_offset + 1)
    return texts, lines, columns


__all__ = ["NUMBER", "number_positions", "Point", "Range", "Number", "ListValue",
           "NumberList", "Span", "Statement"]

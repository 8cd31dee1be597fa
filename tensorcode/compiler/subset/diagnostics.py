"""Syntax errors of author programs: the offending line with a caret, a message saying
what the parser expected, and hints for habits carried over from full Python.

``syntax`` parses; this module only explains a failure, so every message and
hint about syntax is in one place.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

from ...errors import CompileError


def excerpt(lines: list[str], line: int | None, column: int | None) -> str | None:
    """The offending source line with a caret under ``column``."""
    if line is None or not 1 <= line <= len(lines):
        return None
    text = lines[line - 1].rstrip("\r").expandtabs(1)
    column = max(1, column or 1)
    if len(text) > 100:  # show a window around the column, not a whole long line
        start = max(0, column - 50)
        text = ("..." if start else "") + text[start:start + 100] + (
            "..." if start + 100 < len(text) else "")
        column = column - start + (3 if start else 0)
    caret = " " * (column - 1) + "^"
    return f"    {text}\n    {caret}"


def error(lines: list[str], line: int | None, column: int | None, message: str) -> CompileError:
    return CompileError(message, line, column, excerpt(lines, line, column))


# ---------------------------------------------------------------------------------------
# parse errors


_KEYWORD_HINTS = [
    (re.compile(r"\[[^\]]*\bfor\b"), "comprehensions do not compile; use a for loop over "
     "range(a, b) or a vectorized method such as x.sum()"),
    (re.compile(r"^\s*(class|try|except|with|raise|assert|global|nonlocal|async|await|del|"
                r"yield|break|continue)\b"),
     "only assignments, for loops over range(...) and one final return {...} compile"),
    (re.compile(r"\blambda\b"), "lambda does not compile; write the expression inline"),
    (re.compile(r"\b(is|in)\b"), "'is' and 'in' do not compile outside 'for i in range(...)'; "
     "compare numbers with == or !="),
    (re.compile(r"\*\s*\w+\s*[,)]"), "star arguments do not compile; pass each value"),
    (re.compile(r"^\s*\w+\s*,\s*\w+[\w\s,]*="), "assign one name at a time: a = ...; "
     "b = ..."),
]


def _open_brackets(lines: list[str], line: int, column: int) -> int:
    """How many brackets are open before ``line``/``column`` (strings ignored)."""
    text = "\n".join(lines[:line - 1] + [lines[line - 1][:column - 1]]
                     if 1 <= line <= len(lines) else lines)
    text = re.sub(r"'[^'\n]*'|\"[^\"\n]*\"|#[^\n]*", "", text)
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


def _describe_terminals(names: Any, lark: Lark) -> str:
    shown = []
    for name in sorted(names):
        if name.startswith("_") or name.startswith("__"):
            continue
        try:
            pattern = lark.get_terminal(name).pattern
        except KeyError:
            continue
        if pattern.type == "str":
            shown.append(repr(pattern.value))
        else:
            if name in ("STRING", "LONG_STRING", "FLOAT"):
                continue
            shown.append({"NAME": "a name", "INT": "a number", "AUGOP": "an update such as +=",
                          "COMPARE": "a comparison"}.get(name, name.lower()))
    if not shown:
        return ""
    if len(shown) > 8:
        shown = shown[:8] + ["..."]
    return "; expected " + ", ".join(shown)


def parse_error(exc: Exception, lines: list[str], lark: Lark) -> CompileError:
    """A lark failure as a ``CompileError`` with position, line and an instruction
    (``lark`` is the parser that failed, asked for its terminals' patterns)."""
    line = getattr(exc, "line", None)
    column = getattr(exc, "column", None)
    if isinstance(line, int) and line < 1:
        line = None
    if not isinstance(line, int):
        line, column = len(lines), max(1, len(lines[-1]) if lines else 1)
    if not isinstance(column, int):  # lark sets both; a line without a column starts it
        column = 1
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    if isinstance(exc, UnexpectedCharacters):
        char = text[column - 1] if 0 < column <= len(text) else "?"
        if char in "\"'":
            message = ("a string is not closed on this line; strings only appear as the "
                       "return dict keys, e.g. {\"route\": route}")
        elif char == "\t" or char == " ":
            message = "unexpected whitespace; indent with spaces consistently"
        else:
            message = (f"the character {char!r} does not belong to the language; write "
                       "Python-style arithmetic, names and numbers")
    elif isinstance(exc, UnexpectedEOF) or (
            isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        message = ("the program ended unexpectedly: close every bracket and finish the "
                   "function with return {...}")
    elif isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type in ("_INDENT", "_DEDENT") and token.end_line is not None:
            line, column = token.end_line, max(1, token.end_column or 1)
            text = lines[line - 1] if 1 <= line <= len(lines) else ""
        if token.type == "_INDENT":
            message = ("unexpected indentation; indent only the body of def and for, by the "
                       "same amount")
        elif token.type == "_DEDENT":
            message = "the block ended too early; finish the statement or indent consistently"
        elif token.type == "_NEWLINE":
            message = ("this line ends too early; finish the statement, or close the "
                       "bracket") + _describe_terminals(exc.expected, lark)
        else:
            message = f"unexpected {str(token)!r}" + _describe_terminals(exc.expected, lark)
        if token.type != "_INDENT" and _open_brackets(lines, line, column) > 0 and (
                token.line is not None and token.line > 1):
            message += ("; a bracket opened earlier is not closed: close it before "
                        "starting a new statement")
    else:
        message = f"could not parse the program ({type(exc).__name__})"
    for pattern, hint in _KEYWORD_HINTS:
        if pattern.search(text):
            message = f"{message}. {hint[0].upper()}{hint[1:]}"
            break
    return error(lines, line, column, message)


def dedent_line(lines: list[str]) -> tuple[int, int]:
    """The first line whose indentation matches no enclosing block (for DedentError,
    which lark raises without a position)."""
    stack = [0]
    depth = 0
    for number, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if depth == 0 and stripped and not stripped.startswith("#"):
            indent = len(raw.expandtabs(8)) - len(raw.expandtabs(8).lstrip())
            if indent > stack[-1]:
                stack.append(indent)
            else:
                while indent < stack[-1]:
                    stack.pop()
                if indent != stack[-1]:
                    return number, indent + 1
        depth += raw.count("(") + raw.count("[") + raw.count("{")
        depth -= raw.count(")") + raw.count("]") + raw.count("}")
        depth = max(depth, 0)
    return max(1, len(lines)), 1


__all__ = ["excerpt", "error", "parse_error", "dedent_line"]

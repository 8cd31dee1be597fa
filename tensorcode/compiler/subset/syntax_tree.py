"""The syntax tree of an author program, built from the lark parse by a Transformer.

The tree holds only what compiles: constructs the language refuses (indexing, if,
while, imports, lambdas, boolean operators, ...) are rejected while the tree is built,
with their position and an instruction, so the compiler never sees them. Every node
carries its ``line`` and ``column`` (1-based) for error messages, and every expression
its nesting ``depth``, which is bounded so that evaluating the tree cannot exhaust the
Python stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Node:
    line: int
    column: int


# -- expressions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Name(Node):
    id: str
    depth: int = 1


@dataclass(frozen=True)
class Number(Node):
    value: int | float
    depth: int = 1


@dataclass(frozen=True)
class String(Node):
    value: str
    depth: int = 1


@dataclass(frozen=True)
class Binary(Node):
    op: str  # one of + - * / // % ** @
    left: Expression
    right: Expression
    depth: int = 1


@dataclass(frozen=True)
class Unary(Node):
    op: str  # "-" or "+"
    operand: Expression
    depth: int = 1


@dataclass(frozen=True)
class Compare(Node):
    op: str  # one of < <= > >= == !=
    left: Expression
    right: Expression
    depth: int = 1


@dataclass(frozen=True)
class Keyword(Node):
    name: str
    value: Expression


@dataclass(frozen=True)
class Call(Node):
    """``function(args)`` or ``receiver.method(args)`` (``receiver`` is None for a
    plain function call)."""

    function: str
    receiver: Expression | None
    args: tuple[Expression, ...]
    keywords: tuple[Keyword, ...]
    depth: int = 1


@dataclass(frozen=True)
class ListLiteral(Node):
    items: tuple[Expression, ...]
    depth: int = 1


@dataclass(frozen=True)
class TupleLiteral(Node):
    items: tuple[Expression, ...]
    depth: int = 1


@dataclass(frozen=True)
class DictLiteral(Node):
    pairs: tuple[tuple[Expression, Expression], ...]
    depth: int = 1


Expression = (Name | Number | String | Binary | Unary | Compare | Call | ListLiteral
              | TupleLiteral | DictLiteral)


# -- statements --------------------------------------------------------------------------


@dataclass(frozen=True)
class Assign(Node):
    target: str
    value: Expression


@dataclass(frozen=True)
class AugAssign(Node):
    target: str
    op: str  # the binary operator: + - * / ** // % @
    value: Expression


@dataclass(frozen=True)
class Return(Node):
    value: Expression | None


@dataclass(frozen=True)
class Pass(Node):
    pass


@dataclass(frozen=True)
class For(Node):
    variable: str
    iterable: Expression
    body: tuple[Statement, ...]
    depth: int = 1
    #: statements the body runs per iteration, nested loops counted once
    size: int = 1


Statement = Assign | AugAssign | Return | Pass | For


@dataclass(frozen=True)
class Function(Node):
    name: str
    arguments: tuple[tuple[str, int, int], ...]  # (name, line, column)
    body: tuple[Statement, ...] = field(default=())


@dataclass(frozen=True)
class Module(Node):
    functions: tuple[Function, ...]


__all__ = ["Node", "Name", "Number", "String", "Binary", "Unary", "Compare", "Keyword",
           "Call", "ListLiteral", "TupleLiteral", "DictLiteral", "Expression", "Assign",
           "AugAssign", "Return", "Pass", "For", "Statement", "Function", "Module"]

"""Parsing author programs: the lark parser and the tree builder.

The grammar (``grammars/subset.lark``) accepts a little more than the language so that
constructs authors reach for by habit (``x[i]``, ``if``, ``while``, ``import numpy``,
``and``, lambdas, ...) are refused here with their position and an instruction saying
what to write instead. Parse errors become ``CompileError`` with the line, column and
offending line (worded by ``diagnostics``). Nothing in the source is ever
executed.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from lark import Lark
from lark.exceptions import LarkError, UnexpectedInput, VisitError
from lark.indenter import PythonIndenter
from lark.visitors import Transformer_NonRecursive, v_args

from ...errors import CompileError
from . import syntax_tree as ast
from .diagnostics import dedent_line, error, excerpt, parse_error

GRAMMAR_PATH = Path(__file__).resolve().parents[2] / "grammars" / "subset.lark"

#: bounds that keep parsing and compiling cheap whatever the input
MAX_SOURCE_CHARS = 20_000
MAX_LINES = 1_000
MAX_EXPRESSION_DEPTH = 64
MAX_BLOCK_DEPTH = 6

#: names authors use for modules; calling through them gets a specific instruction
MODULE_NAMES = frozenset({"np", "numpy", "math", "torch", "jnp", "jax", "tc", "tensorcode",
                          "scipy"})


@functools.lru_cache(maxsize=1)
def parser() -> Lark:
    """The LALR parser (built once per process)."""
    return Lark(GRAMMAR_PATH.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                postlex=PythonIndenter(), propagate_positions=True, maybe_placeholders=True)


# ---------------------------------------------------------------------------------------
# the tree builder


def _pos(meta: Any) -> tuple[int, int]:
    if getattr(meta, "empty", True):
        return 1, 1
    return meta.line, meta.column


class _Attribute:
    """``receiver.name`` before it is called; anything but a call rejects it."""

    def __init__(self, receiver: ast.Expression, name: str, line: int, column: int) -> None:
        self.receiver, self.name, self.line, self.column = receiver, name, line, column


class _Argument:
    def __init__(self, keyword: str | None, value: ast.Expression, line: int, column: int):
        self.keyword, self.value, self.line, self.column = keyword, value, line, column


class _Marker:
    """A piece of syntax that only its parent rule consumes (slices, pairs, params)."""

    def __init__(self, kind: str, payload: Any, line: int, column: int) -> None:
        self.kind, self.payload, self.line, self.column = kind, payload, line, column


@v_args(meta=True)
class TreeBuilder(Transformer_NonRecursive):
    """Lark tree -> ``syntax_tree`` dataclasses, refusing what does not compile.

    Non-recursive, so a deeply nested input cannot exhaust the Python stack before the
    depth bound rejects it.
    """

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    # -- helpers ----------------------------------------------------------------------------
    def _fail(self, line: int, column: int, message: str) -> CompileError:
        return error(self.lines, line, column, message)

    def _expr(self, value: Any) -> ast.Expression:
        """A child used as a value; an uncalled attribute is refused here."""
        if isinstance(value, _Attribute):
            if isinstance(value.receiver, ast.Name) and value.receiver.id in MODULE_NAMES:
                raise self._fail(value.line, value.column,
                                f"{value.receiver.id}.{value.name} does not compile: there "
                                "are no modules; use the built-in functions directly, e.g. "
                                "exp(x), where(c, a, b)")
            raise self._fail(value.line, value.column,
                            f"attribute .{value.name} does not compile; the only attributes "
                            "are method calls such as x.sum(), x.reshape(), "
                            "x.slice(a, b), x.dot(w)")
        if isinstance(value, _Marker) and value.kind == "subscript":
            raise self._fail(value.line, value.column, "indexing with [] does not compile; "
                             f"{value.payload}")
        if isinstance(value, (_Argument, _Marker)) or value is None:
            line, column = (value.line, value.column) if value is not None else (1, 1)
            raise self._fail(line, column, "this syntax does not compile here")
        return value

    def _depth(self, line: int, column: int, *children: Any) -> int:
        depth = 1 + max((getattr(c, "depth", 1) for c in children), default=0)
        if depth > MAX_EXPRESSION_DEPTH:
            raise self._fail(line, column,
                            f"this expression nests deeper than {MAX_EXPRESSION_DEPTH} levels; "
                            "split it into several assignments")
        return depth

    # -- module and function ------------------------------------------------------------------
    def start(self, meta, children):
        functions = tuple(c for c in children if isinstance(c, ast.Function))
        if not functions:
            line, column = _pos(meta)
            raise self._fail(line, column, "the program must be one function: "
                            "def name(inputs..., parameters...): ... return {...}")
        if len(functions) > 1:
            second = functions[1]
            raise self._fail(second.line, second.column,
                            "the program must be exactly one function; inline the helper "
                            f"{second.name!r} into the main function")
        return ast.Module(*_pos(meta), functions)

    def import_stmt(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "imports do not compile: there are no modules. The "
                        "functions exp, log, tanh, sigmoid, relu, sqrt, abs, sin, cos, minimum, "
                        "maximum, clip and where are built in; call them directly")

    def import_as(self, meta, children):
        return None

    def import_names(self, meta, children):
        return None

    def dotted(self, meta, children):
        return None

    def funcdef(self, meta, children):
        name, params, annotation, body = children
        if annotation is not None:
            annotation = self._expr(annotation)
        line, column = _pos(meta)
        if annotation is not None:
            raise self._fail(annotation.line, annotation.column,
                            "return annotations (-> ...) do not compile; write def "
                            "name(args): without them")
        arguments = tuple(params.payload) if params is not None else ()
        return ast.Function(line, column, str(name), arguments, tuple(body.payload))

    def params(self, meta, children):
        return _Marker("params", [c for c in children if c is not None], *_pos(meta))

    def param(self, meta, children):
        name, annotation, default = children
        if annotation is not None:
            raise self._fail(name.line, name.column + len(name),
                            f"type annotations do not compile; write {name} without ': ...'")
        if default is not None:
            raise self._fail(name.line, name.column + len(name),
                            f"default values do not compile; write {name} without '= ...' "
                            "(parameters take their values from the json block)")
        return (str(name), name.line, name.column)

    def suite(self, meta, children):
        for statement in children:
            if isinstance(statement, ast.Function):
                raise self._fail(statement.line, statement.column,
                                 "nested functions do not compile; inline the helper "
                                 f"{statement.name!r} into the one function")
        return _Marker("suite", children, *_pos(meta))

    inline_suite = suite

    # -- statements ----------------------------------------------------------------------------
    def _target(self, target: Any, what: str) -> str:
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target, _Marker) and target.kind == "subscript":
            raise self._fail(target.line, target.column,
                            f"{what} into x[...] does not compile; tensors are built whole: "
                            "compute the new value with where(...) or a list literal "
                            "[a, b, c] and assign it to a name")
        if isinstance(target, _Attribute):
            raise self._fail(target.line, target.column,
                            f"{what} to an attribute does not compile; assign to a plain name")
        line, column = getattr(target, "line", 1), getattr(target, "column", 1)
        raise self._fail(line, column, f"{what} needs one plain name on the left, e.g. "
                        "total = ...; assign one name at a time")

    def assign(self, meta, children):
        target, value = children
        line, column = _pos(meta)
        return ast.Assign(line, column, self._target(target, "assigning"), self._expr(value))

    def augassign(self, meta, children):
        target, op, value = children
        line, column = _pos(meta)
        return ast.AugAssign(line, column, self._target(target, "updating"), str(op)[:-1],
                             self._expr(value))

    def return_stmt(self, meta, children):
        (value,) = children
        line, column = _pos(meta)
        return ast.Return(line, column, None if value is None else self._expr(value))

    def pass_stmt(self, meta, children):
        return ast.Pass(*_pos(meta))

    def expr_stmt(self, meta, children):
        line, column = _pos(meta)
        value = self._expr(children[0])
        if isinstance(value, ast.String):
            raise self._fail(line, column, "strings (docstrings too) do not compile outside "
                            "the return dict keys; write comments with #")
        if isinstance(value, ast.Call) and value.function == "print":
            raise self._fail(line, column, "print does not compile; the program's only effect "
                            "is the dict it returns")
        raise self._fail(line, column, "an expression on its own line has no effect; assign "
                        "it to a name (name = ...) or put it in the returned dict")

    def for_stmt(self, meta, children):
        variable, iterable, body = children
        line, column = _pos(meta)
        statements = tuple(body.payload)
        depth = 1 + max((s.depth for s in statements if isinstance(s, ast.For)), default=0)
        if depth > MAX_BLOCK_DEPTH:
            raise self._fail(line, column, f"loops nest deeper than {MAX_BLOCK_DEPTH} levels; "
                            "flatten them or use vectorized methods such as x.sum()")
        size = sum(s.size * _iterations_hint(s) if isinstance(s, ast.For) else 1
                   for s in statements)
        return ast.For(line, column, str(variable), self._expr(iterable), statements, depth,
                       max(1, size))

    def while_stmt(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "while loops do not compile; use a for loop with "
                        "integer bounds, for i in range(0, 12):, which is unrolled at "
                        "compile time")

    def if_stmt(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "if statements do not compile: a program has no "
                        "branches. Compute both values and choose with "
                        "where(condition, value_if_true, value_if_false)")

    def elif_clause(self, meta, children):
        return None

    def else_clause(self, meta, children):
        return None

    # -- expressions ---------------------------------------------------------------------------
    def conditional(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "'a if c else b' does not compile; use where(c, a, b)")

    def lambda_expr(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "lambda does not compile; write the expression inline")

    def bool_or(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "'or' does not compile; comparisons give 0/1 values, so "
                        "write maximum(a, b) for 'a or b'")

    def bool_and(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "'and' does not compile; comparisons give 0/1 values, "
                        "so write (a) * (b) for 'a and b'")

    def bool_not(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "'not' does not compile; comparisons give 0/1 values, "
                        "so write 1 - a for 'not a'")

    def invert(self, meta, children):
        line, column = _pos(meta)
        raise self._fail(line, column, "'~' does not compile; write 1 - a for the complement "
                        "of a 0/1 value")

    def comparison(self, meta, children):
        line, column = _pos(meta)
        if len(children) > 3:
            raise self._fail(line, column, "chained comparisons such as a < b < c do not "
                            "compile; write (a < b) * (b < c)")
        left, op, right = children
        left, right = self._expr(left), self._expr(right)
        return ast.Compare(line, column, str(op), left, right,
                           self._depth(line, column, left, right))

    def _binary(self, op: str, meta, children):
        line, column = _pos(meta)
        left, right = (self._expr(c) for c in children)
        return ast.Binary(line, column, op, left, right, self._depth(line, column, left, right))

    def add(self, meta, c): return self._binary("+", meta, c)
    def sub(self, meta, c): return self._binary("-", meta, c)
    def mul(self, meta, c): return self._binary("*", meta, c)
    def div(self, meta, c): return self._binary("/", meta, c)
    def floordiv(self, meta, c): return self._binary("//", meta, c)
    def mod(self, meta, c): return self._binary("%", meta, c)
    def matmul(self, meta, c): return self._binary("@", meta, c)
    def pow(self, meta, c): return self._binary("**", meta, c)

    def _unary(self, op: str, meta, children):
        line, column = _pos(meta)
        operand = self._expr(children[0])
        return ast.Unary(line, column, op, operand, self._depth(line, column, operand))

    def neg(self, meta, c): return self._unary("-", meta, c)
    def pos(self, meta, c): return self._unary("+", meta, c)

    def attribute(self, meta, children):
        receiver, name = children
        return _Attribute(self._expr(receiver), str(name), name.line, name.column)

    def call(self, meta, children):
        function, arguments = children
        line, column = _pos(meta)
        args = [] if arguments is None else arguments.payload
        positional: list[ast.Expression] = []
        keywords: list[ast.Keyword] = []
        for arg in args:
            if arg.keyword is None:
                if keywords:
                    raise self._fail(arg.line, arg.column, "positional arguments must come "
                                    "before keyword arguments")
                positional.append(arg.value)
            else:
                keywords.append(ast.Keyword(arg.line, arg.column, arg.keyword, arg.value))
        if isinstance(function, _Attribute):
            receiver = function.receiver
            if isinstance(receiver, ast.Name) and receiver.id in MODULE_NAMES:
                raise self._fail(receiver.line, receiver.column,
                                f"{receiver.id}.{function.name}(...) does not compile: there "
                                f"are no modules; call {function.name}(...) directly if it is "
                                "one of the built-in functions")
            name, line, column = function.name, function.line, function.column
        elif isinstance(function, ast.Name):
            receiver, name = None, function.id
        else:
            target = self._expr(function)
            raise self._fail(target.line, target.column, "only named functions and methods "
                            "can be called, e.g. exp(x) or x.sum()")
        children_values = [*positional, *(k.value for k in keywords)]
        if receiver is not None:
            children_values.append(receiver)
        return ast.Call(line, column, name, receiver, tuple(positional), tuple(keywords),
                        self._depth(line, column, *children_values))

    def arguments(self, meta, children):
        return _Marker("arguments", [c for c in children if c is not None], *_pos(meta))

    def argument(self, meta, children):
        first, value = children
        line, column = _pos(meta)
        if value is None:
            return _Argument(None, self._expr(first), line, column)
        if not isinstance(first, ast.Name):
            raise self._fail(line, column, "a keyword argument needs a plain name before '=', "
                            "e.g. x.sum(axis=0)")
        return _Argument(first.id, self._expr(value), line, column)

    def subscript(self, meta, children):
        line, column = _pos(meta)
        items = children[1].payload
        if {kind for kind, _ in items} == {"index"}:
            hint = ("use x.slice(i, i + 1).reshape() to read element i (and x.slice(a, b) "
                    "for elements a..b-1)")
        else:
            hint = "use x.slice(a, b) for elements a..b-1 (one axis at a time, axis=...)"
        return _Marker("subscript", hint, line, column)

    def subscripts(self, meta, children):
        return _Marker("subscripts", [c for c in children if c is not None], *_pos(meta))

    def index_item(self, meta, children):
        return ("index", children[0])

    def slice_item(self, meta, children):
        return ("slice", children)

    def name(self, meta, children):
        (token,) = children
        return ast.Name(token.line, token.column, str(token))

    def int_literal(self, meta, children):
        (token,) = children
        text = str(token)
        if len(text) > 18:
            raise self._fail(token.line, token.column, f"the integer literal {text[:20]}... is "
                            "too long; write it as a float such as 1e20")
        return ast.Number(token.line, token.column, int(text))

    def float_literal(self, meta, children):
        (token,) = children
        value = float(str(token))
        if value in (float("inf"), float("-inf")):
            raise self._fail(token.line, token.column, f"the literal {token} is too large for "
                            "float64; use a finite number")
        return ast.Number(token.line, token.column, value)

    def string(self, meta, children):
        (token,) = children
        text = str(token)
        quote = 3 if text[:3] in ('"""', "'''") else 1
        return ast.String(token.line, token.column, text[quote:-quote])

    def tuple_literal(self, meta, children):
        line, column = _pos(meta)
        items = tuple(self._expr(c) for c in children if c is not None)
        return ast.TupleLiteral(line, column, items, self._depth(line, column, *items))

    def list_literal(self, meta, children):
        line, column = _pos(meta)
        items = tuple(self._expr(c) for c in children if c is not None)
        return ast.ListLiteral(line, column, items, self._depth(line, column, *items))

    def dict_literal(self, meta, children):
        line, column = _pos(meta)
        pairs = tuple(c.payload for c in children if c is not None)
        values = [v for pair in pairs for v in pair]
        return ast.DictLiteral(line, column, pairs, self._depth(line, column, *values))

    def pair(self, meta, children):
        key, value = children
        return _Marker("pair", (self._expr(key), self._expr(value)), *_pos(meta))


def _iterations_hint(statement: ast.For) -> int:
    """Iterations of a loop whose bounds are plain literals (1 when not literal): used
    only to pre-size the unrolling budget; the compiler counts exactly."""
    iterable = statement.iterable
    if not (isinstance(iterable, ast.Call) and iterable.function == "range"
            and iterable.receiver is None):
        return 1
    values = [a.value for a in iterable.args
              if isinstance(a, ast.Number) and isinstance(a.value, int)]
    if len(values) != len(iterable.args) or not 1 <= len(values) <= 3:
        return 1
    try:
        return max(1, len(range(*values)))
    except (ValueError, OverflowError):
        return 1


def parse(source: str) -> ast.Module:
    """Parse ``source`` into a ``Module``; every failure is a ``CompileError``."""
    if not isinstance(source, str):
        raise CompileError(f"the program must be text (str), got {type(source).__name__}")
    if len(source) > MAX_SOURCE_CHARS:
        raise CompileError(f"the program has {len(source)} characters, more than the limit "
                           f"{MAX_SOURCE_CHARS}; write a shorter program", 1, 1)
    lines = source.split("\n")
    if len(lines) > MAX_LINES:
        raise CompileError(f"the program has {len(lines)} lines, more than the limit "
                           f"{MAX_LINES}; write a shorter program", 1, 1)
    try:
        tree = parser().parse(source + "\n")
    except UnexpectedInput as exc:
        raise parse_error(exc, lines, parser()) from None
    except LarkError as exc:  # DedentError and friends: no position of their own
        if "indent" in str(exc).lower() or "dedent" in type(exc).__name__.lower():
            line, column = dedent_line(lines)
            raise error(lines, line, column, "this line's indentation matches no enclosing "
                        "block; indent with the same number of spaces as the lines of its "
                        "block") from None
        raise error(lines, len(lines), 1, f"could not parse the program: {exc}") from None
    try:
        module = TreeBuilder(lines).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, CompileError):
            raise exc.orig_exc from None
        raise
    if not isinstance(module, ast.Module):  # pragma: no cover - the start rule builds one
        raise error(lines, 1, 1, "the program must be one function")
    return module


__all__ = ["parse", "parser", "GRAMMAR_PATH", "MAX_SOURCE_CHARS", "MAX_LINES",
           "MAX_EXPRESSION_DEPTH", "MAX_BLOCK_DEPTH", "MODULE_NAMES", "excerpt", "error"]

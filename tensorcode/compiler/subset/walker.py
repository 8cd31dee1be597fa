"""Compiling author programs: the syntax tree -> the same ``Tape`` calls a user makes.

An author program is one function over declared inputs (and optional parameters from
a json block) returning a dict of named outputs. ``compile_program`` parses it with the
lark grammar (``syntax``) and walks the tree, recording every operation on a
``Tape`` exactly as Python code calling ``Expr`` methods would. Nothing in the source is
executed: loops over ``range`` with compile-time integer bounds are unrolled by the
walker, names are looked up in the walker's own table, and only the functions listed in
``language``'s tables can be called. The contracts, the json parameters and
``parse_reply`` live in ``reply``; the package re-exports them with the walker's names.

Dtype policy: every tensor is float64 (inputs, parameters, constants, outputs).
Comparisons give 0.0/1.0. Integers exist only at compile time (loop variables, slice
bounds, shapes, axes).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import CompileError, TensorCodeError
from ..plans.tape import Tape
from ..trace.expr import Expr
from . import syntax_tree as ast
from .language import (
    BINARY_FUNCTIONS,
    COMPARISONS,
    CONSTANT_NAMES,
    DTYPE,
    FUNCTION_NAMES,
    INTEGER_OPERATORS,
    MAX_LITERAL_ELEMENTS,
    MAX_NODES,
    MAX_PARAMETER_ELEMENTS,
    MAX_RANK,
    MAX_STATIC_INT,
    MAX_TENSOR_ELEMENTS,
    MAX_UNROLLED_STATEMENTS,
    METHODS,
    OPERATORS,
    OTHER_FUNCTIONS,
    RESERVED_NAMES,
    UNARY_FUNCTIONS,
)
from .reply import normalize_contract, normalize_parameters, parse_reply
from .syntax import MODULE_NAMES, error, parse

_BUILTIN_HINTS = {
    "max": "use maximum(a, b) elementwise, or x.max() / x.max(axis=0) to reduce",
    "min": "use minimum(a, b) elementwise, or x.min() / x.min(axis=0) to reduce",
    "sum": "use x.sum() or x.sum(axis=0)",
    "len": "shapes are fixed by the contract; write the number",
    "float": "every value is already float64; remove float(...)",
    "int": "integers exist only for loop variables and bounds; remove int(...)",
    "round": "there is no rounding function; compare with thresholds instead",
    "print": "print does not compile; the only effect is the returned dict",
    "pow": "write a ** b",
    "argmax": "compare against x.max() and combine with where(...)",
    "sigmoid_": "use sigmoid(x)",
}


@dataclass(frozen=True)
class CompiledProgram:
    """A compiled author program: the sealed network and its named symbols.

    ``inputs``, ``parameters`` and ``outputs`` map names to the ``Expr`` symbols of the
    network, in contract order (parameters in the json block's order).
    """

    network: Any
    inputs: dict[str, Expr]
    parameters: dict[str, Expr]
    outputs: dict[str, Expr]
    source_sha256: str


# ---------------------------------------------------------------------------------------
# the compiler


Value = Any  # int | float (compile-time), np.ndarray (literal), tuple (shape), Expr


class _ConstantTape(Tape):
    """A tape that records each distinct scalar constant once (loops reuse them)."""

    def __init__(self) -> None:
        super().__init__()
        self._constants: dict[tuple, Expr] = {}

    def constant(self, value: Any, dtype: Any = None) -> Expr:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            key = (float(value), str(dtype))
            if key not in self._constants:
                self._constants[key] = self.leaf(value, dtype)
            return self._constants[key]
        return self.leaf(value, dtype)


class Compiler:
    """Walks a ``Module`` and records it on a tape (one instance per compile)."""

    def __init__(self, source: str, inputs: dict[str, tuple[int, ...]],
                 outputs: dict[str, tuple[int, ...]], parameters: dict[str, np.ndarray]):
        self.lines = source.split("\n")
        self.inputs = inputs
        self.outputs = outputs
        self.parameter_values = parameters
        self.tape = _ConstantTape()
        self.env: dict[str, Value] = {}
        self.unrolled = 0

    # -- errors ------------------------------------------------------------------------------
    def fail(self, node: Any, message: str) -> CompileError:
        return error(self.lines, getattr(node, "line", None), getattr(node, "column", None),
                     message)

    # -- entry -------------------------------------------------------------------------------
    def compile(self, module: ast.Module) -> tuple[dict, dict, dict]:
        (function,) = module.functions
        self.bind_arguments(function)
        body = function.body
        for index, statement in enumerate(body):
            if isinstance(statement, ast.Return):
                if index != len(body) - 1:
                    raise self.fail(body[index + 1], "statements after return never run; "
                                    "make return {...} the last statement")
                outputs = self.returned(statement)
                return self.input_symbols, self.parameter_symbols, outputs
            self.statement(statement)
        raise self.fail(function, "the function must end with return {...} naming the "
                        f"outputs {', '.join(self.outputs)}")

    def bind_arguments(self, function: ast.Function) -> None:
        names = [name for name, _, _ in function.arguments]
        for index, (name, line, column) in enumerate(function.arguments):
            if name in names[:index]:
                raise error(self.lines, line, column, f"the argument {name!r} appears twice")
            if name not in self.inputs and name not in self.parameter_values:
                known = ", ".join([*self.inputs, *self.parameter_values])
                raise error(self.lines, line, column,
                            f"{name!r} is neither a declared input nor a json parameter; "
                            f"the function takes exactly: {known}")
        missing = [n for n in [*self.inputs, *self.parameter_values] if n not in names]
        if missing:
            kinds = ["input" if n in self.inputs else "parameter" for n in missing]
            listed = ", ".join(f"{k} {n!r}" for k, n in zip(kinds, missing))
            arguments = ", ".join([*self.inputs, *self.parameter_values])
            raise self.fail(function, f"the function must take {listed} as arguments: "
                            f"def {function.name}({arguments})")
        self.input_symbols = {}
        for name, shape in self.inputs.items():
            symbol = self.tape.input(np.zeros(shape, dtype=DTYPE), name=name)
            self.input_symbols[name] = symbol
            self.env[name] = symbol
        self.parameter_symbols = {}
        for name, value in self.parameter_values.items():
            symbol = self.tape.parameter(value, name=name)
            self.parameter_symbols[name] = symbol
            self.env[name] = symbol

    # -- statements ----------------------------------------------------------------------------
    def statement(self, statement: Any) -> None:
        self.unrolled += 1
        if self.unrolled > MAX_UNROLLED_STATEMENTS:
            raise self.fail(statement, f"the program unrolls to more than "
                            f"{MAX_UNROLLED_STATEMENTS} statements; loops are unrolled at "
                            "compile time, so use vectorized methods (x.sum(), x @ w) "
                            "instead of long loops")
        if isinstance(statement, ast.Assign):
            self.check_target(statement, statement.target)
            self.env[statement.target] = self.evaluate(statement.value)
        elif isinstance(statement, ast.AugAssign):
            self.check_target(statement, statement.target)
            if statement.target not in self.env:
                raise self.fail(statement, f"{statement.target} {statement.op}= ... needs "
                                f"{statement.target} assigned first, e.g. "
                                f"{statement.target} = 0.0")
            self.env[statement.target] = self.binary(statement, statement.op,
                                                     self.env[statement.target],
                                                     self.evaluate(statement.value))
        elif isinstance(statement, ast.For):
            self.loop(statement)
        elif isinstance(statement, ast.Return):
            raise self.fail(statement, "return must be the last statement of the function, "
                            "outside any loop")
        elif isinstance(statement, ast.Pass):
            pass
        else:  # pragma: no cover - the tree builder makes only these
            raise self.fail(statement, "this statement does not compile")

    def check_target(self, statement: Any, name: str) -> None:
        if name in RESERVED_NAMES or name in MODULE_NAMES:
            raise self.fail(statement, f"{name!r} names a built-in; assign to another name")

    def loop(self, statement: ast.For) -> None:
        iterable = statement.iterable
        if not (isinstance(iterable, ast.Call) and iterable.function == "range"
                and iterable.receiver is None):
            raise self.fail(iterable, "for loops only run over range(a, b) with integer "
                            "bounds known at compile time; to visit elements write "
                            "for i in range(0, n): ... x.slice(i, i + 1).reshape()")
        if iterable.keywords or not 1 <= len(iterable.args) <= 3:
            raise self.fail(iterable, "range takes one to three integer arguments: "
                            "range(stop), range(start, stop) or range(start, stop, step)")
        bounds = [self.static_int(arg, "a range bound") for arg in iterable.args]
        if len(bounds) == 3 and bounds[2] == 0:
            raise self.fail(iterable, "range step must not be zero")
        values = range(*bounds)
        cost = _length(values) * statement.size
        if self.unrolled + cost > MAX_UNROLLED_STATEMENTS:
            raise self.fail(statement, f"this loop unrolls to {cost} statements, more than "
                            f"the limit {MAX_UNROLLED_STATEMENTS}; use vectorized methods "
                            "(x.sum(), x @ w, comparisons on whole tensors) instead")
        self.check_target(statement, statement.variable)
        for value in values:
            self.env[statement.variable] = value
            for inner in statement.body:
                self.statement(inner)

    def returned(self, statement: ast.Return) -> dict[str, Expr]:
        value = statement.value
        expected = ", ".join(f'"{n}": ...' for n in self.outputs)
        if not isinstance(value, ast.DictLiteral):
            raise self.fail(statement, "return a dict literal naming every output: "
                            f"return {{{expected}}}")
        produced: dict[str, Expr] = {}
        problems: list[str] = []
        for key, item in value.pairs:
            if not isinstance(key, ast.String):
                raise self.fail(key, "the returned dict's keys must be string literals "
                                f"naming the outputs: return {{{expected}}}")
            if key.value in produced:
                raise self.fail(key, f"the output {key.value!r} is returned twice")
            produced[key.value] = self.evaluate(item)
        missing = [n for n in self.outputs if n not in produced]
        extra = [n for n in produced if n not in self.outputs]
        if missing:
            problems.append("missing " + ", ".join(f"{n!r} (shape {list(self.outputs[n])})"
                                                   for n in missing))
        if extra:
            problems.append("not in the contract " + ", ".join(repr(n) for n in extra))
        symbols: dict[str, Expr] = {}
        for name, shape in self.outputs.items():
            if name not in produced:
                continue
            result = produced[name]
            if isinstance(result, (int, float, np.ndarray)):
                array = np.asarray(result, dtype=DTYPE)
                if array.shape not in (shape, ()):
                    problems.append(f"{name!r} has shape {list(array.shape)} but the "
                                    f"contract says {list(shape)}")
                    continue
                symbols[name] = self.tape.leaf(np.broadcast_to(array, shape).copy(), DTYPE)
                continue
            if not isinstance(result, Expr):
                problems.append(f"{name!r} is not a tensor")
                continue
            if result.shape != shape:
                hint = ("; use .reshape() to make it a scalar" if shape == () and
                        result.type.size == 1 else
                        f"; use .reshape{shape}" if result.type.size == math.prod(shape)
                        else "")
                problems.append(f"{name!r} has shape {list(result.shape)} but the contract "
                                f"says {list(shape)}{hint}")
                continue
            symbols[name] = result
        if problems:
            raise self.fail(statement, "the returned outputs do not match the contract: " +
                            "; ".join(problems) + f". Return exactly {{{expected}}}")
        return {name: symbols[name] for name in self.outputs}

    # -- expressions ---------------------------------------------------------------------------
    def evaluate(self, node: Any) -> Value:
        if isinstance(node, ast.Number):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node)
        if isinstance(node, ast.Binary):
            return self.binary(node, node.op, self.evaluate(node.left),
                               self.evaluate(node.right))
        if isinstance(node, ast.Unary):
            value = self.evaluate(node.operand)
            if node.op == "+":
                return value
            if self.is_static(value):
                return self.check_static(node, -value)
            return self.apply(node, "neg", [self.tensor(node, value)])
        if isinstance(node, ast.Compare):
            left, right = self.evaluate(node.left), self.evaluate(node.right)
            if self.is_static(left) and self.is_static(right):
                return 1.0 if _COMPARE[node.op](left, right) else 0.0
            return self.apply(node, COMPARISONS[node.op],
                              [self.tensor(node, left), self.tensor(node, right)])
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.ListLiteral):
            return self.list_literal(node)
        if isinstance(node, ast.TupleLiteral):
            return tuple(self.static_int(item, "a tuple item") for item in node.items)
        if isinstance(node, ast.String):
            raise self.fail(node, "strings do not compile outside the return dict keys")
        if isinstance(node, ast.DictLiteral):
            raise self.fail(node, "a dict only appears as the returned value: "
                            "return {\"name\": value, ...}")
        raise self.fail(node, "this expression does not compile")  # pragma: no cover

    def lookup(self, node: ast.Name) -> Value:
        name = node.id
        if name in self.env:
            return self.env[name]
        if name in CONSTANT_NAMES:
            return CONSTANT_NAMES[name]
        if name == "None":
            raise self.fail(node, "None does not compile; every value is a number or tensor")
        if name in MODULE_NAMES:
            raise self.fail(node, f"{name} does not exist: there are no modules; call the "
                            "built-in functions directly, e.g. exp(x)")
        if name in FUNCTION_NAMES or name == "range":
            raise self.fail(node, f"{name} is a function; call it, e.g. {name}(x)")
        known = ", ".join(self.env) or "(none yet)"
        raise self.fail(node, f"the name {name!r} is not defined here; assign it before this "
                        f"line (names defined so far: {known})")

    # -- values --------------------------------------------------------------------------------
    @staticmethod
    def is_static(value: Value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def check_static(self, node: Any, value: Any) -> Value:
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, complex):
            raise self.fail(node, "this arithmetic on numbers has no real result")
        if isinstance(value, int):
            if abs(value) > MAX_STATIC_INT:
                raise self.fail(node, f"the integer {value:.3e} is too large; keep "
                                f"compile-time integers below 2**53")
            return value
        if not math.isfinite(value):
            raise self.fail(node, "this arithmetic on numbers overflows or is undefined; "
                            "use finite values")
        return value

    def static_int(self, node: Any, what: str) -> int:
        value = self.evaluate(node)
        if isinstance(value, float) and value.is_integer() and isinstance(node, ast.Number):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            kind = "a tensor" if isinstance(value, Expr) else type(value).__name__
            raise self.fail(node, f"{what} must be an integer known at compile time (a "
                            f"literal, a loop variable, or arithmetic on them), got {kind}")
        return value

    def tensor(self, node: Any, value: Value) -> Expr:
        """A value as a float64 tensor: numbers and literal arrays become constants."""
        if isinstance(value, Expr):
            return value
        if self.is_static(value):
            return self.tape.constant(float(value), DTYPE)
        if isinstance(value, np.ndarray):
            return self.tape.leaf(value, DTYPE)
        if isinstance(value, tuple):
            raise self.fail(node, "a tuple only appears as a shape or axes, e.g. "
                            "x.reshape((3, 4)) or x.sum(axis=(0, 1))")
        raise self.fail(node, "this value is not a tensor")  # pragma: no cover

    def apply(self, node: Any, op: str, inputs: list[Expr],
              attrs: dict[str, Any] | None = None) -> Expr:
        return self.guard(node, lambda: self.tape.apply(op, inputs, attrs))

    def guard(self, node: Any, build: Callable[[], Expr]) -> Expr:
        """Run one recording step, turning the op's own complaint (which names the op and
        the shapes) into a ``CompileError`` at ``node``."""
        try:
            result = build()
        except CompileError:
            raise
        except TensorCodeError as exc:
            raise self.fail(node, f"{exc}") from None
        if result.type.size > MAX_TENSOR_ELEMENTS:
            raise self.fail(node, f"this produces a tensor of shape {list(result.shape)}, "
                            f"more than {MAX_TENSOR_ELEMENTS} elements; check the shapes")
        if len(self.tape) > MAX_NODES:
            raise self.fail(node, f"the program records more than {MAX_NODES} operations; "
                            "use vectorized methods instead of long loops")
        return result

    def binary(self, node: Any, op: str, left: Value, right: Value) -> Value:
        if self.is_static(left) and self.is_static(right):
            return self.fold(node, op, left, right)
        if op in INTEGER_OPERATORS:
            raise self.fail(node, f"'{op}' only works on integers known at compile time (loop "
                            "variables); tensors have no floor division or remainder")
        return self.apply(node, OPERATORS[op], [self.tensor(node, left),
                                                self.tensor(node, right)])

    def fold(self, node: Any, op: str, left: Any, right: Any) -> Value:
        """Arithmetic on two compile-time numbers (loop indices, literals)."""
        if op == "@":
            raise self.fail(node, "@ needs tensors with at least one axis, not numbers")
        if op == "**" and isinstance(left, int) and isinstance(right, int) and (
                right > 64 and abs(left) > 1):
            raise self.fail(node, "this integer power is too large")
        try:
            result = _FOLD[op](left, right)
        except ZeroDivisionError:
            raise self.fail(node, "division by zero in compile-time arithmetic") from None
        except OverflowError:
            raise self.fail(node, "this arithmetic on numbers overflows float64") from None
        return self.check_static(node, result)

    def list_literal(self, node: ast.ListLiteral) -> Value:
        if not node.items:
            raise self.fail(node, "an empty list does not compile; a tensor needs at least "
                            "one element")
        values = [self.evaluate(item) for item in node.items]
        if all(self.is_static(v) or isinstance(v, np.ndarray) for v in values):
            arrays = [np.asarray(v, dtype=DTYPE) for v in values]
            shapes = {a.shape for a in arrays}
            if len(shapes) > 1:
                raise self.fail(node, "the rows of this list literal have different shapes "
                                f"{sorted(list(s) for s in shapes)}; make every row the same "
                                "length")
            if sum(a.size for a in arrays) > MAX_LITERAL_ELEMENTS or arrays[0].ndim >= MAX_RANK:
                raise self.fail(node, f"this list literal is larger than "
                                f"{MAX_LITERAL_ELEMENTS} numbers or rank {MAX_RANK}; put large "
                                "weights in the json parameters")
            stacked = np.stack(arrays)
            stacked.flags.writeable = False
            return stacked
        tensors = [self.tensor(item, v) for item, v in zip(node.items, values)]
        shapes = {t.shape for t in tensors}
        if len(shapes) > 1:
            listed = " and ".join(str(list(s)) for s in sorted(shapes))
            raise self.fail(node, f"the items of this list have shapes {listed}; a list "
                            "stacks items of one shape (use .reshape() to make scalars)")
        rows = [self.guard(item, functools.partial(t.reshape, (1,) + t.shape))
                for item, t in zip(node.items, tensors)]
        if len(rows) == 1:
            return rows[0]
        return self.apply(node, "concat", rows, {"axis": 0})

    # -- calls ---------------------------------------------------------------------------------
    def call(self, node: ast.Call) -> Value:
        if node.receiver is not None:
            return self.method(node)
        name = node.function
        if name in self.env and name not in FUNCTION_NAMES:
            raise self.fail(node, f"{name} is a value, not a function; only the built-in "
                            "functions can be called")
        if name in UNARY_FUNCTIONS:
            (x,) = self.arguments(node, ["x"])
            return self.apply(node, UNARY_FUNCTIONS[name], [self.tensor(node, x)])
        if name in BINARY_FUNCTIONS:
            a, b = self.arguments(node, ["a", "b"])
            return self.apply(node, BINARY_FUNCTIONS[name],
                              [self.tensor(node, a), self.tensor(node, b)])
        if name == "where":
            condition, a, b = self.arguments(node, ["condition", "a", "b"])
            return self.apply(node, "where", [self.tensor(node, condition),
                                              self.tensor(node, a), self.tensor(node, b)])
        if name == "clip":
            x, low, high = self.arguments(node, ["x", "low", "high"])
            lower = self.apply(node, "maximum", [self.tensor(node, x), self.tensor(node, low)])
            return self.apply(node, "minimum", [lower, self.tensor(node, high)])
        if name == "range":
            raise self.fail(node, "range(...) only appears in 'for i in range(a, b):'")
        hint = _BUILTIN_HINTS.get(name)
        listed = ", ".join(sorted(FUNCTION_NAMES))
        raise self.fail(node, f"{name}(...) is not a function of the language"
                        + (f"; {hint}" if hint else f"; the functions are {listed}"))

    def arguments(self, node: ast.Call, names: list[str],
                  defaults: Mapping[str, Any] | None = None) -> list[Value]:
        """Bind positional and keyword arguments to ``names`` (evaluated)."""
        defaults = dict(defaults or {})
        label = node.function + "(" + ", ".join(names) + ")"
        if len(node.args) > len(names):
            raise self.fail(node, f"{node.function} takes at most {len(names)} arguments: "
                            f"{label}")
        bound: dict[str, Any] = dict(zip(names, node.args))
        for keyword in node.keywords:
            if keyword.name not in names or keyword.name not in defaults:
                raise self.fail(keyword, f"{node.function} has no keyword argument "
                                f"{keyword.name!r}; call it as {label}")
            if keyword.name in bound:
                raise self.fail(keyword, f"{keyword.name!r} is given twice")
            bound[keyword.name] = keyword.value
        missing = [n for n in names if n not in bound and n not in defaults]
        if missing:
            raise self.fail(node, f"{node.function} needs {', '.join(missing)}: {label}")
        return [self.evaluate(bound[n]) if n in bound else defaults[n] for n in names]

    def method(self, node: ast.Call) -> Value:
        name = node.function
        if name not in METHODS and name not in UNARY_FUNCTIONS:
            listed = ", ".join([*METHODS, *UNARY_FUNCTIONS])
            raise self.fail(node, f".{name}(...) is not a method of the language; the "
                            f"methods are {listed}")
        receiver = self.tensor(node.receiver, self.evaluate(node.receiver))
        if name in UNARY_FUNCTIONS:
            self.arguments(node, [])
            return self.apply(node, UNARY_FUNCTIONS[name], [receiver])
        if name == "dot":
            (other,) = self.arguments(node, ["other"])
            return self.apply(node, "matmul", [receiver, self.tensor(node, other)])
        if name == "slice":
            start, stop, axis = self.arguments(node, ["start", "stop", "axis"], {"axis": 0})
            start, stop = (self.as_int(node, v, "slice bounds") for v in (start, stop))
            axis = self.as_int(node, axis, "the axis")
            result = self.guard(node, lambda: receiver.slice(start, stop, axis=axis))
            if result.type.size == 0:
                raise self.fail(node, f"slice({start}, {stop}) of shape "
                                f"{list(receiver.shape)} is empty; the stop must be after "
                                "the start")
            return result
        if name == "reshape":
            if node.keywords:
                raise self.fail(node, "reshape takes the new shape as integers: "
                                "x.reshape(3, 4), x.reshape((3, 4)) or x.reshape() for a "
                                "scalar")
            dims = [self.evaluate(arg) for arg in node.args]
            if len(dims) == 1 and isinstance(dims[0], tuple):
                dims = list(dims[0])
            shape = tuple(self.as_int(node, d, "reshape sizes") for d in dims)
            if len(shape) > MAX_RANK:
                raise self.fail(node, f"reshape to rank {len(shape)} exceeds rank {MAX_RANK}")
            return self.guard(node, lambda: receiver.reshape(shape))
        # sum mean max min
        axis, keepdims = self.arguments(node, ["axis", "keepdims"],
                                        {"axis": None, "keepdims": 0})
        if axis is not None:
            axis = (tuple(self.as_int(node, a, "axis") for a in axis)
                    if isinstance(axis, tuple) else self.as_int(node, axis, "axis"))
        keep = self.as_int(node, keepdims, "keepdims")
        if receiver.ndim == 0 and axis is None:
            return receiver
        return self.guard(node, lambda: getattr(receiver, name)(axis=axis,
                                                                keepdims=bool(keep)))

    def as_int(self, node: Any, value: Value, what: str) -> int:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return value
        kind = "a tensor" if isinstance(value, Expr) else type(value).__name__
        raise self.fail(node, f"{what} must be integers known at compile time (literals, "
                        f"loop variables, or arithmetic on them), got {kind}")


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def _true_divide(a: Any, b: Any) -> float:
    return a / b


_FOLD: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": _true_divide, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b}


def compile_program(source: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any],
                    parameters: Mapping[str, Any] | None = None) -> CompiledProgram:
    """Parse and compile ``source`` against the input and output contracts.

    Every rejection is a ``CompileError`` with the line, column, offending source line
    and an instruction. The result's network holds every recorded node; callers that
    keep artifacts prune it to what the outputs need.
    """
    input_shapes = normalize_contract(inputs, "inputs")
    output_shapes = normalize_contract(outputs, "outputs")
    module = parse(source)
    try:
        values = normalize_parameters(parameters, reserved=tuple(input_shapes))
    except CompileError as exc:  # the author's json block: point at the function it feeds
        function = module.functions[0]
        raise error(source.split("\n"), function.line, function.column,
                    f"the json parameters are not usable: {exc.message}") from None
    compiler = Compiler(source, input_shapes, output_shapes, values)
    try:
        input_symbols, parameter_symbols, output_symbols = compiler.compile(module)
    except RecursionError:  # bounded depths make this unreachable; never leak it
        raise CompileError("the program nests too deeply to compile; split long "
                           "expressions into several assignments", 1, 1) from None
    network = compiler.tape.into_network()
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    return CompiledProgram(network, input_symbols, parameter_symbols, output_symbols, digest)



def _length(values: range) -> int:
    """How many values ``values`` holds, for any bounds: ``len`` overflows past
    ``sys.maxsize`` (``range(1e308)``), and the count only has to be compared with the
    unroll limit."""
    step = values.step
    span = values.stop - values.start if step > 0 else values.start - values.stop
    return max(0, -(-span // abs(step)))

__all__ = ["compile_program", "parse_reply", "CompiledProgram", "normalize_contract",
           "normalize_parameters", "DTYPE", "UNARY_FUNCTIONS", "BINARY_FUNCTIONS",
           "OTHER_FUNCTIONS", "METHODS", "OPERATORS", "COMPARISONS", "INTEGER_OPERATORS",
           "CONSTANT_NAMES", "FUNCTION_NAMES", "MAX_UNROLLED_STATEMENTS", "MAX_NODES",
           "MAX_LITERAL_ELEMENTS", "MAX_TENSOR_ELEMENTS", "MAX_PARAMETER_ELEMENTS"]

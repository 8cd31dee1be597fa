"""The LLVM backend's lowering table: each elementwise registry op as LLVM IR.

``LOWERINGS[op](b, args, out)`` emits one element of ``op`` (``args`` its operands'
values, ``out`` the result's dtype and ``operand`` operand 0's) with ``b``, an
``ir.IRBuilder`` positioned in the loop body. Each entry computes exactly what the
registry's Numba template computes, operation for operation (the same IEEE operations
in the same order, the same intrinsics or libm functions, NaN-propagating ``maximum``
and ``minimum``), so where both backends run the same order the results are the same
bits. The float32 approximations are not rows: they are scalar graphs of these ops
(``lower/approximations.py``), which the renderer expands unless exact math was asked for.

A libm function is called by the name in ``LIBM``; those names are part of the
symbol allowlist of a compiled plan's object (``objects.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from .interface import LIBM
from .types import TYPES, constant, convert, is_float


@dataclass(frozen=True)
class Element:
    """What a lowering sees: the builder, the result dtype and operand 0's dtype."""

    b: ir.IRBuilder
    out: str
    operand: str

    def const(self, value: float | int, dtype: str | None = None) -> ir.Constant:
        return constant(value, dtype or self.out)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        fn = self.b.module.declare_intrinsic(name, [args[0].type])
        return self.b.call(fn, list(args))

    def libm(self, name: str, x: ir.Value) -> ir.Value:
        symbol = LIBM[name][1 if self.out == "float32" else 0]
        module = self.b.module
        fn = module.globals.get(symbol)
        if fn is None:
            ty = TYPES[self.out]
            fn = ir.Function(module, ir.FunctionType(ty, [ty]), symbol)
        return self.b.call(fn, [x])

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(cond, a, b)

    def where_one(self, cond: ir.Value) -> ir.Value:
        return self.select(cond, self.const(1), self.const(0))


Lowering = Callable[[Element, Sequence[ir.Value]], ir.Value]


def _float_or_int(on_float: str, on_int: str) -> Lowering:
    def lower(e: Element, args: Sequence[ir.Value]) -> ir.Value:
        return getattr(e.b, on_float if is_float(e.out) else on_int)(*args)
    return lower


def _neg(e: Element, args: Sequence[ir.Value]) -> ir.Value:
    (x,) = args
    return e.b.fneg(x) if is_float(e.out) else e.b.sub(e.const(0), x)


def _abs(e: Element, args: Sequence[ir.Value]) -> ir.Value:
    (x,) = args
    if is_float(e.out):
        return e.intrinsic("llvm.fabs", x)
    return e.select(e.b.icmp_signed("<", x, e.const(0)), e.b.sub(e.const(0), x), x)


def maximum(e: Element, a: ir.Value, b: ir.Value, pick: str = ">=") -> ir.Value:
    """``np.maximum`` (``pick`` ``>=``) or ``np.minimum`` (``<=``) of two scalars: a NaN
    operand wins (the first if both are), ties go to the first."""
    if not is_float(e.out):
        return e.select(e.b.icmp_signed(pick, a, b), a, b)
    first_nan = e.b.fcmp_unordered("uno", a, a)
    any_nan = e.b.fcmp_unordered("uno", a, b)
    numbers = e.select(e.b.fcmp_ordered(pick, a, b), a, b)
    return e.select(any_nan, e.select(first_nan, a, b), numbers)


def _compare(symbol: str) -> Lowering:
    def lower(e: Element, args: Sequence[ir.Value]) -> ir.Value:
        a, b = args
        if is_float(e.operand):
            # Python's ``!=`` is true for NaN (unordered); every other test is ordered
            test = e.b.fcmp_unordered(symbol, a, b) if symbol == "!=" else \
                e.b.fcmp_ordered(symbol, a, b)
        else:
            test = e.b.icmp_signed(symbol, a, b)
        return e.where_one(test)
    return lower


def _where(e: Element, args: Sequence[ir.Value]) -> ir.Value:
    cond, a, b = args
    zero = e.const(0, e.operand)
    test = e.b.fcmp_unordered("!=", cond, zero) if is_float(e.operand) else \
        e.b.icmp_signed("!=", cond, zero)
    return e.select(test, a, b)


def _exp(e: Element, x: ir.Value) -> ir.Value:
    return e.intrinsic("llvm.exp", x)


def _sigmoid(e: Element, args: Sequence[ir.Value]) -> ir.Value:
    (x,) = args
    one = e.const(1)
    b = e.b
    positive = b.fdiv(one, b.fadd(one, _exp(e, b.fneg(x))))
    t = _exp(e, x)
    negative = b.fdiv(t, b.fadd(one, t))
    return e.select(b.fcmp_ordered(">=", x, e.const(0)), positive, negative)


def _softplus(e: Element, args: Sequence[ir.Value]) -> ir.Value:
    (x,) = args
    b = e.b
    small = e.libm("log1p", _exp(e, b.fneg(e.intrinsic("llvm.fabs", x))))
    return b.fadd(small, maximum(e, x, e.const(0)))


def _astype(e: Element, args: Sequence[ir.Value]) -> ir.Value:
    return convert(e.b, args[0], e.operand, e.out)


LOWERINGS: dict[str, Lowering] = {
    "neg": _neg,
    "exp": lambda e, a: _exp(e, a[0]),
    "log": lambda e, a: e.intrinsic("llvm.log", a[0]),
    "log1p": lambda e, a: e.libm("log1p", a[0]),
    "tanh": lambda e, a: e.libm("tanh", a[0]),
    "sigmoid": _sigmoid,
    "relu": lambda e, a: maximum(e, a[0], e.const(0)),
    "sqrt": lambda e, a: e.intrinsic("llvm.sqrt", a[0]),
    "abs": _abs,
    "sin": lambda e, a: e.intrinsic("llvm.sin", a[0]),
    "cos": lambda e, a: e.intrinsic("llvm.cos", a[0]),
    "erf": lambda e, a: e.libm("erf", a[0]),
    "softplus": _softplus,
    "detach": lambda e, a: a[0],
    "add": _float_or_int("fadd", "add"),
    "sub": _float_or_int("fsub", "sub"),
    "mul": _float_or_int("fmul", "mul"),
    "div": lambda e, a: e.b.fdiv(a[0], a[1]),
    "pow": lambda e, a: e.intrinsic("llvm.pow", a[0], a[1]),
    "maximum": lambda e, a: maximum(e, a[0], a[1], ">="),
    "minimum": lambda e, a: maximum(e, a[0], a[1], "<="),
    "lt": _compare("<"), "le": _compare("<="), "gt": _compare(">"),
    "ge": _compare(">="), "eq": _compare("=="), "ne": _compare("!="),
    "where": _where,
    "astype": _astype,
    # the bit operations scalar graphs build numbers from
    "floor": lambda e, a: e.intrinsic("llvm.floor", a[0]),
    "shift_left": lambda e, a: e.b.shl(a[0], a[1]),
    "shift_right": lambda e, a: e.b.ashr(a[0], a[1]),
    "bitcast": lambda e, a: e.b.bitcast(a[0], TYPES[e.out]),
    "bitwise_and": lambda e, a: e.b.and_(a[0], a[1]),
    "bitwise_or": lambda e, a: e.b.or_(a[0], a[1]),
    "bitwise_xor": lambda e, a: e.b.xor(a[0], a[1]),
    "mul_wide": lambda e, a: e.b.mul(a[0], a[1]),  # no overflow flags: it wraps
}


__all__ = ["LOWERINGS", "Element", "maximum"]

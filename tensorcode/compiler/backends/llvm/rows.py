"""The second pass of a reduction over the innermost loop: a row of terms reduced.

The fused loop stores each term in a row of scratch; these functions reduce the row
(``intrinsics.row_sum``/``row_max``/``row_min`` of the Numba backend, as IR): the sum
accumulates in float64 with reassociation allowed on that one add (so LLVM vectorizes
it; the float64 sum of float32 terms rounds far below the float32 rounding that
follows), the maximum and minimum first scan the row for NaN, then reduce a row known to
hold none with comparisons free to ignore NaN and the sign of zero. No other
instruction of a plan carries a fast-math flag.
"""

from __future__ import annotations

from llvmlite import ir

from .types import F64, I1, I64, PTR, TYPES, constant, convert, i64, load, loop


class RowReductions:
    """The row functions of one module, each defined on first use."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module

    def call(self, b: ir.IRBuilder, op: str, dtype: str, row: ir.Value, n: int) -> ir.Value:
        """``op`` (sum, mean, max, min) of the ``n`` terms at ``row``: a float64 for a
        sum or mean, a ``dtype`` value otherwise."""
        kind = "sum" if op in ("sum", "mean") else op
        name = f"row_{kind}_{dtype}"
        fn = self.module.globals.get(name)
        if fn is None:
            fn = self._sum(name, dtype) if kind == "sum" else self._extreme(name, dtype, kind)
        return b.call(fn, [row, i64(n)])

    def _function(self, name: str, result: ir.Type) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(self.module, ir.FunctionType(result, [PTR, I64]), name)
        fn.linkage = "internal"
        fn.args[0].add_attribute("noalias")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def _sum(self, name: str, dtype: str) -> ir.Function:
        fn, b = self._function(name, F64)
        row, n = fn.args
        total = b.alloca(F64)
        b.store(constant(0.0, "float64"), total)
        with loop(b, n, "k") as k:
            term = convert(b, load(b, row, dtype, k), dtype, "float64")
            b.store(b.fadd(b.load(total, typ=F64), term, flags=["reassoc"]), total)
        b.ret(b.load(total, typ=F64))
        return fn

    def _extreme(self, name: str, dtype: str, kind: str) -> ir.Function:
        ty = TYPES[dtype]
        fn, b = self._function(name, ty)
        row, n = fn.args
        found = b.alloca(I1)
        b.store(ir.Constant(I1, 0), found)
        with loop(b, n, "k") as k:
            x = load(b, row, dtype, k)
            b.store(b.or_(b.load(found, typ=I1), b.fcmp_unordered("uno", x, x)), found)
        has_nan = fn.append_basic_block("nan")
        numbers = fn.append_basic_block("numbers")
        b.cbranch(b.load(found, typ=I1), has_nan, numbers)
        b.position_at_end(has_nan)
        b.ret(constant(float("nan"), dtype))
        b.position_at_end(numbers)
        best = b.alloca(ty)
        b.store(load(b, row, dtype, i64(0)), best)
        flags = ["nnan", "nsz"]
        with loop(b, b.sub(n, i64(1)), "k") as k:
            x = load(b, row, dtype, b.add(k, i64(1)))
            current = b.load(best, typ=ty)
            better = b.fcmp_ordered(">" if kind == "max" else "<", x, current, flags=flags)
            b.store(b.select(better, x, current, flags=flags), best)
        b.ret(b.load(best, typ=ty))
        return fn


__all__ = ["RowReductions"]

"""A profiled plan's counters: cycles around each kernel call of ``body``, read back.

``Counters(module, n)`` adds the module's counter table (``n`` kernels' cycles, then the
number of ``body`` calls), ``start``/``stop`` around a kernel call add the cycle counter's
difference (``llvm.readcyclecounter``: an instruction, no symbol to resolve) to the
kernel's slot, and ``entry()`` writes ``tc_profile``: ``arrays[0]`` (int64, n + 2) receives
the cycles, the calls and the counter's value now; a positive ``lr`` zeroes the table
after the copy (see ``backends/profiling.py``).
"""

from __future__ import annotations

from llvmlite import ir

from .interface import PROFILE_ENTRY
from .types import ENTRY_TYPE, I64, PTR, i32, i64


class Counters:
    def __init__(self, module: ir.Module, n: int) -> None:
        self.module, self.n = module, n
        self.table = ir.GlobalVariable(module, ir.ArrayType(I64, n + 1), "tc_counters")
        self.table.linkage = "internal"
        self.table.initializer = ir.Constant(ir.ArrayType(I64, n + 1), [0] * (n + 1))
        self.clock = ir.Function(module, ir.FunctionType(I64, []), "llvm.readcyclecounter")

    def _slot(self, b: ir.IRBuilder, k: int) -> ir.Value:
        # an opaque pointer to the table (llvmlite types a global's element pointers
        # as the whole array's, which a store refuses)
        table = b.inttoptr(b.ptrtoint(self.table, I64), PTR)
        return b.gep(table, [i64(k)], inbounds=True, source_etype=I64)

    def _add(self, b: ir.IRBuilder, k: int, value: ir.Value) -> None:
        slot = self._slot(b, k)
        b.store(b.add(b.load(slot, typ=I64), value), slot)

    def called(self, b: ir.IRBuilder) -> None:
        """Count one call of ``body``."""
        self._add(b, self.n, i64(1))

    def start(self, b: ir.IRBuilder) -> ir.Value:
        return b.call(self.clock, [])

    def stop(self, b: ir.IRBuilder, k: int, started: ir.Value) -> None:
        self._add(b, k, b.sub(b.call(self.clock, []), started))

    def entry(self) -> None:
        fn = ir.Function(self.module, ENTRY_TYPE, PROFILE_ENTRY)
        arrays, _, reset = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        out = b.load(arrays, typ=PTR)
        for k in range(self.n + 1):
            slot = self._slot(b, k)
            b.store(b.load(slot, typ=I64), b.gep(out, [i64(k)], inbounds=True, source_etype=I64))
        b.store(b.call(self.clock, []), b.gep(out, [i64(self.n + 1)], inbounds=True,
                                              source_etype=I64))
        with b.if_then(b.fcmp_ordered(">", reset, ir.Constant(reset.type, 0.0))):
            for k in range(self.n + 1):
                b.store(i64(0), self._slot(b, k))
        b.ret(i32(0))


__all__ = ["Counters"]

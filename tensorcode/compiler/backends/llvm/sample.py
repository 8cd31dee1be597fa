"""A categorical draw (``loops.Sample``) as IR: ``philox.categorical_row`` per row.

Each row's scaled logits are sorted in descending order by a stable merge sort (ties:
the lower index first, as NumPy's and Numba's ``argsort(kind="mergesort")``), the
cumulative weights taken over ``philox.exp`` (written here operation for operation), then
the top-k and top-p cut and the inverse CDF at the row's uniform, which the loop program
drew before (``lower/random_fills.py``), all in scratch the plan provides. The Philox
stream itself is not here: it is loop-program statements every backend renders alike.
"""

from __future__ import annotations

import math

from llvmlite import ir

from ...core import philox
from ...lower.statements import Sample
from .types import F64, I64, convert, i64, load, loop, store


def _f64(value: float) -> ir.Constant:
    return ir.Constant(F64, float(value))


class Sampler:
    """Renders ``Sample`` statements."""

    def categorical(self, b: ir.IRBuilder, s: Sample, out: ir.Value, logits: ir.Value,
                    uniforms: ir.Value,
                    room: tuple[ir.Value, ir.Value, ir.Value, ir.Value]) -> None:
        """``random_kernels.sample_rows``: one index per contiguous row of ``logits``,
        ``uniforms`` the rows' uniforms, ``room`` the scaled row, the cumulative
        weights, the order and the merge's workspace."""
        z, cumulative, order, work = room
        dtype, classes = s.logits.dtype, int(s.logits.shape[-1])
        temperature = _f64(float(s.attrs["temperature"]))
        top_k, top_p = int(s.attrs["top_k"]), float(s.attrs["top_p"])
        fn = b.function
        with loop(b, s.out.size, "row") as r:
            row = b.mul(r, i64(classes))
            with loop(b, classes, "col") as j:
                x = convert(b, load(b, logits, dtype, b.add(row, j)), dtype, "float64")
                store(b, b.fdiv(x, temperature), z, "float64", j)
            u = load(b, uniforms, "float64", r)
            index = self._categorical_row(b, fn, z, cumulative, order, work, classes, u,
                                          top_k, top_p)
            store(b, index, out, "int64", r)

    @staticmethod
    def _intrinsic(b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
        return b.call(b.module.declare_intrinsic(name, [x.type]), [x])

    def _categorical_row(self, b: ir.IRBuilder, fn: ir.Function, z: ir.Value,
                         cumulative: ir.Value, order: ir.Value, work: ir.Value, n: int,
                         u: ir.Value, top_k: int, top_p: float) -> ir.Value:
        """``philox.categorical_row`` over the ``n`` scaled logits at ``z``."""
        self._sort_descending(b, fn, z, order, work, n)
        result = _slot(b, fn, I64)
        first = load(b, order, "int64", i64(0))
        top = load(b, z, "float64", first)
        done = fn.append_basic_block("cat.done")
        numbers = fn.append_basic_block("cat.numbers")
        b.store(first, result)
        b.cbranch(b.fcmp_ordered(">", top, _f64(-math.inf)), numbers, done)
        b.position_at_end(numbers)
        limit = n if top_k <= 0 or top_k > n else top_k
        total = _slot(b, fn, F64)
        b.store(_f64(0.0), total)
        with loop(b, limit, "cum") as j:
            x = b.fsub(load(b, z, "float64", load(b, order, "int64", j)), top)
            value = b.fadd(b.load(total, typ=F64), self._exp(b, x))
            b.store(value, total)
            store(b, value, cumulative, "float64", j)
        keep = _slot(b, fn, I64)
        b.store(i64(limit), keep)
        if top_p < 1.0:
            goal = b.fmul(_f64(top_p), b.load(total, typ=F64))
            b.store(i64(1), keep)
            head = fn.append_basic_block("topp.head")
            body = fn.append_basic_block("topp.body")
            end = fn.append_basic_block("topp.end")
            b.branch(head)
            b.position_at_end(head)
            k = b.load(keep, typ=I64)
            more = b.icmp_signed("<", k, i64(limit))
            below = b.fcmp_ordered("<", load(b, cumulative, "float64", b.sub(k, i64(1))), goal)
            b.cbranch(b.and_(more, below), body, end)
            b.position_at_end(body)
            b.store(b.add(k, i64(1)), keep)
            b.branch(head)
            b.position_at_end(end)
        kept = b.load(keep, typ=I64)
        last = b.sub(kept, i64(1))
        target = b.fmul(u, load(b, cumulative, "float64", last))
        b.store(load(b, order, "int64", last), result)
        head = fn.append_basic_block("pick.head")
        body = fn.append_basic_block("pick.body")
        found = fn.append_basic_block("pick.found")
        step = fn.append_basic_block("pick.next")
        position = _slot(b, fn, I64)
        b.store(i64(0), position)
        b.branch(head)
        b.position_at_end(head)
        j = b.load(position, typ=I64)
        b.cbranch(b.icmp_signed("<", j, kept), body, done)
        b.position_at_end(body)
        b.cbranch(b.fcmp_ordered(">", load(b, cumulative, "float64", j), target), found, step)
        b.position_at_end(found)
        b.store(load(b, order, "int64", j), result)
        b.branch(done)
        b.position_at_end(step)
        b.store(b.add(j, i64(1)), position)
        b.branch(head)
        b.position_at_end(done)
        return b.load(result, typ=I64)

    def _sort_descending(self, b: ir.IRBuilder, fn: ir.Function, z: ir.Value,
                         order: ir.Value, work: ir.Value, n: int) -> None:
        """``order`` = the indices of ``z`` by descending value, ties by index (a
        bottom-up stable merge sort of ``-z``; NaN last)."""
        with loop(b, n, "ord") as j:
            store(b, j, order, "int64", j)
        width = 1
        source, target = order, work
        while width < n:  # the passes are unrolled: ``n`` is a constant
            with loop(b, -(-n // (2 * width)), "run") as q:
                lo = b.mul(q, i64(2 * width))
                mid = _min(b, b.add(lo, i64(width)), n)
                hi = _min(b, b.add(lo, i64(2 * width)), n)
                left, right = _slot(b, fn, I64), _slot(b, fn, I64)
                b.store(lo, left)
                b.store(mid, right)
                with loop(b, b.sub(hi, lo), "merge") as m:
                    i, j = b.load(left, typ=I64), b.load(right, typ=I64)
                    left_done = b.icmp_signed(">=", i, mid)
                    right_open = b.icmp_signed("<", j, hi)
                    # read inside bounds only: a finished side is read at a valid index
                    li = b.select(left_done, lo, i)
                    rj = b.select(right_open, j, lo)
                    a_index = load(b, source, "int64", li)
                    c_index = load(b, source, "int64", rj)
                    a = b.fneg(load(b, z, "float64", a_index))
                    c = b.fneg(load(b, z, "float64", c_index))
                    right_first = b.or_(b.fcmp_ordered("<", c, a),
                                        b.and_(b.fcmp_unordered("uno", a, a),
                                               b.fcmp_ordered("ord", c, c)))
                    take_right = b.and_(right_open, b.or_(left_done, right_first))
                    store(b, b.select(take_right, c_index, a_index), target, "int64",
                          b.add(lo, m))
                    b.store(b.select(take_right, i, b.add(i, i64(1))), left)
                    b.store(b.select(take_right, b.add(j, i64(1)), j), right)
            source, target = target, source
            width *= 2
        if source is not order:
            with loop(b, n, "back") as j:
                store(b, load(b, source, "int64", j), order, "int64", j)

    def _exp(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """``philox.exp`` for ``x <= 0``: ``2**k e**r``, ``ldexp`` rounding once."""
        k = self._intrinsic(b, "llvm.floor", b.fadd(b.fdiv(x, _f64(philox.LN2)), _f64(0.5)))
        r = b.fsub(b.fsub(x, b.fmul(k, _f64(philox.LN2_HI))), b.fmul(k, _f64(philox.LN2_LO)))
        term: ir.Value = _f64(1.0)
        for n in range(16, 0, -1):
            term = b.fadd(_f64(1.0), b.fdiv(b.fmul(r, term), _f64(float(n))))
        # ldexp(term, k), k in [-1075, 0]: exact scaling to a normal number first, then
        # one multiplication that rounds (if the result is subnormal) exactly once
        ki = b.fptosi(b.select(b.fcmp_ordered("<", x, _f64(-745.0)), _f64(0.0), k), I64)
        low = b.icmp_signed("<", ki, i64(-1022))
        first = b.select(low, b.add(ki, i64(54)), ki)
        scaled = b.fmul(term, _pow2_f64(b, first))
        value = b.select(low, b.fmul(scaled, _f64(2.0 ** -54)), scaled)
        return b.select(b.fcmp_ordered("<", x, _f64(-745.0)), _f64(0.0), value)


def _pow2_f64(b: ir.IRBuilder, k: ir.Value) -> ir.Value:
    """``2.0 ** k`` for an i64 ``k`` in [-1022, 1023] (exponent bits)."""
    return b.bitcast(b.shl(b.add(k, i64(1023)), i64(52)), F64)


def _min(b: ir.IRBuilder, value: ir.Value, limit: int) -> ir.Value:
    return b.select(b.icmp_signed("<", value, i64(limit)), value, i64(limit))


def _slot(b: ir.IRBuilder, fn: ir.Function, ty: ir.Type) -> ir.Value:
    """A stack slot in the function's entry block (promoted to a register by LLVM)."""
    entry = fn.entry_basic_block
    with b.goto_block(entry):
        b.position_at_start(entry)
        slot = b.alloca(ty)
    return slot


__all__ = ["Sampler"]

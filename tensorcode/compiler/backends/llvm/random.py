"""The random fills as IR: the Philox stream of ``compiler/core/philox.py``, bit for bit.

Each fill walks the counter blocks of one random node and writes its output flat,
element ``e`` from words ``e * words ...`` of the stream, exactly as the Numba backend's
``random_kernels`` do: the Philox-4x32-10 rounds in 32-bit integers with 64-bit
products, the exact conversions of words to floats, and for normals the Box-Muller
transform over ``philox.log`` and ``philox.cos_turns``, written here operation for
operation in IEEE double arithmetic (so every backend draws the same numbers).
``categorical`` draws ``philox.categorical_row`` per row: the scaled logits sorted in
descending order by a stable merge sort (ties: the lower index first, as NumPy's and
Numba's ``argsort(kind="mergesort")``), the cumulative weights over ``philox.exp``, the
top-k and top-p cut and the inverse CDF, in scratch the plan provides.
"""

from __future__ import annotations

import math

from llvmlite import ir

from ....errors import CompileError
from ...core import philox
from ...lower.loops import RandomFill
from .types import F32, F64, I32, I64, constant, convert, i64, load, loop, store


def _c32(value: int) -> ir.Constant:
    return ir.Constant(I32, int(value) & 0xFFFFFFFF)


def _f64(value: float) -> ir.Constant:
    return ir.Constant(F64, float(value))


class RandomFills:
    """The fill functions of one module, defined on first use."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module

    def fill(self, b: ir.IRBuilder, kernel: RandomFill, out: ir.Value,
             key: ir.Value) -> None:
        """Fill ``out`` (``kernel.out.size`` elements) from the stream of the four
        integers at ``key``."""
        dtype = kernel.out.dtype
        first, k0, k1 = self._key(b, kernel, key)
        size = kernel.out.size
        if kernel.op == "random_uniform" and dtype == "float32":
            self._per_word(b, out, first, k0, k1, size, dtype,
                           lambda b, w: b.fmul(b.uitofp(b.lshr(w, _c32(8)), F32),
                                               constant(philox.TWO_M24, "float32")))
        elif kernel.op == "bernoulli":
            threshold = i64(philox.bernoulli_threshold(kernel.attrs["p"]))
            one, zero = constant(1, dtype), constant(0, dtype)
            self._per_word(b, out, first, k0, k1, size, dtype,
                           lambda b, w: b.select(b.icmp_unsigned(
                               "<", b.zext(w, I64), threshold), one, zero))
        elif kernel.op == "random_uniform":  # float64: two words each
            with loop(b, size, "e") as e:
                block = b.lshr(e, i64(1))
                w = self.philox_block(b, b.add(first, block), k0, k1)
                lane = b.and_(e, i64(1))
                high = b.select(b.icmp_unsigned("==", lane, i64(0)), w[0], w[2])
                low = b.select(b.icmp_unsigned("==", lane, i64(0)), w[1], w[3])
                store(b, self._unit_f64_int(b, high, low), out, dtype, e)
        elif kernel.op == "random_normal":  # four words each
            normal = self._normal_function()
            with loop(b, size, "e") as e:
                w = self.philox_block(b, b.add(first, e), k0, k1)
                value = b.call(normal, [b.uitofp(x, F64) for x in w])
                store(b, convert(b, value, "float64", dtype), out, dtype, e)
        else:  # pragma: no cover - the registry has no other random op
            raise CompileError(f"llvm backend: no fill for {kernel.op}")

    @staticmethod
    def _key(b: ir.IRBuilder, kernel: RandomFill, key: ir.Value
             ) -> tuple[ir.Value, ir.Value, ir.Value]:
        """The stream's first counter block and its two key words."""
        key_dtype = kernel.key.dtype
        words = [convert(b, load(b, key, key_dtype, i64(j)), key_dtype, "int64")
                 for j in range(4)]
        mask = i64(0xFFFFFFFF)
        base = b.or_(b.shl(b.and_(words[3], mask), i64(32)), b.and_(words[2], mask))
        return b.add(base, i64(kernel.offset)), b.trunc(words[0], I32), b.trunc(words[1], I32)

    def _per_word(self, b: ir.IRBuilder, out: ir.Value, first: ir.Value, k0: ir.Value,
                  k1: ir.Value, size: int, dtype: str, convert_word) -> None:
        """One element per word: element ``e`` from lane ``e % 4`` of block ``e // 4``."""
        full = size // 4
        with loop(b, full, "blk") as block:
            w = self.philox_block(b, b.add(first, block), k0, k1)
            for lane in range(4):
                e = b.add(b.mul(block, i64(4)), i64(lane))
                store(b, convert_word(b, w[lane]), out, dtype, e)
        if full * 4 < size:
            w = self.philox_block(b, b.add(first, i64(full)), k0, k1)
            for lane in range(size - full * 4):
                store(b, convert_word(b, w[lane]), out, dtype, i64(full * 4 + lane))

    @staticmethod
    def philox_block(b: ir.IRBuilder, counter: ir.Value, k0: ir.Value, k1: ir.Value
                     ) -> list[ir.Value]:
        """``philox.philox4x32`` of counter ``(lo, hi, 0, 0)`` under ``(k0, k1)``."""
        c0 = b.trunc(counter, I32)
        c1 = b.trunc(b.lshr(counter, i64(32)), I32)
        c2 = c3 = _c32(0)
        m0, m1 = i64(int(philox.M0)), i64(int(philox.M1))
        for _ in range(philox.ROUNDS):
            p0 = b.mul(b.zext(c0, I64), m0)
            p1 = b.mul(b.zext(c2, I64), m1)
            c0, c1, c2, c3 = (b.xor(b.xor(b.trunc(b.lshr(p1, i64(32)), I32), c1), k0),
                              b.trunc(p1, I32),
                              b.xor(b.xor(b.trunc(b.lshr(p0, i64(32)), I32), c3), k1),
                              b.trunc(p0, I32))
            k0 = b.add(k0, _c32(int(philox.W0)))
            k1 = b.add(k1, _c32(int(philox.W1)))
        return [c0, c1, c2, c3]

    @staticmethod
    def _unit_f64_int(b: ir.IRBuilder, high: ir.Value, low: ir.Value) -> ir.Value:
        """``((a << 21) + (b >> 11)) * 2**-53`` (``random_kernels._f64``)."""
        bits = b.add(b.shl(b.zext(high, I64), i64(21)), b.zext(b.lshr(low, _c32(11)), I64))
        return b.fmul(b.uitofp(bits, F64), _f64(philox.TWO_M53))

    # -- the Box-Muller transform over philox.log and philox.cos_turns ------------------
    def _normal_function(self) -> ir.Function:
        fn = self.module.globals.get("philox_normal")
        if fn is not None:
            return fn
        fn = ir.Function(self.module, ir.FunctionType(F64, [F64] * 4), "philox_normal")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        a, bb, c, d = fn.args
        u1 = self._unit_f64(b, a, bb)
        u2 = self._unit_f64(b, c, d)
        radius = self._intrinsic(b, "llvm.sqrt", b.fmul(_f64(-2.0),
                                                        self._log(b, b.fsub(_f64(1.0), u1))))
        b.ret(b.fmul(radius, self._cos_turns(b, u2)))
        return fn

    @staticmethod
    def _intrinsic(b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
        return b.call(b.module.declare_intrinsic(name, [x.type]), [x])

    def _unit_f64(self, b: ir.IRBuilder, a: ir.Value, c: ir.Value) -> ir.Value:
        """``philox.unit_f64``: ``(a * 2**21 + floor(b / 2048)) * 2**-53``."""
        low = self._intrinsic(b, "llvm.floor", b.fdiv(c, _f64(2048.0)))
        return b.fmul(b.fadd(b.fmul(a, _f64(2097152.0)), low), _f64(philox.TWO_M53))

    def _log(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """``philox.log`` for a normal ``x > 0`` (``frexp`` from the exponent bits)."""
        bits = b.bitcast(x, I64)
        exponent = b.and_(b.lshr(bits, i64(52)), i64(0x7FF))
        e = b.sub(exponent, i64(1022))
        m = b.bitcast(b.or_(b.and_(bits, i64(~(0x7FF << 52) & 0xFFFFFFFFFFFFFFFF)),
                            i64(1022 << 52)), F64)
        small = b.fcmp_ordered("<", m, _f64(philox.SQRT_HALF))
        m = b.select(small, b.fmul(m, _f64(2.0)), m)
        e = b.select(small, b.sub(e, i64(1)), e)
        s = b.fdiv(b.fsub(m, _f64(1.0)), b.fadd(m, _f64(1.0)))
        s2 = b.fmul(s, s)
        term: ir.Value = _f64(1.0 / 23.0)
        for k in range(10, -1, -1):
            term = b.fadd(_f64(1.0 / (2 * k + 1)), b.fmul(s2, term))
        return b.fadd(b.fmul(b.sitofp(e, F64), _f64(philox.LN2)),
                      b.fmul(b.fmul(_f64(2.0), s), term))

    def _cos_turns(self, b: ir.IRBuilder, t: ir.Value) -> ir.Value:
        """``philox.cos_turns``: ``cos(2 pi t)`` for ``t`` in [0, 1)."""
        t4 = b.fmul(t, _f64(4.0))
        q = b.fptosi(self._intrinsic(b, "llvm.floor", t4), I64)
        f = b.fsub(t4, b.sitofp(q, F64))
        swap = b.fcmp_ordered(">", f, _f64(0.5))
        quarter = _f64(philox.TWO_PI / 4.0)
        angle = b.select(swap, b.fmul(b.fsub(_f64(1.0), f), quarter), b.fmul(f, quarter))
        a2 = b.fmul(angle, angle)
        c: ir.Value = _f64(1.0)
        s: ir.Value = _f64(1.0)
        for n in range(10, 0, -1):
            c = b.fsub(_f64(1.0), b.fdiv(b.fmul(a2, c), _f64(float((2 * n) * (2 * n - 1)))))
            s = b.fsub(_f64(1.0), b.fdiv(b.fmul(a2, s), _f64(float((2 * n + 1) * (2 * n)))))
        s = b.fmul(s, angle)
        c, s = b.select(swap, s, c), b.select(swap, c, s)
        result = b.select(b.icmp_signed("==", q, i64(0)), c,
                          b.select(b.icmp_signed("==", q, i64(1)), b.fneg(s),
                                   b.select(b.icmp_signed("==", q, i64(2)), b.fneg(c), s)))
        return result


    # -- categorical -------------------------------------------------------------------
    def categorical(self, b: ir.IRBuilder, kernel: RandomFill, out: ir.Value,
                    key: ir.Value, logits: ir.Value, dtype: str, classes: int,
                    room: tuple[ir.Value, ir.Value, ir.Value, ir.Value]) -> None:
        """``random_kernels.fill_categorical``: one index per row of ``logits``
        (contiguous rows of ``classes``), ``room`` the scaled row, the cumulative
        weights, the order and the merge's workspace."""
        z, cumulative, order, work = room
        first, k0, k1 = self._key(b, kernel, key)
        temperature = _f64(float(kernel.attrs["temperature"]))
        top_k, top_p = int(kernel.attrs["top_k"]), float(kernel.attrs["top_p"])
        rows = kernel.out.size
        fn = b.function
        with loop(b, rows, "row") as r:
            row = b.mul(r, i64(classes))
            with loop(b, classes, "col") as j:
                x = convert(b, load(b, logits, dtype, b.add(row, j)), dtype, "float64")
                store(b, b.fdiv(x, temperature), z, "float64", j)
            half = b.lshr(r, i64(1))
            w = self.philox_block(b, b.add(first, half), k0, k1)
            odd = b.icmp_unsigned("==", b.and_(r, i64(1)), i64(1))
            high = b.select(odd, w[2], w[0])
            low = b.select(odd, w[3], w[1])
            u = self._unit_f64(b, b.uitofp(high, F64), b.uitofp(low, F64))
            index = self._categorical_row(b, fn, z, cumulative, order, work, classes, u,
                                          top_k, top_p)
            store(b, index, out, "int64", r)

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


__all__ = ["RandomFills"]

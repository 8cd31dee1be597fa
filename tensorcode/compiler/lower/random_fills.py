"""The random draws as loop programs: Philox-4x32-10 and the exact word-to-number
transforms of ``core/philox.py``, written once as scalar graphs of registry ops.

Every compiled backend renders these statements with its own op table, exactly as it
renders the float32 approximations (``approximations.py``), so no renderer knows what a
random draw is. The stream is ``core/philox.py``'s, bit for bit (the reference backend
runs that module itself; the tests evaluate these graphs with the registry's NumPy
references, ``approximations.evaluate_graph``, and compare). The loop program has no
unsigned types, so a 32-bit word is an ``int64`` in ``[0, 2**32)``. A word times a
multiplier is ``mul_wide``, the 32x32->64 product whose bits are the ``uint64``'s; its
high word is an arithmetic ``shift_right`` by 32 masked with ``bitwise_and``, its low
word the mask; a key's sum wraps by the same mask; ``bitwise_xor`` mixes. No signed sum
or product ever overflows (Numba's are undefined when they do): the counter ``base +
block`` is taken in 32-bit halves.

A fill is one loop over the node's counter blocks (four words each) writing the elements
those words make, then the last, partial block (if any) unrolled after it, both after
the key's words are read once (a large fill runs in chunks on the worker pool, each
chunk reading the key itself, ``partition.py``: the same bits for any thread count).
Per element: ``random_uniform`` float32 ``(w >> 8) * 2**-24`` (one word), float64
``((a << 21) + (b >> 11)) * 2**-53`` (two), ``bernoulli`` ``w < round(p * 2**32)``
(one), ``random_normal`` Box-Muller over ``philox.log`` and ``philox.cos_turns`` in
float64 (four words; ``frexp`` from the exponent bits, the quadrant by ``where``).
A categorical draw's uniforms (two words per row) are filled into scratch the same
way; its sort and inverse CDF are the ``Sample`` call (``statements.py`` says why that
part stays a call).
"""

from __future__ import annotations

from ..core import philox, registry
from .kernels import Strided
from .statements import Apply, Const, Expr, Index, Let, Load, Loop, Ref, Stmt, Store

I64, F64 = "int64", "float64"
MASK = 0xFFFFFFFF
#: the bits of a float64 below its exponent, and a float64 exponent field of 1022
MANTISSA = (1 << 52) - 1
HALF_EXPONENT = 1022 << 52


class Graph:
    """The statements of one expansion: each value a ``Let`` of its own name (ending
    in the tag, so names never repeat within a kernel)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.lets: list[Let] = []

    def let(self, name: str, value: Expr) -> Ref:
        ref = Ref(f"{name}{len(self.lets)}_{self.tag}")
        self.lets.append(Let(ref.name, value))
        return ref


def _i(op: str, *args: Expr) -> Apply:
    return Apply(op, args, I64, I64)


def _f(op: str, *args: Expr) -> Apply:
    return Apply(op, args, F64, F64)


def _n(value: int) -> Const:
    return Const(int(value), I64)


def _x(value: float) -> Const:
    return Const(float(value), F64)


def _where(test: Expr, yes: Expr, no: Expr, dtype: str) -> Apply:
    """``yes if test else no``, ``test`` a float64 0/1."""
    return Apply("where", (test, yes, no), dtype, F64)


def _low(x: Expr) -> Apply:
    return _i("bitwise_and", x, _n(MASK))


def _high(x: Expr) -> Apply:
    """The high 32 bits of a 64-bit value (an arithmetic shift, then masked)."""
    return _low(_i("shift_right", x, _n(32)))


# ---------------------------------------------------------------------------------------
# the stream


def key_words(g: Graph, key: Strided) -> list[Ref]:
    """The key's two words and the base counter's low and high words, from the four
    int64 numbers at ``key``."""
    return [g.let("k", _low(Load(key.arena, key.dtype, Index(key.offset + j))))
            for j in range(4)]


def block(g: Graph, key: list[Ref], number: Expr) -> list[Ref]:
    """``philox.philox4x32`` of block ``number`` (an int64 below ``2**62``) of the stream
    of ``key`` (``key_words``): the counter ``base + number`` split into its low and high
    words (``lo + number``, its carry added to ``hi``: no sum overflows), under the key's
    two words."""
    k0, k1, lo, hi = key
    total = g.let("c", _i("add", lo, number))
    c: list[Expr] = [g.let("c", _low(total)),
                     g.let("c", _low(_i("add", hi, _i("shift_right", total, _n(32))))),
                     _n(0), _n(0)]
    m0, m1 = _n(int(philox.M0)), _n(int(philox.M1))
    for r in range(philox.ROUNDS):
        r0 = _low(_i("add", k0, _n(r * int(philox.W0)))) if r else k0
        r1 = _low(_i("add", k1, _n(r * int(philox.W1)))) if r else k1
        p0 = g.let("p", _i("mul_wide", c[0], m0))
        p1 = g.let("p", _i("mul_wide", c[2], m1))
        c = [g.let("c", _i("bitwise_xor", _i("bitwise_xor", _high(p1), c[1]), r0)),
             g.let("c", _low(p1)),
             g.let("c", _i("bitwise_xor", _i("bitwise_xor", _high(p0), c[3]), r1)),
             g.let("c", _low(p0))]
    return [ref for ref in c if isinstance(ref, Ref)]


# ---------------------------------------------------------------------------------------
# words -> numbers


def _float(x: Expr, dtype: str = F64) -> Apply:
    """The float of an int64 below ``2**31`` in magnitude, through int32 (SIMD converts
    int32, not int64, to floats)."""
    return Apply("astype", (Apply("astype", (x,), "int32", I64),), dtype, "int32")


def unit_f64(a: Expr, b: Expr) -> Apply:
    """``philox.unit_f64``: ``((a << 21) + (b >> 11)) * 2**-53`` (exact)."""
    bits = _i("add", _i("shift_left", a, _n(21)), _i("shift_right", b, _n(11)))
    return _f("mul", Apply("astype", (bits,), F64, I64), _x(philox.TWO_M53))


def log(g: Graph, x: Expr) -> Expr:
    """``philox.log`` of a normal ``x > 0``: ``frexp`` from the exponent bits."""
    bits = g.let("bits", Apply("bitcast", (x,), I64, F64))
    exponent = _i("bitwise_and", _i("shift_right", bits, _n(52)), _n(0x7FF))
    e = g.let("e", _i("sub", exponent, _n(1022)))
    m = g.let("m", Apply("bitcast", (_i("bitwise_or", _i("bitwise_and", bits, _n(MANTISSA)),
                                                     _n(HALF_EXPONENT)),), F64, I64))
    small = g.let("small", _f("lt", m, _x(philox.SQRT_HALF)))
    m = g.let("m", _where(small, _f("mul", m, _x(2.0)), m, F64))
    e = g.let("e", _where(small, _i("sub", e, _n(1)), e, I64))
    s = g.let("s", _f("div", _f("sub", m, _x(1.0)), _f("add", m, _x(1.0))))
    s2 = g.let("s", _f("mul", s, s))
    term: Expr = _x(1.0 / 23.0)
    for k in range(10, -1, -1):
        term = g.let("t", _f("add", _x(1.0 / (2 * k + 1)), _f("mul", s2, term)))
    return _f("add", _f("mul", _float(e), _x(philox.LN2)),
              _f("mul", _f("mul", _x(2.0), s), term))


def cos_turns(g: Graph, t: Expr) -> Expr:
    """``philox.cos_turns``: ``cos(2 pi t)`` for ``t`` in [0, 1)."""
    t4 = g.let("t", _f("mul", t, _x(4.0)))
    q = g.let("q", _f("floor", t4))
    f = g.let("f", _f("sub", t4, q))
    swap = g.let("swap", _f("gt", f, _x(0.5)))
    quarter = _x(philox.TWO_PI / 4.0)
    angle = g.let("a", _where(swap, _f("mul", _f("sub", _x(1.0), f), quarter),
                              _f("mul", f, quarter), F64))
    a2 = g.let("a", _f("mul", angle, angle))
    c: Expr = _x(1.0)
    s: Expr = _x(1.0)
    for n in range(10, 0, -1):
        c = g.let("c", _f("sub", _x(1.0), _f("div", _f("mul", a2, c),
                                             _x((2 * n) * (2 * n - 1)))))
        s = g.let("s", _f("sub", _x(1.0), _f("div", _f("mul", a2, s),
                                             _x((2 * n + 1) * (2 * n)))))
    s = g.let("s", _f("mul", s, angle))
    c, s = (g.let("c", _where(swap, s, c, F64)), g.let("s", _where(swap, c, s, F64)))
    quadrant = [_f("eq", q, _x(k)) for k in range(3)]
    return _where(quadrant[0], c, _where(quadrant[1], _f("neg", s),
                                         _where(quadrant[2], _f("neg", c), s, F64), F64), F64)


def normal(g: Graph, words: list[Ref]) -> Expr:
    """``philox.normal``: Box-Muller of four words, ``sqrt(-2 log(1 - u1)) cos(2 pi u2)``."""
    u1 = g.let("u", unit_f64(words[0], words[1]))
    u2 = g.let("u", unit_f64(words[2], words[3]))
    radius = _f("sqrt", _f("mul", _x(-2.0), log(g, _f("sub", _x(1.0), u1))))
    return _f("mul", radius, cos_turns(g, u2))


def values(g: Graph, op: str, dtype: str, attrs: dict, words: list[Ref]) -> list[Expr]:
    """The elements of ``dtype`` that one block's four words make for ``op``."""
    if op == "random_uniform" and dtype == "float32":
        return [Apply("mul", (_float(_i("shift_right", w, _n(8)), dtype),
                              Const(philox.TWO_M24, dtype)), dtype, dtype) for w in words]
    if op == "random_uniform":
        return [unit_f64(words[0], words[1]), unit_f64(words[2], words[3])]
    if op == "bernoulli":
        threshold = _n(philox.bernoulli_threshold(attrs["p"]))
        return [Apply("where", (_i("lt", w, threshold), Const(1, dtype), Const(0, dtype)),
                      dtype, I64) for w in words]
    value = normal(g, words)
    return [value if dtype == F64 else Apply("astype", (value,), dtype, F64)]


# ---------------------------------------------------------------------------------------
# fills


def fill(op: str, out: Strided, key: Strided, offset: int, attrs: dict,
         tag: str = "r") -> list[Stmt]:
    """Statements that fill ``out`` (contiguous) with draws of random op ``op`` (its
    ``attrs``) from the stream of ``key`` starting at counter block ``offset``."""
    per = 4 // registry.random_words(op, out.dtype)
    full, rest = divmod(out.size, per)

    g = Graph(f"{tag}k")
    words_of_key = key_words(g, key)
    statements: list[Stmt] = list(g.lets)

    def one_block(g: Graph, number: Expr, index: Index, count: int) -> list[Stmt]:
        made = values(g, op, out.dtype, attrs, block(g, words_of_key, number))
        return [*g.lets, *(Store(out.arena, out.dtype, Index(index.base + j, index.terms),
                                 made[j]) for j in range(count))]

    if full:
        body = one_block(Graph(tag), _i("add", Ref("blk"), _n(offset)),
                         Index(out.offset, ((per, Ref("blk")),)), per)
        statements.append(Loop("blk", full, tuple(body)))
    if rest:
        statements += one_block(Graph(f"{tag}t"), _n(offset + full),
                                Index(out.offset + full * per), rest)
    return statements


__all__ = ["Graph", "key_words", "block", "unit_f64", "log", "cos_turns", "normal", "values",
           "fill"]

"""Counter-based random bits (Philox-4x32-10) and the exact transforms both backends use.

Randomness inside a plan must not depend on the backend, the batch bucketing or the
thread, so every draw is a pure function of ``(key, counter)``: Philox-4x32 with ten
rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", the generator
JAX and PyTorch use) maps a 128-bit counter and a 64-bit key to four 32-bit words.

The mixing is ``philox4x32``, with nothing but ``*``, ``>>``, ``&``, ``^`` and ``+`` on
unsigned 64-bit values holding 32-bit numbers: the reference interpreter calls it on
NumPy ``uint64`` arrays (all blocks at once). The compiled backends draw the same words
from loop-program statements written once, operation for operation
(``lower/random_fills.py``, held to this module bit for bit by its tests).

A random node owns a range of counter blocks ``[offset, offset + blocks)``; element
``e`` of its output (its logical row-major position, so padding rows appended to a
batch never shift a real row's draws) uses ``words`` consecutive 32-bit words starting
at word ``e * words``: word ``n`` is lane ``n % 4`` of block ``n // 4``. The block's
counter is ``(base + offset + n // 4) mod 2**64``, split into the low and high 32 bits
of the counter's first two words (the other two are zero).

The float transforms are scalar functions over IEEE double arithmetic only (``+ - * /``,
``math.sqrt``, ``math.frexp``, ``math.ldexp``, ``math.floor``), with their own ``log``,
``exp`` and ``cos``, so they round identically in CPython and in Numba and on every
platform (no libm whose last bit may differ). The reference interpreter calls them per
element; ``lower/random_fills.py`` restates the uniform, normal and Bernoulli transforms as
statements, and the Numba backend compiles ``categorical_row`` (with ``exp``) itself.
"""

from __future__ import annotations

import math

import numpy as np

from .dtypes import DTYPES

#: the Philox-4x32 multipliers and Weyl key increments (Random123)
M0 = np.uint64(0xD2511F53)
M1 = np.uint64(0xCD9E8D57)
W0 = np.uint32(0x9E3779B9)
W1 = np.uint32(0xBB67AE85)
SHIFT32 = np.uint64(32)
ROUNDS = 10
U32 = np.uint32
U64 = np.uint64

#: 32-bit words each random op consumes per output element
WORDS: dict[str, dict[str, int]] = {
    "random_uniform": {"float32": 1, "float64": 2},
    "random_normal": {"float32": 4, "float64": 4},
    "bernoulli": dict.fromkeys(DTYPES, 1),
    "categorical": {"int64": 2}}


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox-4x32-10 of counter ``(c0, c1, c2, c3)`` under key ``(k0, k1)``: four
    ``uint32`` words. Arguments are ``uint32`` scalars or arrays; each product is taken
    in 64 bits and split (``mulhilo``), every sum wraps at 32 bits."""
    for _ in range(ROUNDS):
        p0 = U64(c0) * M0
        p1 = U64(c2) * M1
        c0, c1, c2, c3 = (U32(U32(p1 >> SHIFT32) ^ c1 ^ k0), U32(p1),
                          U32(U32(p0 >> SHIFT32) ^ c3 ^ k1), U32(p0))
        k0 = U32(k0 + W0)
        k1 = U32(k1 + W1)
    return c0, c1, c2, c3


def blocks(size: int, words: int) -> int:
    """Counter blocks (four words each) that ``size`` elements of ``words`` words use."""
    return -(-int(size) * int(words) // 4)


def words(key: np.ndarray, offset: int, count: int) -> np.ndarray:
    """The first ``count`` 32-bit words (``uint32`` array) of the stream starting at
    block ``offset`` under ``key`` (int64 ``[k0, k1, counter_lo, counter_hi]``)."""
    k0, k1, lo, hi = (int(v) & 0xFFFFFFFF for v in np.asarray(key).reshape(4))
    n = blocks(count, 1)
    base = np.uint64(((hi << 32) | lo) + int(offset) & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        counter = base + np.arange(n, dtype=np.uint64)
    zero = np.zeros(n, np.uint32)
    out = philox4x32(counter.astype(np.uint32), (counter >> SHIFT32).astype(np.uint32),
                     zero, zero, np.full(n, k0, np.uint32), np.full(n, k1, np.uint32))
    return np.stack(out, axis=1).reshape(-1)[:count]


# ---------------------------------------------------------------------------------------
# words -> floats: exact conversions

TWO_M24 = 2.0 ** -24
TWO_M53 = 2.0 ** -53


def unit_f32(word: float) -> float:
    """[0, 1) from the top 24 bits of one word: ``(w >> 8) * 2**-24`` (exact in float32)."""
    return math.floor(word / 256.0) * TWO_M24


def unit_f64(a: float, b: float) -> float:
    """[0, 1) from 53 bits of two words: ``((a << 21) + (b >> 11)) * 2**-53`` (exact)."""
    return (a * 2097152.0 + math.floor(b / 2048.0)) * TWO_M53


# ---------------------------------------------------------------------------------------
# platform-independent log, exp, cos (float64, a few ulp; identical everywhere)

LN2 = 0.6931471805599453
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
SQRT_HALF = 0.7071067811865476
TWO_PI = 6.283185307179586


def log(x: float) -> float:
    """Natural log of ``x > 0``: ``x = m 2**e``, ``log m = 2 atanh((m-1)/(m+1))``."""
    m, e = math.frexp(x)
    if m < SQRT_HALF:
        m = m * 2.0
        e = e - 1
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    term = 1.0 / 23.0
    for k in range(10, -1, -1):
        term = 1.0 / (2 * k + 1) + s2 * term
    return e * LN2 + 2.0 * s * term


def exp(x: float) -> float:
    """``e ** x`` for ``x <= 0`` (0 below -745): ``2**k e**r`` with ``|r| <= ln2/2``."""
    if x < -745.0:
        return 0.0
    k = math.floor(x / LN2 + 0.5)
    r = (x - k * LN2_HI) - k * LN2_LO  # Cody-Waite: k * LN2_HI is exact
    term = 1.0
    for n in range(16, 0, -1):
        term = 1.0 + r * term / n
    return math.ldexp(term, int(k))


def cos_turns(t: float) -> float:
    """``cos(2 pi t)`` for ``t`` in [0, 1): quadrant by exact scaling, then Taylor."""
    q = math.floor(t * 4.0)
    f = t * 4.0 - q  # exact: t has at most 53 significant bits
    if f > 0.5:  # cos/sin of the complement keeps the angle within pi/4
        angle = (1.0 - f) * (TWO_PI / 4.0)
        swap = True
    else:
        angle = f * (TWO_PI / 4.0)
        swap = False
    a2 = angle * angle
    c = 1.0
    s = 1.0
    for n in range(10, 0, -1):
        c = 1.0 - a2 * c / ((2 * n) * (2 * n - 1))
        s = 1.0 - a2 * s / ((2 * n + 1) * (2 * n))
    s = s * angle
    if swap:
        c, s = s, c
    if q == 0:
        return c
    if q == 1:
        return -s
    if q == 2:
        return -c
    return s


def normal(a: float, b: float, c: float, d: float) -> float:
    """A standard normal from four words (Box-Muller):
    ``sqrt(-2 log(1 - u1)) cos(2 pi u2)``, ``u1`` from (a, b), ``u2`` from (c, d)."""
    u1 = unit_f64(a, b)
    u2 = unit_f64(c, d)
    return math.sqrt(-2.0 * log(1.0 - u1)) * cos_turns(u2)


def bernoulli_threshold(p: float) -> int:
    """A word ``w`` is a success when ``w < threshold``: ``round(p * 2**32)``."""
    return int(min(max(round(float(p) * 4294967296.0), 0), 4294967296))


def categorical_row(z: np.ndarray, u: float, top_k: int, top_p: float) -> int:
    """The index drawn from one row of scaled logits ``z`` (float64, already divided by
    the temperature) with the uniform ``u`` in [0, 1): inverse CDF over the tokens in
    descending order of ``z`` (ties: lower index first), kept to the ``top_k`` largest
    (0: all) and to the smallest prefix whose probability reaches ``top_p``."""
    n = z.shape[0]
    order = np.argsort(-z, kind="mergesort")
    top = z[order[0]]
    if not top > -np.inf:  # every logit -inf (or NaN): the first index
        return int(order[0])
    limit = n if top_k <= 0 or top_k > n else top_k
    cumulative = np.empty(limit, np.float64)
    total = 0.0
    for j in range(limit):
        total = total + exp(z[order[j]] - top)
        cumulative[j] = total
    keep = limit
    if top_p < 1.0:
        goal = top_p * total
        keep = 1
        while keep < limit and cumulative[keep - 1] < goal:
            keep += 1
    target = u * cumulative[keep - 1]
    for j in range(keep):
        if cumulative[j] > target:
            return int(order[j])
    return int(order[keep - 1])


__all__ = ["philox4x32", "blocks", "words", "unit_f32", "unit_f64", "normal", "log", "exp",
           "cos_turns", "bernoulli_threshold", "categorical_row", "WORDS"]

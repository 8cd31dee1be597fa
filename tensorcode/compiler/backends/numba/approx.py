"""Vectorizable float32 approximations of transcendental functions (tanh, exp).

LLVM here has no vector math library, so ``np.tanh`` on float32 in compiled code is a
scalar libm call that also stops the loop around it from vectorizing (1.6-2x of a small
MLP's step). As XLA and Eigen do, the Numba backend instead evaluates float32 ``tanh`` as
a clamped rational function of plain multiplies, adds and one divide, which vectorizes.
float64 always stays exact, and ``lower(approximate=False)`` (or the environment
variable ``TENSORCODE_EXACT_MATH=1``) turns the approximation off.

``TANH_ULP_BOUND``: the largest error, in float32 units in the last place against the
correctly rounded tanh, measured over a third of all float32 in [1e-4, 9.5] (both signs)
and 16 million random points: 7 ulp (mean 0.9 ulp); the tests check a fresh sample
against that bound. Inputs below 4e-4 in magnitude return ``x`` (exact to rounding);
beyond +-7.905 the result is +-1; NaN stays NaN.

The coefficients are Eigen's (``ptanh_float``), a [13/6] minimax rational function.

``EXP_ULP_BOUND``: float32 ``exp`` (and so ``sigmoid``) is the Cephes scheme SIMD
libraries use: ``x = n ln2 + r`` with ``ln2`` split in two, a degree-7 polynomial for
``e**r``, and ``2**n`` built from exponent bits in two halves (so results that are
subnormal come out right): at most 1 ulp from the correctly rounded exp over the whole
float32 range (measured over 6 million points across [-104, 89] and dense sweeps of
both ends; libm's own expf is also within 1 ulp). Above 88.7228 it gives inf, below
-103.972 zero, NaN stays NaN.

``tanh_code``, ``exp_code`` and ``sigmoid_code`` write the same computations as Numba
statements; the registry entries of those primitives carry them as their float32
lowering, so the backend itself names no op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

TANH_ULP_BOUND = 7
TANH_CLAMP = 7.90531110763549805
TANH_TINY = 0.0004
TANH_NUMERATOR = (4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05,
                  5.12229709037114e-08, -8.60467152213735e-11, 2.00018790482477e-13,
                  -2.76076847742355e-16)  # x^1, x^3, ..., x^13
TANH_DENOMINATOR = (4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04,
                    1.19825839466702e-06)  # x^0, x^2, x^4, x^6


EXP_ULP_BOUND = 1
EXP_HIGH = 88.72283935546875
EXP_LOW = -103.97207708
EXP_LOG2E = 1.44269504088896341
EXP_LN2_HIGH = 0.693359375
EXP_LN2_LOW = -2.12194440e-4
EXP_POLYNOMIAL = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                  1.6666665459e-1, 5.0000001201e-1)  # Horner order, then r*r*p + r + 1


def exp_float32(x: np.ndarray) -> np.ndarray:
    """The float32 exp approximation in NumPy, operation for operation."""
    f = np.float32
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(all="ignore"):
        c = np.where(x > f(EXP_HIGH), f(EXP_HIGH), np.where(x < f(EXP_LOW), f(EXP_LOW), x))
        n = np.floor(c * f(EXP_LOG2E) + f(0.5))
        r = c - n * f(EXP_LN2_HIGH)
        r = r - n * f(EXP_LN2_LOW)
        y = f(EXP_POLYNOMIAL[0]) * r + f(EXP_POLYNOMIAL[1])
        for coefficient in EXP_POLYNOMIAL[2:]:
            y = y * r + f(coefficient)
        y = y * (r * r) + r + f(1)
        k = np.nan_to_num(n).astype(np.int32)
        h = k >> 1
        e = np.ldexp(np.ldexp(y, h).astype(np.float32), k - h).astype(np.float32)
        out = np.where(x > f(EXP_HIGH), f(np.inf), np.where(x < f(EXP_LOW), f(0), e))
    return np.where(np.isnan(x), x, out).astype(np.float32)


def tanh_float32(x: np.ndarray) -> np.ndarray:
    """The approximation in NumPy, operation for operation as the generated code does
    it (for tests and for reading)."""
    f = np.float32
    x = np.asarray(x, dtype=np.float32)
    hi = f(TANH_CLAMP)
    c = np.where(x > hi, hi, np.where(x < -hi, -hi, x))
    x2 = c * c
    p: np.ndarray | np.float32 = f(TANH_NUMERATOR[-1])
    for a in TANH_NUMERATOR[-2::-1]:
        p = p * x2 + f(a)
    p = p * c
    q: np.ndarray | np.float32 = f(TANH_DENOMINATOR[-1])
    for b in TANH_DENOMINATOR[-2::-1]:
        q = q * x2 + f(b)
    with np.errstate(all="ignore"):
        r = p / q
    return np.where(np.abs(x) < f(TANH_TINY), x, r).astype(np.float32)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps between two float32 arrays (same sign convention as
    the bits, so -0 and +0 are 0 apart)."""
    def ordered(v):
        i = np.asarray(v, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(a) - ordered(b))


# ---------------------------------------------------------------------------------------
# the same approximations as Numba statements: the registry entries of tanh, exp and
# sigmoid name these as their float32 lowering (``Lowering.approx_f32``)

#: ``const(value)`` -> the name of a float32 constant of the generated module
Const = Callable[[Any], str]


@dataclass(frozen=True)
class ScalarCode:
    """Statements that compute one scalar: ``lines`` run first (they assign temporaries
    suffixed with the caller's ``tag``), ``value`` is then the result's expression, and
    ``intrinsics`` names the ``backends/intrinsics.py`` functions the lines call."""

    lines: tuple[str, ...]
    value: str
    intrinsics: frozenset[str] = frozenset()


def tanh_code(args: Sequence[str], tag: str, const: Const) -> ScalarCode:
    """float32 tanh as the clamped rational function ``tanh_float32`` models."""
    (x,), i = args, tag
    hi, lo = const(TANH_CLAMP), const(-TANH_CLAMP)
    lines = [f"c{i} = {hi} if {x} > {hi} else ({lo} if {x} < {lo} else {x})",
             f"s{i} = c{i} * c{i}",
             f"p{i} = {const(TANH_NUMERATOR[-1])}"]
    for a in TANH_NUMERATOR[-2::-1]:
        lines.append(f"p{i} = p{i} * s{i} + {const(a)}")
    lines.append(f"q{i} = {const(TANH_DENOMINATOR[-1])}")
    for b in TANH_DENOMINATOR[-2::-1]:
        lines.append(f"q{i} = q{i} * s{i} + {const(b)}")
    return ScalarCode(tuple(lines), f"{x} if np.abs({x}) < {const(TANH_TINY)} else "
                      f"p{i} * c{i} / q{i}")


def exp_code(args: Sequence[str], tag: str, const: Const) -> ScalarCode:
    """float32 exp as the scheme ``exp_float32`` models."""
    (x,), i = args, tag
    hi, lo = const(EXP_HIGH), const(EXP_LOW)
    lines = [f"c{i} = {hi} if {x} > {hi} else ({lo} if {x} < {lo} else {x})",
             f"n{i}f = np.floor(c{i} * {const(EXP_LOG2E)} + {const(0.5)})",
             f"r{i} = c{i} - n{i}f * {const(EXP_LN2_HIGH)}",
             f"r{i} = r{i} - n{i}f * {const(EXP_LN2_LOW)}",
             f"y{i} = {const(EXP_POLYNOMIAL[0])} * r{i} + {const(EXP_POLYNOMIAL[1])}"]
    for coefficient in EXP_POLYNOMIAL[2:]:
        lines.append(f"y{i} = y{i} * r{i} + {const(coefficient)}")
    lines += [f"y{i} = y{i} * (r{i} * r{i}) + r{i} + {const(1)}",
              f"k{i} = np.int32(n{i}f)",
              f"h{i} = k{i} >> 1",
              f"y{i} = (y{i} * pow2_float32(h{i})) * pow2_float32(k{i} - h{i})"]
    value = (f"{const(np.inf)} if {x} > {hi} else "
             f"({const(0)} if {x} < {lo} else (y{i} if {x} == {x} else {x}))")
    return ScalarCode(tuple(lines), value, frozenset({"pow2_float32"}))


def sigmoid_code(args: Sequence[str], tag: str, const: Const) -> ScalarCode:
    """float32 sigmoid in the registry's overflow-free form, ``1/(1+t)`` or ``t/(1+t)``
    with ``t = exp(-|x|)`` from ``exp_code``."""
    (x,), i = args, tag
    one = const(1)
    inner = exp_code([f"m{i}"], i, const)
    lines = (f"m{i} = -np.abs({x})", *inner.lines, f"t{i} = {inner.value}",
             f"d{i} = {one} + t{i}")
    return ScalarCode(lines, f"{one} / d{i} if {x} >= {const(0)} else t{i} / d{i}",
                      inner.intrinsics)


__all__ = ["tanh_float32", "exp_float32", "ulp_distance", "TANH_ULP_BOUND", "EXP_ULP_BOUND",
           "ScalarCode", "tanh_code", "exp_code", "sigmoid_code"]

"""Vectorizable float32 approximations of tanh, exp and sigmoid, written once as scalar
graphs of registry ops that every code generator renders with its own op table.

LLVM here has no vector math library, so a float32 ``tanh`` in compiled code is a scalar
libm call that also stops the loop around it from vectorizing (1.6-2x of a small MLP's
step). As XLA and Eigen do, float32 ``tanh`` is instead a clamped rational function of
plain multiplies, adds and one divide, which vectorizes; ``exp`` (and ``sigmoid``) the
Cephes scheme SIMD libraries use. float64 always stays exact, and
``lower(approximate=False)`` (or ``TENSORCODE_EXACT_MATH=1``) turns the approximations
off. The reference backend runs the registry's exact references.

``TANH_ULP_BOUND``: the largest error, in float32 units in the last place against the
correctly rounded tanh, measured over a third of all float32 in [1e-4, 9.5] (both signs)
and 16 million random points: 7 ulp (mean 0.9 ulp); the tests check a fresh sample
against that bound. Inputs below 4e-4 in magnitude return ``x`` (exact to rounding);
beyond +-7.905 the result is +-1; NaN stays NaN. The coefficients are Eigen's
(``ptanh_float``), a [13/6] minimax rational function.

``EXP_ULP_BOUND``: ``x = n ln2 + r`` with ``ln2`` split in two, a degree-7 polynomial for
``e**r``, and ``2**n`` built from exponent bits in two halves (so results that are
subnormal come out right): at most 1 ulp from the correctly rounded exp over the whole
float32 range (measured over 6 million points across [-104, 89] and dense sweeps of both
ends; libm's own expf is also within 1 ulp). Above 88.7228 it gives inf, below -103.972
zero, NaN stays NaN.

``expand(op, x, tag)`` writes the approximation of ``op`` applied to ``x`` (a loop
program value) as ``Let`` statements (their names end in ``tag``) and the result's
value; ``evaluate(op, array)`` runs the same graph over a NumPy array with the registry's
references (``evaluate_graph`` any scalar graph), which is how the tests read what the
generated code computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..core import registry
from .loops import Apply, Const, Expr, Let, Ref

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

F32, I32 = "float32", "int32"


def _f(value: float) -> Const:
    return Const(value, F32)


def _op(op: str, *args: Expr, dtype: str = F32, operand: str = F32) -> Apply:
    return Apply(op, tuple(args), dtype, operand)


def _select(test: str, a: Expr, b: Expr, yes: Expr, no: Expr) -> Apply:
    """``yes if test(a, b) else no`` (a registry comparison gives 1 or 0, ``where``
    picks on it)."""
    return _op("where", _op(test, a, b), yes, no)


def _clamp(x: Expr, high: float, low: float) -> Apply:
    return _select("gt", x, _f(high), _f(high), _select("lt", x, _f(low), _f(low), x))


class _Graph:
    """Statements of one expansion, each binding a fresh name ending in the tag."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.lets: list[Let] = []

    def let(self, name: str, value: Expr) -> Ref:
        name = f"{name}_{self.tag}"
        self.lets.append(Let(name, value))
        return Ref(name)


def _tanh(g: _Graph, x: Expr) -> Expr:
    c = g.let("c", _clamp(x, TANH_CLAMP, -TANH_CLAMP))
    s = g.let("s", _op("mul", c, c))
    p = g.let("p", _f(TANH_NUMERATOR[-1]))
    for a in TANH_NUMERATOR[-2::-1]:
        p = g.let("p", _op("add", _op("mul", p, s), _f(a)))
    q = g.let("q", _f(TANH_DENOMINATOR[-1]))
    for b in TANH_DENOMINATOR[-2::-1]:
        q = g.let("q", _op("add", _op("mul", q, s), _f(b)))
    ratio = g.let("t", _op("div", _op("mul", p, c), q))
    return _select("lt", _op("abs", x), _f(TANH_TINY), x, ratio)


def _pow2(n: Expr) -> Apply:
    """``2.0 ** n`` as float32 for an int32 ``n`` in [-126, 127]: its exponent bits."""
    biased = _op("add", n, Const(127, I32), dtype=I32, operand=I32)
    bits = _op("shift_left", biased, Const(23, I32), dtype=I32, operand=I32)
    return _op("bitcast", bits, dtype=F32, operand=I32)


def _exp(g: _Graph, x: Expr) -> Expr:
    # below EXP_LOW the result is 0 (selected at the end); computing on 0 there instead
    # of EXP_LOW keeps the scaling by 2**n from underflowing, which costs a microcode
    # assist per element on x86 (a masked score of -1e9 in every causal softmax)
    c = g.let("c", _select("gt", x, _f(EXP_HIGH), _f(EXP_HIGH),
                           _select("lt", x, _f(EXP_LOW), _f(0), x)))
    n = g.let("n", _op("floor", _op("add", _op("mul", c, _f(EXP_LOG2E)), _f(0.5))))
    r = g.let("r", _op("sub", c, _op("mul", n, _f(EXP_LN2_HIGH))))
    r = g.let("r", _op("sub", r, _op("mul", n, _f(EXP_LN2_LOW))))
    y = g.let("y", _op("add", _op("mul", _f(EXP_POLYNOMIAL[0]), r), _f(EXP_POLYNOMIAL[1])))
    for coefficient in EXP_POLYNOMIAL[2:]:
        y = g.let("y", _op("add", _op("mul", y, r), _f(coefficient)))
    y = g.let("y", _op("add", _op("add", _op("mul", y, _op("mul", r, r)), r), _f(1)))
    k = g.let("k", _op("astype", n, dtype=I32))
    h = g.let("h", _op("shift_right", k, Const(1, I32), dtype=I32, operand=I32))
    rest = _op("sub", k, h, dtype=I32, operand=I32)
    y = g.let("y", _op("mul", _op("mul", y, _pow2(h)), _pow2(rest)))
    number = g.let("e", _select("eq", x, x, y, x))
    return _select("gt", x, _f(EXP_HIGH), _f(np.inf),
                   _select("lt", x, _f(EXP_LOW), _f(0), number))


def _sigmoid(g: _Graph, x: Expr) -> Expr:
    """The registry's overflow-free form, ``1/(1+t)`` or ``t/(1+t)`` with
    ``t = exp(-|x|)``."""
    m = g.let("m", _op("neg", _op("abs", x)))
    t = g.let("t", _exp(g, m))
    d = g.let("d", _op("add", _f(1), t))
    return _select("ge", x, _f(0), _op("div", _f(1), d), _op("div", t, d))


#: the float32 approximation of each approximated op
APPROXIMATIONS: dict[str, Callable[[_Graph, Expr], Expr]] = {
    "tanh": _tanh, "exp": _exp, "sigmoid": _sigmoid}


def expand(op: str, x: Expr, tag: str) -> tuple[list[Let], Expr]:
    """The float32 approximation of ``op`` on ``x``: statements, then the result."""
    graph = _Graph(tag)
    result = APPROXIMATIONS[op](graph, x)
    return graph.lets, result


def evaluate(op: str, x: np.ndarray) -> np.ndarray:
    """The approximation of ``op`` over a float32 array, by the registry's NumPy
    references of the graph's ops (what the generated code computes, operation for
    operation)."""
    lets, result = expand(op, Ref("x"), "0")
    return np.asarray(evaluate_graph(lets, result, {"x": np.asarray(x, np.float32)}),
                      np.float32)


def evaluate_graph(lets: Sequence[Let], result: Expr, values: dict[str, np.ndarray]
                   ) -> np.ndarray:
    """``result`` of the scalar graph ``lets`` over NumPy arrays (``values``: the names
    it reads) by the registry's references of its ops: what the generated code computes,
    operation for operation (the tests' view of a scalar graph)."""
    values = dict(values)

    def value(e: Expr) -> np.ndarray:
        if isinstance(e, Const):
            return np.asarray(e.value).astype(e.dtype)
        if isinstance(e, Ref):
            return values[e.name]
        assert isinstance(e, Apply)
        args = [value(a) for a in e.args]
        attrs = {"dtype": e.dtype} if e.op in ("astype", "bitcast") else {}
        with np.errstate(all="ignore"):
            out = registry.REGISTRY[e.op].reference(args, attrs)
        return np.asarray(out).astype(e.dtype, copy=False)

    for let in lets:
        values[let.name] = value(let.value)
    return value(result)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps between two float32 arrays (same sign convention as
    the bits, so -0 and +0 are 0 apart)."""
    def ordered(v: np.ndarray) -> np.ndarray:
        i = np.asarray(v, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(a) - ordered(b))


__all__ = ["APPROXIMATIONS", "expand", "evaluate", "evaluate_graph", "ulp_distance",
           "TANH_ULP_BOUND", "EXP_ULP_BOUND", "TANH_CLAMP", "TANH_TINY", "TANH_NUMERATOR",
           "TANH_DENOMINATOR", "EXP_HIGH", "EXP_LOW", "EXP_LOG2E", "EXP_LN2_HIGH",
           "EXP_LN2_LOW", "EXP_POLYNOMIAL"]

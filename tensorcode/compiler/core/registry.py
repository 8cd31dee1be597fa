"""The primitive registry: every primitive defined once, and every fact about it here.

Each ``OpDef`` holds, for one primitive, what the rest of the compiler asks about it:
its ``kind`` (the shape of loop it is), whether it is a free ``view`` of its first
input, its type rule (``infer``), its NumPy reference (``reference``), its
vector-Jacobian product (``vjp``, written with the same ``Expr`` methods a user records
with, so a gradient is more IR on a recording tape and an eager computation on the
runtime's evaluating builder), the surface that exposes it (an ``Expr`` method, a Python
operator, the subset language). How each backend lowers an op is that backend's own
table, keyed by the op's name (``backends/numba/lowerings.py``): this module imports
no backend. Readers ask the entry or
the predicates at the end of this module (``is_elementwise``, ``is_reduction``,
``is_view``) rather than keeping lists of op names. Composite functions (softmax,
cross_entropy, layer_norm, gelu, ...) are built from these primitives in
``trace/composites.py``.

Conventions: NumPy broadcasting for elementwise ops, with gradients summed back to each
operand's shape; two tensor dtypes never mix (``DTypeError``); comparisons give 0/1 in
the operand's dtype and carry no gradient; integer paths carry no gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import CompileError, DTypeError, FeedError, ShapeError
from . import philox
from .ir import SOURCE_OPS, Type, canonical_dtype
from .rules import (
    broadcast_shapes,
    keepdims_shape,
    normalize_axes,
    normalize_axis,
    require_float,
    require_int,
    same_dtype,
    unbroadcast,
)

Attrs = dict[str, Any]
InferRule = Callable[[Sequence[Type], Attrs], Type]
ReferenceRule = Callable[[Sequence[np.ndarray], Attrs], np.ndarray]
#: an op's reference rule with its attrs resolved once (see ``OpDef.prepare``)
PrepareRule = Callable[[Attrs], Callable[[Sequence[np.ndarray]], Any]]
# vjp(g, inputs, out, attrs, wants) -> one gradient (or None) per input
VjpRule = Callable[[Any, Sequence[Any], Any, Attrs, Sequence[bool]], Sequence[Any]]

#: what shape of loop an op is. ``elementwise``: every output element depends on one
#: element of each (broadcast) input, so chains fuse into one loop; ``reduction``:
#: reduces over the ``axis`` attr; ``view``: a reshape, transpose or broadcast (no data
#: moves when the schedule can read it as strides); ``movement``: copies data without
#: arithmetic (slice, pad, concat); ``index``: gathers and scatters by an integer
#: tensor; ``contraction``: matmul; ``random``: draws from a counter-based stream
#: (``philox.py``) keyed by its first input, a plan input (see ``random_blocks``).
KINDS = ("elementwise", "reduction", "view", "movement", "index", "contraction", "random")


@dataclass
class OpDef:
    """One primitive: what it is, how to type it, run it in NumPy, differentiate it and
    lower it, and which surfaces expose it.

    ``kind`` is one of ``KINDS``. ``view`` says the schedule may read the value as a
    strided view of the first input without computing it. ``arity`` is the number of
    operands (``None``: any number). ``method``: ``Expr`` has a method of the op's name
    taking no arguments (``x.exp()``), generated from this entry. ``operator``: the
    Python infix symbol that records it (``a + b``). ``subset``: the subset language
    offers it as a function of the same name. ``foldable``: constant folding may
    evaluate it (a broadcast is cheaper to compute than to store). ``prepare``: the
    reference rule's own function with the attrs resolved once, for the prepared
    interpreter (``backends.reference.Prepared``), which silences floating-point warnings
    around the whole run and casts each result to the node's dtype itself; ``None``:
    that interpreter calls ``reference``.
    """

    name: str
    kind: str
    infer: InferRule
    reference: ReferenceRule
    vjp: VjpRule | None
    view: bool = False
    arity: int | None = None
    method: bool = False
    operator: str | None = None
    subset: bool = False
    foldable: bool = True
    prepare: PrepareRule | None = None
    #: attributes that may hold floats; every other attribute number is an integer
    #: (a saved graph with a float where an integer belongs is refused when loaded)
    float_attrs: frozenset[str] = frozenset()
    #: the op calls a math-library function (exp, log, pow, tanh, sin, ...): the reference
    #: computes it with NumPy, which dispatches such ufuncs to CPU-specific SIMD kernels
    #: (AVX-512 differs from AVX2 and from the C library), while the compiled backends
    #: call the C library or TensorCode's own approximations. Results through such an op
    #: are promised equal between compiled backends bit for bit, and equal to the
    #: reference only within a few ulps; every other op is correctly rounded IEEE
    #: arithmetic (or exact) and held to the reference bit for bit.
    transcendental: bool = False

    @property
    def differentiable(self) -> bool:
        return self.vjp is not None

    @property
    def broadcasts(self) -> bool:
        """An elementwise op of several operands, which broadcast against each other."""
        return self.kind == "elementwise" and (self.arity is None or self.arity > 1)


REGISTRY: dict[str, OpDef] = {}


def register(name: str, kind: str, infer: InferRule, reference: ReferenceRule,
             vjp: VjpRule | None, *,
             arity: int | None = None, view: bool = False, method: bool = False,
             operator: str | None = None, subset: bool = False,
             foldable: bool = True, prepare: PrepareRule | None = None,
             transcendental: bool = False) -> OpDef:
    """Add a primitive. How a backend lowers it is the backend's own table, keyed by
    ``name`` (``backends/numba/lowerings.py``); the keyword facts are ``OpDef``'s
    fields."""
    if name in REGISTRY or name in SOURCE_OPS:
        raise ValueError(f"op {name!r} is already registered")
    if kind not in KINDS:
        raise ValueError(f"op {name!r}: kind {kind!r} is not one of {KINDS}")
    op = OpDef(name, kind, infer, reference, vjp, view=view, arity=arity, method=method,
               operator=operator, subset=subset, foldable=foldable, prepare=prepare,
               transcendental=transcendental)
    REGISTRY[name] = op
    return op


# ---------------------------------------------------------------------------------------
# elementwise unary ops


def _unary_infer(name: str, floats_only: bool) -> InferRule:
    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        (x,) = types
        if floats_only:
            require_float(name, x)
        return x
    return infer


def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray], vjp: VjpRule | None,
           floats_only: bool = True, method: bool = True,
           subset: bool = False, view: bool = False, transcendental: bool = False) -> None:
    """An elementwise op of one operand; by default also the method ``x.name()``."""
    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        (x,) = arrays
        with np.errstate(all="ignore"):
            return np.asarray(fn(x)).astype(x.dtype, copy=False)
    register(name, "elementwise", _unary_infer(name, floats_only), reference, vjp, arity=1,
             method=method, subset=subset, view=view, transcendental=transcendental)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0, -x))


def _erf(x: np.ndarray) -> np.ndarray:
    """The error function, SciPy's (imported on first use: ``import tensorcode`` loads
    no SciPy)."""
    from scipy.special import erf

    return erf(x)


# neg is recorded by unary minus (``-x``), not a method
_unary("neg", np.negative, lambda g, i, o, a, w: [-g], floats_only=False, method=False)
_unary("exp", np.exp, lambda g, i, o, a, w: [g * o], subset=True, transcendental=True)
_unary("log", np.log, lambda g, i, o, a, w: [g / i[0]], subset=True, transcendental=True)
_unary("log1p", np.log1p, lambda g, i, o, a, w: [g / (1 + i[0])], transcendental=True)
_unary("tanh", np.tanh, lambda g, i, o, a, w: [g * (1 - o * o)], subset=True,
       transcendental=True)
_unary("sigmoid", _sigmoid, lambda g, i, o, a, w: [g * o * (1 - o)], subset=True,
       transcendental=True)
_unary("relu", lambda x: np.maximum(x, 0), lambda g, i, o, a, w: [g * (i[0] > 0)],
       floats_only=False, subset=True)
_unary("sqrt", np.sqrt, lambda g, i, o, a, w: [g * 0.5 / o], subset=True)
_unary("abs", np.abs, lambda g, i, o, a, w: [g * ((i[0] > 0) - (i[0] < 0))],
       floats_only=False, subset=True)
_unary("sin", np.sin, lambda g, i, o, a, w: [g * i[0].cos()], subset=True, transcendental=True)
_unary("cos", np.cos, lambda g, i, o, a, w: [-(g * i[0].sin())], subset=True, transcendental=True)
# d/dx erf(x) = 2/sqrt(pi) * exp(-x^2)
_unary("erf", _erf, lambda g, i, o, a, w: [g * (2 / math.sqrt(math.pi)) * (-(i[0] * i[0])).exp()],
       transcendental=True)
# softplus = log(1 + exp(x)), written log1p(exp(-|x|)) + max(x, 0) so exp never overflows;
# its derivative is sigmoid(x)
_unary("softplus", lambda x: np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0),
       lambda g, i, o, a, w: [g * i[0].sigmoid()], transcendental=True)
# detach: identity whose gradient is zero (JAX's stop_gradient); keeps composites such
# as logsumexp from differentiating their stabilizing max. The schedule reads it as a
# view of its input.
_unary("detach", lambda x: x.copy(), None, floats_only=False, view=True)


# ---------------------------------------------------------------------------------------
# elementwise binary ops


def _binary_infer(name: str, floats_only: bool) -> InferRule:
    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        a, b = types
        dtype = same_dtype(name, types)
        if floats_only:
            require_float(name, a)
        return Type(broadcast_shapes(name, a.shape, b.shape), dtype)
    return infer


def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], vjp: VjpRule | None,
            floats_only: bool = False, operator: str | None = None,
            subset: bool = False, transcendental: bool = False) -> None:
    """An elementwise op of two broadcasting operands."""
    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        a, b = arrays
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b)).astype(a.dtype, copy=False)

    def prepare(attrs: Attrs) -> Callable[[Sequence[np.ndarray]], Any]:
        return lambda arrays: fn(arrays[0], arrays[1])
    register(name, "elementwise", _binary_infer(name, floats_only), reference, vjp, arity=2,
             operator=operator, subset=subset, prepare=prepare, transcendental=transcendental)


def _vjp_add(g, i, o, a, w):
    return [unbroadcast(g, i[0].shape) if w[0] else None,
            unbroadcast(g, i[1].shape) if w[1] else None]


def _vjp_sub(g, i, o, a, w):
    return [unbroadcast(g, i[0].shape) if w[0] else None,
            unbroadcast(-g, i[1].shape) if w[1] else None]


def _vjp_mul(g, i, o, a, w):
    return [unbroadcast(g * i[1], i[0].shape) if w[0] else None,
            unbroadcast(g * i[0], i[1].shape) if w[1] else None]


def _vjp_div(g, i, o, a, w):
    return [unbroadcast(g / i[1], i[0].shape) if w[0] else None,
            unbroadcast(-(g * o) / i[1], i[1].shape) if w[1] else None]


def _vjp_pow(g, i, o, a, w):
    x, y = i
    return [unbroadcast(g * y * x ** (y - 1), x.shape) if w[0] else None,
            unbroadcast(g * o * x.log(), y.shape) if w[1] else None]


def _vjp_maximum(g, i, o, a, w):
    # ties send the whole gradient to the first operand
    x, y = i
    pick = x >= y
    return [unbroadcast(g * pick, x.shape) if w[0] else None,
            unbroadcast(g * (1 - pick), y.shape) if w[1] else None]


def _vjp_minimum(g, i, o, a, w):
    x, y = i
    pick = x <= y
    return [unbroadcast(g * pick, x.shape) if w[0] else None,
            unbroadcast(g * (1 - pick), y.shape) if w[1] else None]


def _true_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b)


_binary("add", np.add, _vjp_add, operator="+")
_binary("sub", np.subtract, _vjp_sub, operator="-")
_binary("mul", np.multiply, _vjp_mul, operator="*")
_binary("div", _true_divide, _vjp_div, floats_only=True, operator="/")
_binary("pow", np.power, _vjp_pow, floats_only=True, operator="**", transcendental=True)
_binary("maximum", np.maximum, _vjp_maximum, subset=True)
_binary("minimum", np.minimum, _vjp_minimum, subset=True)

COMPARISONS = {"lt": (np.less, "<"), "le": (np.less_equal, "<="), "gt": (np.greater, ">"),
               "ge": (np.greater_equal, ">="), "eq": (np.equal, "=="),
               "ne": (np.not_equal, "!=")}
for _name, (_fn, _symbol) in COMPARISONS.items():
    # 0/1 in the operand's dtype; a comparison is a step function, so no gradient.
    _binary(_name, _fn, None, operator=_symbol)


# ---------------------------------------------------------------------------------------
# bit operations: what scalar graphs (the float32 approximations, lower/approximations.py,
# and the Philox rounds, lower/random_fills.py) build numbers from; no gradient, offered on
# no surface (recorded with ``Tape.apply``)

_unary("floor", np.floor, None, method=False)


def _integer_binary_infer(name: str) -> InferRule:
    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        a, b = types
        dtype = same_dtype(name, types)
        require_int(name, "operand", a)
        return Type(broadcast_shapes(name, a.shape, b.shape), dtype)
    return infer


def _shift(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
    """A bit operation of two integers (``shift_right`` is arithmetic: the sign bit is
    kept)."""
    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        a, b = arrays
        return np.asarray(fn(a, b)).astype(a.dtype, copy=False)
    register(name, "elementwise", _integer_binary_infer(name), reference, None, arity=2)


_shift("shift_left", np.left_shift)
_shift("shift_right", np.right_shift)
# bitwise and, or, xor of two integers (the Philox rounds hold 32-bit words in int64)
_shift("bitwise_and", np.bitwise_and)
_shift("bitwise_or", np.bitwise_or)
_shift("bitwise_xor", np.bitwise_xor)


def _mul_wide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (np.asarray(a).astype(np.uint64) * np.asarray(b).astype(np.uint64)).astype(a.dtype)


# the product modulo 2**64 as an unsigned multiply computes it: for two 32-bit words the
# 32x32->64 product (``mul`` of int64 may not overflow in generated code: Numba marks
# signed products as never overflowing, so an overflow there is undefined)
_shift("mul_wide", _mul_wide)


def _bitcast_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    dtype = canonical_dtype(attrs["dtype"])
    if np.dtype(dtype).itemsize != np.dtype(x.dtype).itemsize:
        raise DTypeError(f"bitcast: {x.dtype} and {dtype} differ in width; a bitcast "
                         "reads the same bits as a dtype of the same size")
    return Type(x.shape, dtype)


def _bitcast(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.array(arrays[0], order="C").view(attrs["dtype"])  # a 0-d array stays 0-d


register("bitcast", "elementwise", _bitcast_infer, _bitcast, None, arity=1)


# ---------------------------------------------------------------------------------------
# where


def _where_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    cond, a, b = types
    dtype = same_dtype("where", [a, b])
    return Type(broadcast_shapes("where", cond.shape, a.shape, b.shape), dtype)


def _where_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return _where(arrays).astype(arrays[1].dtype, copy=False)


def _where(arrays: Sequence[np.ndarray]) -> np.ndarray:
    cond, a, b = arrays
    return np.where(cond != 0, a, b)


def _where_vjp(g, i, o, a, w):
    cond, x, y = i
    zero = g.builder.constant(0, g.dtype)
    return [None,
            unbroadcast(g.builder.apply("where", [cond, g, zero]), x.shape) if w[1] else None,
            unbroadcast(g.builder.apply("where", [cond, zero, g]), y.shape) if w[2] else None]


register("where", "elementwise", _where_infer, _where_reference, _where_vjp, arity=3,
         prepare=lambda attrs: _where)


# ---------------------------------------------------------------------------------------
# reductions: attrs axis (tuple of non-negative ints) and keepdims


def _reduce_infer(name: str, floats_only: bool) -> InferRule:
    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        (x,) = types
        if floats_only:
            require_float(name, x)
        if "axis" not in attrs or not isinstance(attrs["axis"], tuple):
            raise ShapeError(f"{name}: the axis attr must be a tuple of axes, got "
                             f"{attrs.get('axis')!r:.80}")
        if not isinstance(attrs.get("keepdims"), bool):
            raise ShapeError(f"{name}: the keepdims attr must be true or false, got "
                             f"{attrs.get('keepdims')!r:.80}")
        axes = normalize_axes(name, attrs["axis"], x.rank)
        if tuple(attrs["axis"]) != axes:
            raise ShapeError(f"{name}: axis attr must be normalized, got {attrs['axis']}")
        if name in ("max", "min") and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{name}: cannot reduce an empty axis of shape {list(x.shape)}")
        if attrs.get("keepdims"):
            shape = keepdims_shape(x.shape, axes)
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return Type(shape, x.dtype)
    return infer


def _reduce(name: str, fn: Callable, vjp: VjpRule, floats_only: bool = False,
            ufunc: np.ufunc | None = None) -> None:
    """A reduction; ``ufunc``, when given, is the ufunc whose ``reduce`` ``fn`` calls on an
    array (the prepared form calls it directly, skipping ``fn``'s dispatch)."""
    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        (x,) = arrays
        result = fn(x, axis=tuple(attrs["axis"]), keepdims=bool(attrs["keepdims"]))
        return np.asarray(result).astype(x.dtype, copy=False)

    def prepare(attrs: Attrs) -> Callable[[Sequence[np.ndarray]], Any]:
        axis, keepdims = tuple(attrs["axis"]), bool(attrs["keepdims"])
        reduce = fn if ufunc is None else ufunc.reduce
        return lambda arrays: reduce(arrays[0], axis=axis, keepdims=keepdims)
    register(name, "reduction", _reduce_infer(name, floats_only), reference, vjp, arity=1,
             prepare=prepare)


def _spread(g: Any, x: Any, attrs: Attrs) -> Any:
    """Broadcast a reduction's output gradient back over the reduced axes."""
    kept = keepdims_shape(x.shape, tuple(attrs["axis"]))
    if g.shape != kept:
        g = g.reshape(kept)
    return g.broadcast_to(x.shape) if kept != x.shape else g


def _vjp_sum(g, i, o, a, w):
    return [_spread(g, i[0], a)]


def _vjp_mean(g, i, o, a, w):
    count = math.prod(i[0].shape[k] for k in a["axis"])
    return [_spread(g / max(count, 1), i[0], a)]


def _vjp_extreme(g, i, o, a, w):
    (x,) = i
    kept = keepdims_shape(x.shape, tuple(a["axis"]))
    best = o.reshape(kept) if o.shape != kept else o
    mask = x == best
    count = mask.sum(axis=a["axis"], keepdims=True)
    gk = g.reshape(kept) if g.shape != kept else g
    return [mask * (gk / count)]


_reduce("sum", np.sum, _vjp_sum, ufunc=np.add)
_reduce("mean", np.mean, _vjp_mean, floats_only=True)
_reduce("max", np.max, _vjp_extreme, ufunc=np.maximum)
_reduce("min", np.min, _vjp_extreme, ufunc=np.minimum)


# ---------------------------------------------------------------------------------------
# shape ops


def _reshape_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    shape = tuple(attrs["shape"])
    if any(d < 0 for d in shape) or math.prod(shape) != x.size:
        raise ShapeError(f"reshape: cannot reshape {list(x.shape)} ({x.size} elements) "
                         f"to {list(shape)}")
    return Type(shape, x.dtype)


register("reshape", "view", _reshape_infer,
         lambda arrays, attrs: arrays[0].reshape(attrs["shape"]),
         lambda g, i, o, a, w: [g.reshape(i[0].shape)], arity=1, view=True)


def _transpose_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    axes = tuple(attrs["axes"])
    if sorted(axes) != list(range(x.rank)):
        raise ShapeError(f"transpose: axes {list(axes)} are not a permutation of "
                         f"range({x.rank}) for shape {list(x.shape)}")
    return Type(tuple(x.shape[k] for k in axes), x.dtype)


def _transpose_vjp(g, i, o, a, w):
    inverse = tuple(int(k) for k in np.argsort(a["axes"]))
    return [g.transpose(inverse)]


register("transpose", "view", _transpose_infer,
         lambda arrays, attrs: np.ascontiguousarray(np.transpose(arrays[0], attrs["axes"])),
         _transpose_vjp, arity=1, view=True)


def _broadcast_to_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    shape = tuple(attrs["shape"])
    if len(shape) < x.rank or broadcast_shapes("broadcast_to", x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast {list(x.shape)} to {list(shape)}")
    return Type(shape, x.dtype)


# never folded: a broadcast scalar is cheaper to compute than to store
register("broadcast_to", "view", _broadcast_to_infer,
         lambda arrays, attrs: np.ascontiguousarray(np.broadcast_to(arrays[0], attrs["shape"])),
         lambda g, i, o, a, w: [unbroadcast(g, i[0].shape)], arity=1, view=True,
         foldable=False)


def _slice_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    axis = normalize_axis("slice", attrs["axis"], x.rank)
    start, stop = attrs["start"], attrs["stop"]
    if x.rank == 0:
        raise ShapeError("slice: cannot slice a scalar; reshape it first")
    if not 0 <= start <= stop <= x.shape[axis]:
        raise ShapeError(f"slice: [{start}:{stop}] is out of range for axis {axis} of shape "
                         f"{list(x.shape)}")
    shape = list(x.shape)
    shape[axis] = stop - start
    return Type(tuple(shape), x.dtype)


def _slice_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return _slice_prepare(attrs)(arrays)


def _slice_prepare(attrs: Attrs) -> Callable[[Sequence[np.ndarray]], Any]:
    # the axes after ``axis`` are taken whole without naming them
    index = (slice(None),) * attrs["axis"] + (slice(attrs["start"], attrs["stop"]),)
    return lambda arrays: np.ascontiguousarray(arrays[0][index])


def _slice_vjp(g, i, o, a, w):
    size = i[0].shape[a["axis"]]
    return [g.builder.apply("pad", [g], {"axis": a["axis"], "before": a["start"],
                                         "after": size - a["stop"]})]


# a slice moves data when it must be materialized, but the schedule can read it as a view
register("slice", "movement", _slice_infer, _slice_reference, _slice_vjp, arity=1, view=True,
         prepare=_slice_prepare)


def _pad_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    axis = normalize_axis("pad", attrs["axis"], x.rank)
    if attrs["before"] < 0 or attrs["after"] < 0:
        raise ShapeError("pad: before and after must be non-negative")
    shape = list(x.shape)
    shape[axis] += attrs["before"] + attrs["after"]
    return Type(tuple(shape), x.dtype)


def _pad_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = arrays
    widths = [(0, 0)] * x.ndim
    widths[attrs["axis"]] = (attrs["before"], attrs["after"])
    return np.pad(x, widths)


def _pad_vjp(g, i, o, a, w):
    start = a["before"]
    return [g.slice(start, start + i[0].shape[a["axis"]], axis=a["axis"])]


register("pad", "movement", _pad_infer, _pad_reference, _pad_vjp, arity=1)


def _concat_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    if not types:
        raise ShapeError("concat: needs at least one tensor")
    dtype = same_dtype("concat", types)
    first = types[0]
    if first.rank == 0:
        raise ShapeError("concat: cannot concatenate scalars; reshape them to [1] first")
    axis = normalize_axis("concat", attrs["axis"], first.rank)
    for t in types[1:]:
        if t.rank != first.rank or any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if k != axis):
            raise ShapeError(f"concat: shapes {list(first.shape)} and {list(t.shape)} differ "
                             f"outside axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return Type(tuple(shape), dtype)


def _concat_vjp(g, i, o, a, w):
    grads, offset = [], 0
    for x, wanted in zip(i, w):
        size = x.shape[a["axis"]]
        grads.append(g.slice(offset, offset + size, axis=a["axis"]) if wanted else None)
        offset += size
    return grads


register("concat", "movement", _concat_infer,
         lambda arrays, attrs: np.concatenate(arrays, axis=attrs["axis"]),
         _concat_vjp)


def _astype_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    return Type(x.shape, canonical_dtype(attrs["dtype"]))


def _astype_vjp(g, i, o, a, w):
    if not (i[0].type.is_float and o.type.is_float):
        return [None]
    return [g.astype(i[0].dtype)]


register("astype", "elementwise", _astype_infer,
         lambda arrays, attrs: arrays[0].astype(attrs["dtype"]), _astype_vjp, arity=1)


# ---------------------------------------------------------------------------------------
# indexing: take (gather), its adjoint scatter_add, one_hot


def _check_indices(op: str, indices: np.ndarray, size: int) -> None:
    if indices.size and (indices.min() < 0 or indices.max() >= size):
        bad = indices[(indices < 0) | (indices >= size)].reshape(-1)[0]
        raise FeedError(f"{op}: index {int(bad)} is out of range for an axis of size {size}")


def _take_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    x, indices = types
    require_int("take", "indices", indices)
    axis = normalize_axis("take", attrs["axis"], x.rank)
    if x.rank == 0:
        raise ShapeError("take: cannot index a scalar")
    return Type(x.shape[:axis] + indices.shape + x.shape[axis + 1:], x.dtype)


def _take_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, indices = arrays
    _check_indices("take", indices, x.shape[attrs["axis"]])
    return np.take(x, indices, axis=attrs["axis"])


def _take_vjp(g, i, o, a, w):
    x, indices = i
    return [g.builder.apply("scatter_add", [g, indices],
                            {"axis": a["axis"], "size": x.shape[a["axis"]]}), None]


register("take", "index", _take_infer, _take_reference, _take_vjp, arity=2)


def _scatter_add_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    g, indices = types
    require_int("scatter_add", "indices", indices)
    axis = attrs["axis"]
    end = axis + indices.rank
    if end > g.rank:
        raise ShapeError(f"scatter_add: values {list(g.shape)} do not hold indices "
                         f"{list(indices.shape)} at axis {axis}")
    if g.shape[axis:end] != indices.shape:
        raise ShapeError(f"scatter_add: values {list(g.shape)} do not match indices "
                         f"{list(indices.shape)} at axis {axis}")
    return Type(g.shape[:axis] + (int(attrs["size"]),) + g.shape[end:], g.dtype)


def _scatter_add_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    g, indices = arrays
    axis, size = attrs["axis"], attrs["size"]
    _check_indices("scatter_add", indices, size)
    pre = int(np.prod(g.shape[:axis], dtype=np.int64))
    post = int(np.prod(g.shape[axis + indices.ndim:], dtype=np.int64))
    out = np.zeros((pre, size, post), dtype=g.dtype)
    # numpy's stubs accept only integer arrays as ufunc.at indices, but its documented
    # contract (and runtime) takes a tuple of index arrays and slices, as here
    np.add.at(out, (slice(None), indices.reshape(-1), slice(None)),  # type: ignore[arg-type]
              g.reshape(pre, indices.size, post))
    return out.reshape(g.shape[:axis] + (size,) + g.shape[axis + indices.ndim:])


def _scatter_add_vjp(g, i, o, a, w):
    return [g.take(i[1], axis=a["axis"]), None]


register("scatter_add", "index", _scatter_add_infer, _scatter_add_reference, _scatter_add_vjp,
         arity=2)


def _one_hot_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (indices,) = types
    require_int("one_hot", "indices", indices)
    if attrs["n"] <= 0:
        raise ShapeError(f"one_hot: n must be positive, got {attrs['n']}")
    return Type(indices.shape + (int(attrs["n"]),), attrs["dtype"])


def _one_hot_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (indices,) = arrays
    _check_indices("one_hot", indices, attrs["n"])
    return (indices[..., None] == np.arange(attrs["n"])).astype(attrs["dtype"])


register("one_hot", "index", _one_hot_infer, _one_hot_reference, None, arity=1)


# ---------------------------------------------------------------------------------------
# matmul (NumPy's rules: batched, 1-D operands promoted and the added axis dropped)


def _matmul_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    a, b = types
    dtype = same_dtype("matmul", types)
    if a.rank == 0 or b.rank == 0:
        raise ShapeError(f"matmul: operands must have rank >= 1, got {list(a.shape)} "
                         f"and {list(b.shape)}; use * for scalars")
    a_shape = a.shape if a.rank >= 2 else (1,) + a.shape
    b_shape = b.shape if b.rank >= 2 else b.shape + (1,)
    if a_shape[-1] != b_shape[-2]:
        raise ShapeError(f"matmul: inner dimensions differ: {list(a.shape)} @ {list(b.shape)} "
                         f"({a_shape[-1]} != {b_shape[-2]})")
    batch = broadcast_shapes("matmul", a_shape[:-2], b_shape[:-2])
    shape = batch + (a_shape[-2], b_shape[-1])
    if a.rank == 1:
        shape = shape[:-2] + shape[-1:]
    if b.rank == 1:
        shape = shape[:-1]
    return Type(shape, dtype)


def _swap_last(x: Any) -> Any:
    axes = tuple(range(len(x.shape) - 2)) + (len(x.shape) - 1, len(x.shape) - 2)
    return x.transpose(axes)


def _matmul_vjp(g, i, o, a, w):
    x, y = i
    x2 = x if len(x.shape) >= 2 else x.reshape((1,) + x.shape)
    y2 = y if len(y.shape) >= 2 else y.reshape(y.shape + (1,))
    batch = broadcast_shapes("matmul", x2.shape[:-2], y2.shape[:-2])
    g2 = g.reshape(batch + (x2.shape[-2], y2.shape[-1]))
    gx = unbroadcast(g2 @ _swap_last(y2), x2.shape).reshape(x.shape) if w[0] else None
    gy = unbroadcast(_swap_last(x2) @ g2, y2.shape).reshape(y.shape) if w[1] else None
    return [gx, gy]


register("matmul", "contraction", _matmul_infer,
         lambda arrays, attrs: np.matmul(arrays[0], arrays[1]),
         _matmul_vjp, arity=2, operator="@")


# ---------------------------------------------------------------------------------------
# random draws: operand 0 is the key, an int64[4] input ``[k0, k1, counter_lo,
# counter_hi]`` (``Tape.random_key``); attr ``offset`` is the node's first counter block
# (the tape hands each draw its own range, so no two nodes share numbers and CSE keeps
# them apart). No draw has a gradient: dropout's gradient flows through the mask it
# multiplies by.


def _check_key(op: str, key: Type) -> None:
    if key.dtype != "int64" or key.shape != (4,):
        raise ShapeError(f"{op}: the key must be the int64[4] value of tape.random_key(), "
                         f"got {key}")


def _draw_infer(op: str) -> InferRule:
    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        (key,) = types
        _check_key(op, key)
        out = Type(tuple(attrs["shape"]), attrs["dtype"])
        if op != "bernoulli":
            require_float(op, out)
        return out
    return infer


def _uniform_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    size = math.prod(attrs["shape"])
    if attrs["dtype"] == "float32":
        w = philox.words(arrays[0], attrs["offset"], size)
        out = (w >> np.uint64(8)).astype(np.float64) * philox.TWO_M24
    else:
        w = philox.words(arrays[0], attrs["offset"], 2 * size)
        out = ((w[0::2].astype(np.float64) * 2097152.0
                + (w[1::2] >> np.uint64(11)).astype(np.float64)) * philox.TWO_M53)
    return out.astype(attrs["dtype"]).reshape(attrs["shape"])


def _normal_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    size = math.prod(attrs["shape"])
    w = philox.words(arrays[0], attrs["offset"], 4 * size).astype(np.float64).reshape(-1, 4)
    out = np.array([philox.normal(*row) for row in w.tolist()], dtype=np.float64)
    return out.astype(attrs["dtype"]).reshape(attrs["shape"])


def _bernoulli_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    size = math.prod(attrs["shape"])
    w = philox.words(arrays[0], attrs["offset"], size)
    threshold = np.uint64(philox.bernoulli_threshold(attrs["p"]))
    return (w < threshold).astype(attrs["dtype"]).reshape(attrs["shape"])


def _categorical_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    key, logits = types
    _check_key("categorical", key)
    require_float("categorical", logits)
    if logits.rank == 0 or logits.shape[-1] == 0:
        raise ShapeError(f"categorical: logits need a last axis of at least one class, got "
                         f"{list(logits.shape)}")
    return Type(logits.shape[:-1], "int64")


def _categorical_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    key, logits = arrays
    rows = logits.reshape(-1, logits.shape[-1]).astype(np.float64) / attrs["temperature"]
    w = philox.words(key, attrs["offset"], 2 * rows.shape[0]).astype(np.float64)
    out = np.array([philox.categorical_row(rows[r], philox.unit_f64(w[2 * r], w[2 * r + 1]),
                                           attrs["top_k"], attrs["top_p"])
                    for r in range(rows.shape[0])], dtype=np.int64)
    return out.reshape(logits.shape[:-1])


for _name, _rule in (("random_uniform", _uniform_reference),
                     ("random_normal", _normal_reference),
                     ("bernoulli", _bernoulli_reference)):
    register(_name, "random", _draw_infer(_name), _rule, None, arity=1, foldable=False)
register("categorical", "random", _categorical_infer, _categorical_reference, None, arity=2,
         foldable=False)


def random_words(op: str, dtype: str) -> int:
    """32-bit words a random op draws per output element (``philox.WORDS``)."""
    return philox.WORDS[op][dtype]


def random_blocks(op: str, out: Type) -> int:
    """Counter blocks (four words each) a random node with output ``out`` consumes."""
    return philox.blocks(out.size, random_words(op, out.dtype))


def is_random(op: str) -> bool:
    """The op draws from the plan's random key (its first operand)."""
    entry = _entry(op)
    return entry is not None and entry.kind == "random"


def primitive_names() -> list[str]:
    """Every registered primitive, sorted (the subset language reference uses this)."""
    return sorted(REGISTRY)


# ---------------------------------------------------------------------------------------
# predicates: what the passes, the schedule and the backends ask about an op by name.
# Source nodes (parameter, input, leaf) are no primitive: every predicate is False.


def _entry(op: str) -> OpDef | None:
    if op in SOURCE_OPS:
        return None
    entry = REGISTRY.get(op)
    if entry is None:
        raise CompileError(f"unknown primitive {op!r}; the primitives are "
                           f"{', '.join(primitive_names())}")
    return entry


def is_elementwise(op: str) -> bool:
    """Every output element depends on one element of each (broadcast) input, so the
    op fuses into a loop over its output's shape."""
    entry = _entry(op)
    return entry is not None and entry.kind == "elementwise"


def is_reduction(op: str) -> bool:
    """The op reduces its input over the ``axis`` attr (sum, mean, max, min)."""
    entry = _entry(op)
    return entry is not None and entry.kind == "reduction"


def is_transcendental(op: str) -> bool:
    """The op calls a math-library function, so its results are held to the reference
    within a few ulps rather than bit for bit (see ``OpDef.transcendental``)."""
    entry = _entry(op)
    return entry is not None and entry.transcendental


def is_view(op: str) -> bool:
    """The schedule may read the op's value as a strided view of its first input
    without computing it (reshape, transpose, broadcast_to, slice, detach)."""
    entry = _entry(op)
    return entry is not None and entry.view

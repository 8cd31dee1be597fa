"""The primitive registry: every primitive defined once.

Each ``OpDef`` holds, for one primitive, its type rule (``infer``), its NumPy reference
(``reference``), its vector-Jacobian product (``vjp``), written with the same ``Expr``
methods a user records with, so a gradient is more IR on a recording tape and an eager
computation on the runtime's evaluating builder, and, for elementwise ops, its lowering
(``lowerings["numba"]``: the scalar expression the Numba backend emits in fused loops). Composite functions (softmax, cross_entropy,
layer_norm, gelu, ...) are built from these primitives in ``functions.py``.

Conventions: NumPy broadcasting for elementwise ops, with gradients summed back to each
operand's shape; two tensor dtypes never mix (``DTypeError``); comparisons give 0/1 in
the operand's dtype and carry no gradient; integer paths carry no gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import DTypeError, FeedError, ShapeError
from .ir import FLOAT_DTYPES, INT_DTYPES, Type, canonical_dtype

Attrs = dict[str, Any]
InferRule = Callable[[Sequence[Type], Attrs], Type]
ReferenceRule = Callable[[Sequence[np.ndarray], Attrs], np.ndarray]
# vjp(g, inputs, out, attrs, wants) -> one gradient (or None) per input
VjpRule = Callable[[Any, Sequence[Any], Any, Attrs, Sequence[bool]], Sequence[Any]]


@dataclass
class OpDef:
    """One primitive: how to type it, run it in NumPy, and differentiate it.

    ``kind`` tells the compiler what shape of loop the op is: ``unary`` and ``binary``
    and ``where`` are elementwise (fusable), ``reduce`` reduces over ``axis``,
    ``shape`` moves data without arithmetic, ``matmul`` and ``index`` are their own.
    """

    name: str
    kind: str
    infer: InferRule
    reference: ReferenceRule
    vjp: VjpRule | None
    lowerings: dict[str, Any] = field(default_factory=dict)

    @property
    def differentiable(self) -> bool:
        return self.vjp is not None


REGISTRY: dict[str, OpDef] = {}


def register(name: str, kind: str, infer: InferRule, reference: ReferenceRule,
             vjp: VjpRule | None, scalar: str | None = None) -> OpDef:
    """Add a primitive. ``scalar`` is an elementwise op's lowering: one NumPy-scalar
    expression with ``{0}``, ``{1}``, ``{2}`` for the operands' values, ``{one}`` and
    ``{zero}`` for constants of the result dtype, ``{zero0}`` for a zero of operand 0's
    dtype and ``{np_dtype}`` for the result's NumPy scalar type; the Numba backend
    emits it inside its fused loops (``lowerings["numba"]``). Reductions, shape, index
    and matmul ops are lowered by ``kind`` (the schedule and the backend's loops)."""
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    op = OpDef(name, kind, infer, reference, vjp)
    if scalar is not None:
        op.lowerings["numba"] = scalar
    REGISTRY[name] = op
    return op


# ---------------------------------------------------------------------------------------
# type-rule helpers


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcasting rule, with an error that names the op and the shapes."""
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            listed = " and ".join(str(list(s)) for s in shapes)
            raise ShapeError(f"{op}: shapes {listed} do not broadcast "
                             f"(axis {axis - rank} has sizes {sorted(dims)}); "
                             "reshape or broadcast_to one operand")
        result.append(dims.pop() if dims else 1)
    return tuple(result)


def same_dtype(op: str, types: Sequence[Type]) -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        raise DTypeError(f"{op}: operands have dtypes {' and '.join(t.dtype for t in types)}; "
                         "tensor dtypes never mix silently, cast one with .astype(...)")
    return types[0].dtype


def require_float(op: str, t: Type) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise DTypeError(f"{op}: needs a float operand but got {t.dtype}; "
                         "cast with .astype('float32') or .astype('float64')")


def require_int(op: str, what: str, t: Type) -> None:
    if t.dtype not in INT_DTYPES:
        raise DTypeError(f"{op}: {what} must be an integer tensor but got {t.dtype}; "
                         "cast with .astype('int64')")


def normalize_axis(op: str, axis: int, rank: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise ShapeError(f"{op}: axis must be an int, got {axis!r}")
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{op}: axis {axis} is out of range for rank {rank}")
    return int(axis) % max(rank, 1)


def normalize_axes(op: str, axis: Any, rank: int) -> tuple[int, ...]:
    """``None`` means every axis; an int or a sequence of ints otherwise."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    axes = tuple(sorted({normalize_axis(op, a, rank) for a in axis}))
    if len(axes) != len(tuple(axis)):
        raise ShapeError(f"{op}: axis {tuple(axis)} names an axis twice")
    return axes


# ---------------------------------------------------------------------------------------
# gradient helpers (work on any builder's Expr)


def unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast gradient back to an operand's ``shape``."""
    if g.shape == shape:
        return g
    lead = len(g.shape) - len(shape)
    axes = list(range(lead))
    axes += [lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1]
    if axes:
        g = g.sum(axis=tuple(axes))
    return g.reshape(shape) if g.shape != shape else g


def _keepdims_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


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
           scalar: str, floats_only: bool = True) -> None:
    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        (x,) = arrays
        with np.errstate(all="ignore"):
            return np.asarray(fn(x)).astype(x.dtype, copy=False)
    register(name, "unary", _unary_infer(name, floats_only), reference, vjp, scalar)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0, -x))


_unary("neg", np.negative, lambda g, i, o, a, w: [-g], "-{0}", floats_only=False)
_unary("exp", np.exp, lambda g, i, o, a, w: [g * o], "np.exp({0})")
_unary("log", np.log, lambda g, i, o, a, w: [g / i[0]], "np.log({0})")
_unary("tanh", np.tanh, lambda g, i, o, a, w: [g * (1 - o * o)], "np.tanh({0})")
# exp of -|x| never overflows: 1/(1+exp(-x)) for x >= 0, exp(x)/(1+exp(x)) below
_unary("sigmoid", _sigmoid, lambda g, i, o, a, w: [g * o * (1 - o)],
       "({one} / ({one} + np.exp(-{0})) if {0} >= {zero} else "
       "np.exp({0}) / ({one} + np.exp({0})))")
_unary("relu", lambda x: np.maximum(x, 0), lambda g, i, o, a, w: [g * (i[0] > 0)],
       "np.maximum({0}, {zero})", floats_only=False)
_unary("sqrt", np.sqrt, lambda g, i, o, a, w: [g * 0.5 / o], "np.sqrt({0})")
_unary("abs", np.abs, lambda g, i, o, a, w: [g * ((i[0] > 0) - (i[0] < 0))], "np.abs({0})",
       floats_only=False)
_unary("sin", np.sin, lambda g, i, o, a, w: [g * i[0].cos()], "np.sin({0})")
_unary("cos", np.cos, lambda g, i, o, a, w: [-(g * i[0].sin())], "np.cos({0})")
# detach: identity whose gradient is zero (JAX's stop_gradient); keeps composites such
# as logsumexp from differentiating their stabilizing max.
_unary("detach", lambda x: x.copy(), None, "{0}", floats_only=False)


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
            scalar: str, floats_only: bool = False, kind: str = "binary") -> None:
    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        a, b = arrays
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b)).astype(a.dtype, copy=False)
    register(name, kind, _binary_infer(name, floats_only), reference, vjp, scalar)


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


_binary("add", np.add, _vjp_add, "{0} + {1}")
_binary("sub", np.subtract, _vjp_sub, "{0} - {1}")
_binary("mul", np.multiply, _vjp_mul, "{0} * {1}")
_binary("div", _true_divide, _vjp_div, "{0} / {1}", floats_only=True)
_binary("pow", np.power, _vjp_pow, "{0} ** {1}", floats_only=True)
_binary("maximum", np.maximum, _vjp_maximum, "np.maximum({0}, {1})")
_binary("minimum", np.minimum, _vjp_minimum, "np.minimum({0}, {1})")

COMPARISONS = {"lt": (np.less, "<"), "le": (np.less_equal, "<="), "gt": (np.greater, ">"),
               "ge": (np.greater_equal, ">="), "eq": (np.equal, "=="),
               "ne": (np.not_equal, "!=")}
for _name, (_fn, _symbol) in COMPARISONS.items():
    # 0/1 in the operand's dtype; a comparison is a step function, so no gradient.
    _binary(_name, _fn, None, f"({{one}} if {{0}} {_symbol} {{1}} else {{zero}})")


# ---------------------------------------------------------------------------------------
# where


def _where_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    cond, a, b = types
    dtype = same_dtype("where", [a, b])
    return Type(broadcast_shapes("where", cond.shape, a.shape, b.shape), dtype)


def _where_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    cond, a, b = arrays
    return np.where(cond != 0, a, b).astype(a.dtype, copy=False)


def _where_vjp(g, i, o, a, w):
    cond, x, y = i
    zero = g.builder.constant(0, g.dtype)
    return [None,
            unbroadcast(g.builder.apply("where", [cond, g, zero]), x.shape) if w[1] else None,
            unbroadcast(g.builder.apply("where", [cond, zero, g]), y.shape) if w[2] else None]


register("where", "where", _where_infer, _where_reference, _where_vjp,
         "({1} if {0} != {zero0} else {2})")


# ---------------------------------------------------------------------------------------
# reductions: attrs axis (tuple of non-negative ints) and keepdims


def _reduce_infer(name: str, floats_only: bool) -> InferRule:
    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        (x,) = types
        if floats_only:
            require_float(name, x)
        axes = normalize_axes(name, attrs.get("axis"), x.rank)
        if tuple(attrs.get("axis", ())) != axes:
            raise ShapeError(f"{name}: axis attr must be normalized, got {attrs.get('axis')}")
        if name in ("max", "min") and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{name}: cannot reduce an empty axis of shape {list(x.shape)}")
        if attrs.get("keepdims"):
            shape = _keepdims_shape(x.shape, axes)
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return Type(shape, x.dtype)
    return infer


def _reduce(name: str, fn: Callable, vjp: VjpRule, floats_only: bool = False) -> None:
    def reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        (x,) = arrays
        result = fn(x, axis=tuple(attrs["axis"]), keepdims=bool(attrs["keepdims"]))
        return np.asarray(result).astype(x.dtype, copy=False)
    register(name, "reduce", _reduce_infer(name, floats_only), reference, vjp)


def _spread(g: Any, x: Any, attrs: Attrs) -> Any:
    """Broadcast a reduction's output gradient back over the reduced axes."""
    kept = _keepdims_shape(x.shape, tuple(attrs["axis"]))
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
    kept = _keepdims_shape(x.shape, tuple(a["axis"]))
    best = o.reshape(kept) if o.shape != kept else o
    mask = x == best
    count = mask.sum(axis=a["axis"], keepdims=True)
    gk = g.reshape(kept) if g.shape != kept else g
    return [mask * (gk / count)]


_reduce("sum", np.sum, _vjp_sum)
_reduce("mean", np.mean, _vjp_mean, floats_only=True)
_reduce("max", np.max, _vjp_extreme)
_reduce("min", np.min, _vjp_extreme)


# ---------------------------------------------------------------------------------------
# shape ops


def _reshape_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    shape = tuple(attrs["shape"])
    if any(d < 0 for d in shape) or math.prod(shape) != x.size:
        raise ShapeError(f"reshape: cannot reshape {list(x.shape)} ({x.size} elements) "
                         f"to {list(shape)}")
    return Type(shape, x.dtype)


register("reshape", "shape", _reshape_infer,
         lambda arrays, attrs: arrays[0].reshape(attrs["shape"]),
         lambda g, i, o, a, w: [g.reshape(i[0].shape)])


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


register("transpose", "shape", _transpose_infer,
         lambda arrays, attrs: np.ascontiguousarray(np.transpose(arrays[0], attrs["axes"])),
         _transpose_vjp)


def _broadcast_to_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    shape = tuple(attrs["shape"])
    if len(shape) < x.rank or broadcast_shapes("broadcast_to", x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast {list(x.shape)} to {list(shape)}")
    return Type(shape, x.dtype)


register("broadcast_to", "shape", _broadcast_to_infer,
         lambda arrays, attrs: np.ascontiguousarray(np.broadcast_to(arrays[0], attrs["shape"])),
         lambda g, i, o, a, w: [unbroadcast(g, i[0].shape)])


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
    (x,) = arrays
    index = [slice(None)] * x.ndim
    index[attrs["axis"]] = slice(attrs["start"], attrs["stop"])
    return np.ascontiguousarray(x[tuple(index)])


def _slice_vjp(g, i, o, a, w):
    size = i[0].shape[a["axis"]]
    return [g.builder.apply("pad", [g], {"axis": a["axis"], "before": a["start"],
                                         "after": size - a["stop"]})]


register("slice", "shape", _slice_infer, _slice_reference, _slice_vjp)


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


register("pad", "shape", _pad_infer, _pad_reference, _pad_vjp)


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


register("concat", "shape", _concat_infer,
         lambda arrays, attrs: np.concatenate(arrays, axis=attrs["axis"]),
         _concat_vjp)


def _astype_infer(types: Sequence[Type], attrs: Attrs) -> Type:
    (x,) = types
    return Type(x.shape, canonical_dtype(attrs["dtype"]))


def _astype_vjp(g, i, o, a, w):
    if not (i[0].type.is_float and o.type.is_float):
        return [None]
    return [g.astype(i[0].dtype)]


register("astype", "unary", _astype_infer,
         lambda arrays, attrs: arrays[0].astype(attrs["dtype"]),
         _astype_vjp, "{np_dtype}({0})")


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


register("take", "index", _take_infer, _take_reference, _take_vjp)


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
    np.add.at(out, (slice(None), indices.reshape(-1), slice(None)),
              g.reshape(pre, indices.size, post))
    return out.reshape(g.shape[:axis] + (size,) + g.shape[axis + indices.ndim:])


def _scatter_add_vjp(g, i, o, a, w):
    return [g.take(i[1], axis=a["axis"]), None]


register("scatter_add", "index", _scatter_add_infer, _scatter_add_reference, _scatter_add_vjp)


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


register("one_hot", "index", _one_hot_infer, _one_hot_reference, None)


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


register("matmul", "matmul", _matmul_infer,
         lambda arrays, attrs: np.matmul(arrays[0], arrays[1]),
         _matmul_vjp)


def primitive_names() -> list[str]:
    """Every registered primitive, sorted (the subset language reference uses this)."""
    return sorted(REGISTRY)


# ---------------------------------------------------------------------------------------
# op facts the scheduler asks for


def is_elementwise(op: str) -> bool:
    """Whether every output element of ``op`` depends on one element of each input."""
    return op in REGISTRY and REGISTRY[op].kind in ("unary", "binary", "where")


def is_reduction(op: str) -> bool:
    """Whether ``op`` reduces axes of one input (fused with the loop that feeds it)."""
    return op in ("sum", "mean", "max", "min")


def is_view(op: str) -> bool:
    """Whether ``op`` computes nothing: its value is a strided view of its input."""
    return op in ("reshape", "transpose", "broadcast_to", "slice", "detach")

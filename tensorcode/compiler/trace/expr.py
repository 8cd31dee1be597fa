"""``Expr``, the handle every recorded or computed value is, and the builder protocol.

Every operation on an ``Expr`` goes through its builder's ``apply(op, inputs, attrs)``:
a tape (``tape.py``) records the op as a node of the IR, the eager builder evaluates it
at once with the op's NumPy reference. The VJP rules in ``core/registry.py`` are written
against ``Expr`` methods only, so the same rules record gradients as IR and compute them
eagerly at run time, and the two cannot drift apart. ``Expr`` gains a method for every
registry entry that asks for one (below) and for each composite (``composites.py``).
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import DTypeError, ShapeError, TensorCodeError
from ..core import registry as primitives
from ..core.dtypes import FLOAT_DTYPES
from ..core.ir import Type, canonical_dtype


def as_array(value: Any, dtype: Any = None) -> np.ndarray:
    """A Python value as an array of a supported dtype; floats default to float64 and
    ints to int64 (NumPy's defaults), bools become 0/1 integers."""
    if isinstance(value, Expr):
        raise TypeError("expected a concrete value, got an Expr; pass the array instead")
    array = np.asarray(value)
    if array.size > 1 and not any(array.strides):
        # one value broadcast to a shape (``nn.init.zeros``): kept one element wide, so
        # recording a large model that is about to be loaded touches no memory per element
        return np.broadcast_to(as_array(array[(0,) * array.ndim], dtype), array.shape)
    if dtype is not None:
        array = array.astype(canonical_dtype(dtype))
    elif array.dtype == np.bool_:
        array = array.astype(np.int64)
    elif array.dtype.kind == "f" and array.dtype.name not in FLOAT_DTYPES:
        array = array.astype(np.float64)
    elif array.dtype.kind in "iu" and array.dtype.name not in ("int32", "int64"):
        array = array.astype(np.int64)
    canonical_dtype(array.dtype)
    return np.array(array, copy=True, order="C")


#: how elementwise ops treat operands of different shapes (``Tape(broadcast=...)``)
BROADCAST_MODES = ("numpy", "explicit")


def check_broadcast_mode(mode: Any) -> str:
    if mode not in BROADCAST_MODES:
        raise ValueError(f"broadcast must be one of {list(BROADCAST_MODES)}, got {mode!r}")
    return str(mode)


class Builder:
    """What an ``Expr`` needs from whoever built it."""

    def apply(self, op: str, inputs: Sequence[Expr], attrs: dict[str, Any] | None = None
              ) -> Expr:
        raise NotImplementedError  # pragma: no cover - abstract

    def constant(self, value: Any, dtype: Any = None) -> Expr:
        raise NotImplementedError  # pragma: no cover - abstract

    @contextlib.contextmanager
    def broadcasting(self, mode: str) -> Iterator[None]:
        """Record under broadcast ``mode`` inside the block (see ``Tape``). A builder
        that evaluates at once (the runtime backward) checks nothing, so this is a no-op
        here; the library's composites and layers use it so their own broadcasts, which
        are part of their definition, never count as accidents on an explicit tape."""
        check_broadcast_mode(mode)
        yield

    def lift(self, value: Any, like: Expr) -> Expr:
        """Turn an operand into an ``Expr``. Python scalars are weak: they take the
        tensor's dtype. Arrays and NumPy scalars (all of them, ``np.float64`` included)
        keep their own dtype."""
        if isinstance(value, Expr):
            if value.builder is not self:
                raise TensorCodeError(
                    "these expressions were recorded on different tapes; record every "
                    "operand of an op on the same tape")
            return value
        if isinstance(value, bool) or (isinstance(value, numbers.Integral) and not isinstance(
                value, np.generic)):
            return self.constant(value, like.dtype)
        if isinstance(value, float) and not isinstance(value, np.generic):
            # np.float64 subclasses float but, like every NumPy scalar, is strong
            if like.dtype not in FLOAT_DTYPES:
                raise DTypeError(f"cannot combine a {like.dtype} tensor with the Python float "
                                 f"{value!r}; cast the tensor with .astype('float32') first")
            return self.constant(value, like.dtype)
        return self.constant(value)


class Expr:
    """A symbol: one value recorded on a tape (or computed by the eager builder).

    Exprs hash by identity and key feeds and parameter tables; ``==`` records a
    comparison rather than testing identity, as in NumPy.
    """

    __slots__ = ("__weakref__", "builder", "index", "type", "value")
    __array_priority__ = 1000  # make ndarray <op> Expr defer to Expr's reflected ops

    def __init__(self, builder: Builder, index: int, type: Type,
                 value: np.ndarray | None = None) -> None:
        self.builder = builder
        self.index = index
        self.type = type
        self.value = value

    # -- introspection ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return self.type.rank

    def __repr__(self) -> str:
        """``Expr(%2 input "x" : f64[4])``: the node, what it is (an input, a parameter, a
        constant or the op that computed it), its name when it has one, and its type."""
        nodes = getattr(self.builder, "_nodes", None)
        if nodes is None or not 0 <= self.index < len(nodes):
            return f"Expr(%{self.index} : {self.type})"
        node = nodes[self.index]
        kind = "constant" if node.op == "leaf" else node.op
        name = f' "{node.name}"' if node.name else ""
        return f"Expr(%{self.index} {kind}{name} : {self.type})"

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("an Expr has no truth value at record time; use tc.where(...) to "
                        "choose between values")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("a scalar Expr has no len()")
        return self.shape[0]

    def _apply(self, op: str, *inputs: Any, **attrs: Any) -> Expr:
        lifted = [self, *(self.builder.lift(x, self) for x in inputs)]
        return self.builder.apply(op, lifted, attrs)

    def _binary(self, op: str, other: Any, reverse: bool = False) -> Expr:
        other = self.builder.lift(other, self)
        a, b = (other, self) if reverse else (self, other)
        return self.builder.apply(op, [a, b])

    # -- arithmetic ---------------------------------------------------------------------
    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, True)
    def __sub__(self, o): return self._binary("sub", o)
    def __rsub__(self, o): return self._binary("sub", o, True)
    def __mul__(self, o): return self._binary("mul", o)
    def __rmul__(self, o): return self._binary("mul", o, True)
    def __truediv__(self, o): return self._binary("div", o)
    def __rtruediv__(self, o): return self._binary("div", o, True)
    def __pow__(self, o): return self._binary("pow", o)
    def __rpow__(self, o): return self._binary("pow", o, True)
    def __matmul__(self, o): return self._binary("matmul", o)
    def __rmatmul__(self, o): return self._binary("matmul", o, True)
    def __neg__(self): return self._apply("neg")
    def __pos__(self): return self

    # -- comparisons: 0/1 in the operand's dtype, no gradient --------------------------------
    def __lt__(self, o: Any) -> Expr: return self._binary("lt", o)
    def __le__(self, o: Any) -> Expr: return self._binary("le", o)
    def __gt__(self, o: Any) -> Expr: return self._binary("gt", o)
    def __ge__(self, o: Any) -> Expr: return self._binary("ge", o)
    # object's == returns bool; an Expr's records a comparison, as NumPy's does
    def __eq__(self, o: Any) -> Expr: return self._binary("eq", o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Expr: return self._binary("ne", o)  # type: ignore[override]

    # -- unary functions ---------------------------------------------------------------
    # x.exp(), x.tanh(), x.detach(), ...: one method per registry entry with ``method``
    # set, added after the class by ``_add_registry_methods``.
    def __abs__(self): return self._apply("abs")

    if TYPE_CHECKING:  # the generated methods, as a type checker sees them
        def __getattr__(self, name: str) -> Callable[[], Expr]: ...

    # -- reductions ----------------------------------------------------------------------
    def _reduce(self, op: str, axis: Any, keepdims: bool) -> Expr:
        axes = primitives.normalize_axes(op, axis, self.ndim)
        return self._apply(op, axis=axes, keepdims=bool(keepdims))

    def sum(self, axis: Any = None, keepdims: bool = False) -> Expr:
        return self._reduce("sum", axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Expr:
        return self._reduce("mean", axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Expr:
        return self._reduce("max", axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Expr:
        return self._reduce("min", axis, keepdims)

    # -- shape ---------------------------------------------------------------------------
    def reshape(self, *shape: Any) -> Expr:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(d) for d in shape)
        if shape.count(-1) > 1:
            raise ShapeError(f"reshape: at most one -1 allowed, got {list(shape)}")
        if -1 in shape:
            known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
            if known == 0 or self.type.size % known:
                raise ShapeError(f"reshape: cannot reshape {list(self.shape)} to {list(shape)}")
            shape = tuple(self.type.size // known if d == -1 else d for d in shape)
        if shape == self.shape:
            return self
        return self._apply("reshape", shape=shape)

    def transpose(self, *axes: Any) -> Expr:
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if not axes:
            axes = tuple(reversed(range(self.ndim)))
        axes = tuple(primitives.normalize_axis("transpose", a, self.ndim) for a in axes)
        return self._apply("transpose", axes=axes)

    @property
    def T(self) -> Expr:
        return self.transpose()

    def broadcast_to(self, shape: Sequence[int]) -> Expr:
        shape = tuple(int(d) for d in shape)
        if shape == self.shape:
            return self
        return self._apply("broadcast_to", shape=shape)

    def broadcast_like(self, other: Expr) -> Expr:
        return self.broadcast_to(other.shape)

    def slice(self, start: int | None, stop: int | None = None, axis: int = 0) -> Expr:
        """Elements ``start:stop`` along ``axis`` (negative bounds count from the end)."""
        if self.ndim == 0:
            raise ShapeError("slice: cannot slice a scalar; reshape it first")
        axis = primitives.normalize_axis("slice", axis, self.ndim)
        size = self.shape[axis]
        begin, end, _ = slice(start, stop).indices(size)
        if (start is not None and not -size <= start <= size) or (
                stop is not None and not -size <= stop <= size):
            raise ShapeError(f"slice: [{start}:{stop}] is out of range for axis {axis} of "
                             f"shape {list(self.shape)}")
        return self._apply("slice", start=begin, stop=max(begin, end), axis=axis)

    def take(self, indices: Any, axis: int = 0) -> Expr:
        """Gather along ``axis`` (an embedding lookup when ``axis`` is 0)."""
        if not isinstance(indices, Expr):
            indices = self.builder.constant(as_array(indices))
        axis = primitives.normalize_axis("take", axis, self.ndim)
        return self.builder.apply("take", [self, self.builder.lift(indices, self)],
                                  {"axis": axis})

    def astype(self, dtype: Any) -> Expr:
        dtype = canonical_dtype(dtype)
        if dtype == self.dtype:
            return self
        return self._apply("astype", dtype=dtype)

    # -- composites --------------------------------------------------------------------
    # x.softmax(), x.cross_entropy(labels), ...: the functions of ``composites``, added
    # to the class there (as the registry's methods are added below)
    if TYPE_CHECKING:
        def softmax(self, axis: int = -1) -> Expr: ...

        def log_softmax(self, axis: int = -1) -> Expr: ...

        def logsumexp(self, axis: Any = None, keepdims: bool = False) -> Expr: ...

        def layer_norm(self, eps: float = 1e-5) -> Expr: ...

        def gelu(self) -> Expr: ...

        def cross_entropy(self, labels: Any) -> Expr: ...


def _registry_method(op: str) -> Callable[[Expr], Expr]:
    def method(self: Expr) -> Expr:
        return self._apply(op)
    method.__name__ = op
    method.__qualname__ = f"Expr.{op}"
    method.__doc__ = f"Record the ``{op}`` primitive on this value's tape (elementwise)."
    return method


def _add_registry_methods() -> None:
    """Give ``Expr`` a method for every registry entry that asks for one, so a new
    elementwise primitive is recordable as ``x.name()`` from its entry alone."""
    for entry in primitives.REGISTRY.values():
        if not entry.method:
            continue
        if entry.name in vars(Expr):
            raise TypeError(f"the primitive {entry.name!r} asks for an Expr method, but Expr "
                            "already has an attribute of that name")
        setattr(Expr, entry.name, _registry_method(entry.name))


_add_registry_methods()


__all__ = ["as_array", "Builder", "Expr", "BROADCAST_MODES", "check_broadcast_mode"]

"""Recording: the ``Tape``, the ``Expr`` handles it returns, and the eager builder.

Every operation on an ``Expr`` goes through its builder's ``apply(op, inputs, attrs)``.
A ``Tape`` records the op as a node of the IR; an ``Eager`` builder evaluates it at
once with the op's NumPy reference. The VJP rules in ``core/registry.py`` are written against
``Expr`` methods only, so the same rules record gradients as IR (``differentiate``) and
compute them eagerly at run time (``run.backward``), and the two cannot drift apart.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import DTypeError, ShapeError, TensorCodeError, TrainingError
from ..core import registry as primitives
from ..core.ir import Node, Type, canonical_dtype, freeze_attrs

if TYPE_CHECKING:  # pragma: no cover
    from ..plans.network import Network


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
    elif array.dtype.kind == "f" and array.dtype.name not in ("float32", "float64"):
        array = array.astype(np.float64)
    elif array.dtype.kind in "iu" and array.dtype.name not in ("int32", "int64"):
        array = array.astype(np.int64)
    canonical_dtype(array.dtype)
    return np.array(array, copy=True, order="C")


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
            if like.dtype not in ("float32", "float64"):
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

    # -- composites ----------------------------------------------------------------------
    def softmax(self, axis: int = -1) -> Expr:
        from .composites import softmax
        return softmax(self, axis)

    def log_softmax(self, axis: int = -1) -> Expr:
        from .composites import log_softmax
        return log_softmax(self, axis)

    def logsumexp(self, axis: Any = None, keepdims: bool = False) -> Expr:
        from .composites import logsumexp
        return logsumexp(self, axis, keepdims)

    def layer_norm(self, eps: float = 1e-5) -> Expr:
        from .composites import layer_norm
        return layer_norm(self, eps)

    def gelu(self) -> Expr:
        from .composites import gelu
        return gelu(self)

    def cross_entropy(self, labels: Any) -> Expr:
        from .composites import cross_entropy
        return cross_entropy(self, labels)


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


class Eager(Builder):
    """Evaluates each op at once with its NumPy reference (the runtime backward)."""

    def apply(self, op: str, inputs: Sequence[Expr], attrs: dict[str, Any] | None = None
              ) -> Expr:
        attrs = dict(freeze_attrs(attrs))
        rule = primitives.REGISTRY[op]
        out_type = rule.infer([x.type for x in inputs], attrs)
        values = []
        for x in inputs:
            assert x.value is not None  # every eager Expr holds its value
            values.append(x.value)
        return Expr(self, -1, out_type, rule.reference(values, attrs))

    def constant(self, value: Any, dtype: Any = None) -> Expr:
        array = as_array(value, dtype)
        return Expr(self, -1, Type.of(array), array)

    def wrap(self, array: np.ndarray) -> Expr:
        return Expr(self, -1, Type.of(array), array)


class Adjoints:
    """The recorded gradients of one loss: ``roots()`` is the loss followed by one
    gradient per ``wrt`` parameter, the list an entry lowers; ``of(p)`` is p's gradient.
    ``inputs`` and ``input_gradients`` hold the gradients of the inputs asked for with
    ``differentiate(..., inputs=...)`` (not among ``roots()``: a table has no slot for
    them)."""

    def __init__(self, loss: Expr, wrt: Sequence[Expr], gradients: Sequence[Expr],
                 inputs: Sequence[Expr] = (), input_gradients: Sequence[Expr] = ()) -> None:
        self.loss = loss
        self.wrt = tuple(wrt)
        self.gradients = tuple(gradients)
        self.inputs = tuple(inputs)
        self.input_gradients = tuple(input_gradients)

    def roots(self) -> list[Expr]:
        return [self.loss, *self.gradients]

    def of(self, parameter: Expr) -> Expr:
        for p, g in zip(self.wrt + self.inputs, self.gradients + self.input_gradients):
            if p is parameter:
                return g
        raise TensorCodeError(f"{parameter!r} is not among the parameters this loss was "
                              "differentiated with respect to")

    def __iter__(self):
        return iter(zip(self.wrt, self.gradients))

    def __len__(self) -> int:
        return len(self.wrt)


#: how elementwise ops treat operands of different shapes (``Tape(broadcast=...)``)
BROADCAST_MODES = ("numpy", "explicit")


def check_broadcast_mode(mode: Any) -> str:
    if mode not in BROADCAST_MODES:
        raise ValueError(f"broadcast must be one of {list(BROADCAST_MODES)}, got {mode!r}")
    return str(mode)


def _python_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


class Tape(Builder):
    """Records ops into an IR graph; ``into_network()`` seals it into a ``Network``.

    ``broadcast`` says how elementwise ops of several operands (``+ - * / **``,
    comparisons, ``where``, ``maximum``, ``minimum``) treat different shapes.
    ``"numpy"`` (the default) broadcasts them as NumPy, PyTorch and JAX do.
    ``"explicit"`` follows the Topos guide's rule that nothing broadcasts by accident:
    operands of different shapes raise ``ShapeError`` unless the smaller side was
    broadcast with ``broadcast_to``/``broadcast_like``. A Python number is a weak literal
    there too (it takes the tensor's shape as it takes its dtype), and the library's
    composites, layers and recorded gradients broadcast as they are defined.
    """

    def __init__(self, broadcast: str = "numpy") -> None:
        self._nodes: list[Node] = []
        self._exprs: list[Expr] = []
        self._network: Network | None = None
        self._modes = [check_broadcast_mode(broadcast)]
        self._literals: set[int] = set()  # nodes lifted from Python numbers
        self._random_key: Expr | None = None
        self._random_blocks = 0

    @property
    def broadcast(self) -> str:
        """The broadcast mode this tape records under (``"numpy"`` or ``"explicit"``)."""
        return self._modes[0]

    @contextlib.contextmanager
    def broadcasting(self, mode: str) -> Iterator[None]:
        """Record under broadcast ``mode`` inside the block, whatever the tape's own."""
        self._modes.append(check_broadcast_mode(mode))
        try:
            yield
        finally:
            self._modes.pop()

    def lift(self, value: Any, like: Expr) -> Expr:
        expr = super().lift(value, like)
        if _python_number(value):
            self._literals.add(expr.index)
        return expr

    def _check_explicit(self, op: str, inputs: Sequence[Expr]) -> None:
        """Under ``broadcast="explicit"``, refuse operands of different shapes."""
        shapes = []
        for x in inputs:
            if x.index in self._literals or self._nodes[x.index].op == "broadcast_to":
                continue  # a weak literal, or a side broadcast on purpose
            shapes.append(x.shape)
        if len(set(shapes)) > 1:
            try:
                target = tuple(np.broadcast_shapes(*shapes))
            except ValueError:  # they do not broadcast at all
                target = max(shapes, key=len)
            listed = " and ".join(str(list(shape)) for shape in shapes)
            raise ShapeError(
                f"{op}: shapes {listed} differ, and this tape broadcasts nothing by accident "
                f"(Tape(broadcast='explicit')); broadcast the smaller side first with "
                f".broadcast_to({list(target)}) or .broadcast_like(other), or record on "
                "Tape() for NumPy broadcasting")

    # -- recording -----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._network is not None:
            raise TensorCodeError(
                "this tape was sealed by into_network(); it records nothing more. Record "
                "every expression (twins and gradients too) before sealing, or start a new Tape")

    def _add(self, node: Node) -> Expr:
        self._check_open()
        expr = Expr(self, len(self._nodes), node.type)
        self._nodes.append(node)
        self._exprs.append(expr)
        return expr

    def _source(self, op: str, value: Any, name: str | None, dtype: Any) -> Expr:
        array = as_array(value, dtype)
        array.flags.writeable = False
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}")
        return self._add(Node(op, (), (), Type.of(array), array, name))

    def parameter(self, initial: Any, name: str | None = None, dtype: Any = None) -> Expr:
        """A trainable slot; ``initial`` fixes its shape and dtype and is what
        ``network.parameters()`` materializes."""
        return self._source("parameter", initial, name, dtype)

    def input(self, default: Any, name: str | None = None, dtype: Any = None) -> Expr:
        """A feed; ``default`` fixes its shape and dtype and is used when not fed."""
        return self._source("input", default, name, dtype)

    def leaf(self, value: Any, dtype: Any = None) -> Expr:
        """A constant."""
        return self._source("leaf", value, None, dtype)

    def constant(self, value: Any, dtype: Any = None) -> Expr:
        return self.leaf(value, dtype)

    def random_key(self, name: str = "random") -> Expr:
        """Where this recording takes its randomness: an int64[4] input holding a
        generator's Philox key and counter (``Generator.key_state()``), created on the
        first call and returned again after. A plan that reads it must be run with a
        generator (``plan.forward(..., generator=g)``), which it advances."""
        if self._random_key is None:
            self._random_key = self.input(np.zeros(4, np.int64), name=name)
        return self._random_key

    @property
    def drawn_key(self) -> Expr | None:
        """The ``random_key()`` input, or None when nothing asked for one."""
        return self._random_key

    def reserve_draws(self, blocks: int) -> int:
        """The first of ``blocks`` counter blocks no other draw on this tape uses (the
        ``offset`` attr of a random node)."""
        self._check_open()
        offset = self._random_blocks
        self._random_blocks += int(blocks)
        return offset

    def apply(self, op: str, inputs: Sequence[Expr], attrs: dict[str, Any] | None = None
              ) -> Expr:
        self._check_open()
        if op not in primitives.REGISTRY:
            raise TensorCodeError(f"unknown op {op!r}")
        for x in inputs:
            if x.builder is not self:
                raise TensorCodeError("an operand was recorded on a different tape")
        frozen = freeze_attrs(attrs)
        entry = primitives.REGISTRY[op]
        if self._modes[-1] == "explicit" and entry.broadcasts:
            self._check_explicit(op, inputs)
        out_type = entry.infer([x.type for x in inputs], dict(frozen))
        return self._add(Node(op, tuple(x.index for x in inputs), frozen, out_type))

    # -- gradients -----------------------------------------------------------------------
    def differentiate(self, loss: Expr, wrt: Iterable[Expr], *,
                      inputs: Iterable[Expr] = (), allow_disconnected: bool = False
                      ) -> Adjoints:
        """Record reverse-mode gradients of the scalar ``loss`` as more nodes on this
        tape; a parameter the loss does not reach gets an explicit zeros node.
        ``inputs`` (float ``tape.input`` symbols) also get their gradients recorded: the
        adjoint a piece of a larger model hands back to the piece before it.

        A loss that none of ``wrt`` and ``inputs`` reaches through a differentiable path
        would train on zero gradients without a word, so it is a ``TrainingError``
        (naming ``detach``/``stop_gradient`` when a detached value is what cuts the
        path), as the Trainer refuses disconnected losses. ``allow_disconnected=True``
        takes the all-zero gradients on purpose (a fit that reports which parameters
        no gradient reaches)."""
        from .autodiff import gradients

        self._check_open()
        wrt = list(wrt)
        fed = list(inputs)
        for k, x in enumerate(fed):
            if not isinstance(x, Expr) or x.builder is not self or \
                    self._nodes[x.index].op != "input":
                raise TensorCodeError(f"differentiate: inputs[{k}] {x!r} is not an input "
                                      "recorded on this tape (tape.input(...))")
        for p in [loss, *wrt]:
            if not isinstance(p, Expr) or p.builder is not self:
                raise TensorCodeError(f"{p!r} was not recorded on this tape")
        for k, p in enumerate(wrt):
            node = self._nodes[p.index]
            if node.op != "parameter":
                kind = "an input" if node.op == "input" else \
                    "a constant" if node.op == "leaf" else f"an intermediate ({node.op})"
                name = f' "{node.name}"' if node.name else ""
                raise TensorCodeError(
                    f"differentiate: wrt[{k}] {p!r}{name} is {kind}, not a parameter; "
                    "gradients are taken with respect to tape.parameter(...) symbols")
        if (wrt or fed) and not allow_disconnected:
            _check_reached(self._nodes, loss, {p.index for p in [*wrt, *fed]})
        with self.broadcasting("numpy"):  # the rules' broadcasts are their definition
            grads = gradients(self._nodes, loss.index, [p.index for p in [*wrt, *fed]],
                              self, lambda i: self._exprs[i])
        return Adjoints(loss, wrt, grads[:len(wrt)], fed, grads[len(wrt):])

    # -- sealing -------------------------------------------------------------------------
    def into_network(self) -> Network:
        """Seal the recording into an immutable ``Network``."""
        from ..plans.network import Network  # local: the network module records through tapes

        self._check_open()
        network = Network(self)
        self._network = network
        return network

    @staticmethod
    def record(fn: Callable[[Tape], Any]) -> tuple[Network, Any]:
        """Run ``fn(tape)`` on a fresh tape and seal it: ``(network, fn's result)``."""
        tape = Tape()
        result = fn(tape)
        return tape.into_network(), result

    def __len__(self) -> int:
        return len(self._nodes)

    def symbol(self, index: int) -> Expr:
        """The ``Expr`` recorded as node ``index``."""
        return self._exprs[index]

    def nodes(self) -> tuple[Node, ...]:
        """The nodes recorded so far, in order (the IR a network would seal)."""
        return tuple(self._nodes)

    def parameters(self, since: int = 0) -> list[Expr]:
        """The parameter symbols recorded so far (from node ``since`` on), in order."""
        return [self._exprs[i] for i in range(since, len(self._nodes))
                if self._nodes[i].op == "parameter"]


def _check_reached(nodes: Sequence[Node], loss: Expr, wrt: set[int]) -> None:
    """``TrainingError`` unless some of ``wrt`` reaches ``loss`` through differentiable
    ops; the message says what cuts the path (a detach, or steps without gradients)."""
    from ..core.ir import Graph, closure
    from .autodiff import needs_gradient

    loss_type = nodes[loss.index].type
    if loss_type.shape != () or not loss_type.is_float or any(
            not nodes[i].type.is_float for i in wrt):
        return  # ``gradients`` refuses these with its own message
    if needs_gradient(nodes, wrt, loss.index)[loss.index]:
        return
    reached = set(closure(Graph(tuple(nodes[:loss.index + 1])), [loss.index]))
    if not reached & wrt:
        raise TrainingError(
            f"differentiate: the loss {loss!r} does not depend on any of the symbols "
            "differentiated against (disconnected), so every gradient would be zero; "
            "differentiate a loss computed from them (or pass allow_disconnected=True)")
    detached = [i for i in sorted(reached) if nodes[i].op == "detach"
                and needs_gradient(nodes, wrt, nodes[i].inputs[0])[nodes[i].inputs[0]]]
    if detached:
        raise TrainingError(
            f"differentiate: the loss {loss!r} reaches the parameters only through "
            f"detach/stop_gradient (%{detached[0]}), which stops gradients, so every "
            "gradient would be zero. Expr.detach() is JAX's stop_gradient, not the Rust "
            "guide's .detach() (which makes a handle): differentiate the expression "
            "itself, e.g. tape.differentiate(error * error, ...)")
    raise TrainingError(
        f"differentiate: the loss {loss!r} depends on the parameters only through steps "
        "without gradients (comparisons, integer or recorded values), so every gradient "
        "would be zero: it is nondifferentiable")

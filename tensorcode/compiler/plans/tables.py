"""Parameter and gradient tables, and feeds: caller-owned state, laid out for one-loop updates.

They live beside the sealed spec because their layout is the plans' calling convention:
a plan reads parameters and writes gradients as flat per-dtype buffers in this layout.
The runtime (optimizers, checkpoints) and the products build on them.

A table stores its payloads as read-only views into one flat buffer per dtype, in the
order the parameters were recorded. A training step never mutates a table: it builds a
new one, so cloning a table is an honest what-if that costs what the weights cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from ...errors import DTypeError, FeedError, ShapeError, TensorCodeError
from ..core.dtypes import NUMPY
from ..trace.expr import Expr

if TYPE_CHECKING:  # pragma: no cover
    from ..trace.tape import Adjoints


@dataclass(frozen=True)
class Slot:
    """One parameter's place in a table: its node, name, type and buffer offset, and
    its identity from module to checkpoint: ``index`` (the slot id, its position in
    recording order) and ``path`` (its recorded name, or ``%<index>`` for an unnamed
    parameter). Messages (``label``), the optimizer's state (by ``index``), a fused
    step's update and a checkpoint's keys (``parameters/<path>``) all name a parameter
    by these two."""

    node: int
    name: str | None
    shape: tuple[int, ...]
    dtype: str
    offset: int
    size: int  # element count, kept so building a table's views does no arithmetic
    index: int = 0

    @property
    def path(self) -> str:
        """The parameter's one name: its recorded name, or ``%<slot index>``."""
        return self.name if self.name is not None else f"%{self.index}"

    @property
    def label(self) -> str:
        """``path`` as messages write it: a recorded name in quotes."""
        return f'"{self.name}"' if self.name is not None else self.path


class Layout:
    """The slots of a network's parameters and the size of each dtype's buffer.

    ``owner`` is the tape whose ``Expr`` symbols key the table; a symbol from another
    tape is refused rather than silently matched by position.
    """

    def __init__(self, owner: Any, slots: Sequence[tuple[int, str | None, tuple[int, ...], str]]
                 ) -> None:
        self.owner = owner
        sizes: dict[str, int] = {}
        built = []
        for index, (node, name, shape, dtype) in enumerate(slots):
            offset = sizes.get(dtype, 0)
            shape = tuple(int(d) for d in shape)
            slot = Slot(node, name, shape, dtype, offset, math.prod(shape), index)
            sizes[dtype] = offset + slot.size
            built.append(slot)
        self.slots: tuple[Slot, ...] = tuple(built)
        self.sizes = sizes
        self.numpy_dtypes = {dtype: np.dtype(dtype) for dtype in sizes}
        self._by_node = {slot.node: k for k, slot in enumerate(self.slots)}
        self._segments: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._update_tables: dict[tuple, tuple] = {}

    def segments(self, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        """``(offsets, slots)`` for ``dtype``'s flat buffer: the slots' start offsets
        followed by the buffer's size (int64), and the indices of those slots in the table
        (intp). Cached: a per-dtype update loop asks for them every step."""
        cached = self._segments.get(dtype)
        if cached is None:
            slots = [k for k, s in enumerate(self.slots) if s.dtype == dtype]
            offsets = np.array([self.slots[k].offset for k in slots] + [self.sizes.get(dtype, 0)],
                               dtype=np.int64)
            cached = (offsets, np.array(slots, dtype=np.intp))
            for array in cached:
                array.flags.writeable = False
            self._segments[dtype] = cached
        return cached

    def update_table(self, dtype: str, reached: tuple[bool, ...] | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
        """The slots of ``dtype`` an optimizer's eager update walks (those the loss
        reached; every one when ``reached`` is None): their slot ids, start offsets and
        sizes (read-only int64, the ``K, PS, N`` of every backend's ``update``), and the
        ``(start, stop)`` of the others. Cached per layout."""
        key = (dtype, reached)
        cached = self._update_tables.get(key)
        if cached is not None:
            return cached
        slots = [s for s in self.slots if s.dtype == dtype]
        walked = [s for s in slots if reached is None or reached[s.index]]
        skipped = [(s.offset, s.offset + s.size) for s in slots
                   if reached is not None and not reached[s.index]]
        arrays = [np.array(values, dtype=np.int64) for values in (
            [s.index for s in walked], [s.offset for s in walked], [s.size for s in walked])]
        for array in arrays:
            array.flags.writeable = False
        table = (arrays[0], arrays[1], arrays[2], skipped)
        self._update_tables[key] = table
        return table

    def step_slots(self, gradient_offsets: Sequence[int]
                   ) -> tuple[tuple[int, str, int, int, int], ...]:
        """A fused step's slot table (``lower.update.StepSpec.slots``): per slot, ``(slot
        id, dtype, parameter offset, size, gradient offset)``, the gradient of slot k at
        ``gradient_offsets[k]`` of the output arena of its dtype."""
        return tuple((s.index, s.dtype, s.offset, s.size, int(g))
                     for s, g in zip(self.slots, gradient_offsets))

    def index(self, symbol: Any) -> int:
        if not isinstance(symbol, Expr):
            raise TypeError(f"table lookups take the parameter's Expr symbol, got {symbol!r}")
        if symbol.builder is not self.owner:
            raise TensorCodeError(f"{symbol!r} belongs to another network's tape")
        try:
            return self._by_node[symbol.index]
        except KeyError:
            raise TensorCodeError(f"{symbol!r} is not a parameter of this network") from None

    def __len__(self) -> int:
        return len(self.slots)


class Table:
    """Shared behaviour of ``Parameters`` and ``Gradients``."""

    __slots__ = ("_buffers", "_layout", "_views")

    def __init__(self, layout: Layout, buffers: Mapping[str, np.ndarray]) -> None:
        self._layout = layout
        self._buffers = dict(buffers)
        for dtype, size in layout.sizes.items():
            buffer = self._buffers[dtype]
            # (dtype objects compare fast; ``dtype.name`` builds a string each time)
            if buffer.dtype != layout.numpy_dtypes[dtype] or buffer.shape != (size,):
                raise ValueError(f"buffer for {dtype} must be flat [{size}] {dtype}")
            buffer.flags.writeable = False
        self._views: tuple[np.ndarray, ...] | None = None  # built on first read

    def _payload_views(self) -> tuple[np.ndarray, ...]:
        """Per-slot views, built lazily: a training loop that only hands flat buffers
        from a plan to an optimizer never pays for them."""
        if self._views is None:
            buffers = self._buffers
            self._views = tuple([buffers[s.dtype][s.offset:s.offset + s.size].reshape(s.shape)
                                 for s in self._layout.slots])
        return self._views

    # -- construction --------------------------------------------------------------------
    @classmethod
    def from_payloads(cls, layout: Layout, payloads: Sequence[Any]) -> Self:
        """A table holding copies of ``payloads`` (one per slot, exact shapes)."""
        if len(payloads) != len(layout.slots):
            raise ShapeError(f"expected {len(layout.slots)} payloads, got {len(payloads)}")
        buffers = {d: np.empty(n, dtype=d) for d, n in layout.sizes.items()}
        for slot, payload in zip(layout.slots, payloads):
            array = _check_payload(slot, payload)
            buffers[slot.dtype][slot.offset:slot.offset + slot.size] = array.reshape(-1)
        return cls(layout, buffers)

    @classmethod
    def from_buffers(cls, layout: Layout, buffers: Mapping[str, np.ndarray]) -> Self:
        """A table that takes ownership of ``buffers`` (flat, one per dtype)."""
        return cls(layout, buffers)

    @classmethod
    def adopt(cls, layout: Layout, buffers: dict[str, np.ndarray]) -> Self:
        """A table over ``buffers`` without checking them: for flat buffers that are
        right by construction (a plan's output arena laid out like ``layout``), on a path
        called every training step. The buffers become read-only; the per-slot views are
        built when first read."""
        table = cls.__new__(cls)
        for buffer in buffers.values():
            buffer.flags.writeable = False
        table._layout = layout
        table._buffers = buffers
        table._views = None
        return table

    # -- reading -------------------------------------------------------------------------
    @property
    def layout(self) -> Layout:
        return self._layout

    def of(self, symbol: Any) -> np.ndarray:
        """The payload of ``symbol`` (a read-only view)."""
        return self._payload_views()[self._layout.index(symbol)]

    def payloads(self) -> list[np.ndarray]:
        """Every payload in recording order (read-only views)."""
        return list(self._payload_views())

    def buffers(self) -> Mapping[str, np.ndarray]:
        """The flat per-dtype buffers (read-only arrays, in the layout's order), for
        one-loop updates and for plans, which take them as arguments. The mapping is the
        table's own: read it, never change it."""
        return self._buffers

    def __len__(self) -> int:
        return len(self._layout.slots)

    def donate(self) -> dict[str, np.ndarray]:
        """Writable views of the flat buffers, for a step plan that updates this table in
        place (``compiler/plans/step.py``: the one documented exception to "a step builds a new
        table"). The table's own buffers stay read-only to every other reader."""
        views = {}
        for dtype, buffer in self._buffers.items():
            try:
                buffer.flags.writeable = True
            except ValueError:
                raise TensorCodeError("this table's buffers belong to memory that cannot be "
                                      "written (a read-only file or array); clone() it and "
                                      "step the clone") from None
            views[dtype] = buffer.view()
            buffer.flags.writeable = False
        return views

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self._payload_views())

    def clone(self) -> Self:
        """An independent copy: a what-if costs exactly the payloads."""
        return type(self)(self._layout, {d: b.copy() for d, b in self._buffers.items()})

    def equals(self, other: Table) -> bool:
        """Payload-for-payload equality (exact)."""
        return (len(self) == len(other) and
                all(a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
                    for a, b in zip(self._payload_views(), other._payload_views())))

    def __repr__(self) -> str:
        parts = ", ".join(f"{s.label}: {s.dtype}{list(s.shape)}" for s in self._layout.slots)
        return f"{type(self).__name__}({parts})"

    def check_pair(self, other: Table) -> None:
        """Refuse ``other`` unless it is laid out by this very table's layout (a gradient
        table for these parameters, or optimizer state built for them)."""
        if other.layout is not self._layout:
            raise TensorCodeError(f"{type(other).__name__} table belongs to another network "
                                  "or entry than these parameters")


_NUMPY_DTYPES = NUMPY


def _check_payload(slot: Slot, payload: Any) -> np.ndarray:
    array = np.asarray(payload)
    if array.shape != slot.shape:
        raise ShapeError(f"parameter {slot.label}: expected shape {list(slot.shape)}, got "
                         f"{list(array.shape)}")
    if array.dtype != _NUMPY_DTYPES[slot.dtype]:  # (``dtype.name`` builds a string)
        if not np.can_cast(array.dtype, slot.dtype, casting="same_kind"):
            raise DTypeError(f"parameter {slot.label}: expected {slot.dtype}, got "
                             f"{array.dtype.name}")
        array = array.astype(slot.dtype)
    return array


def _rule_result(slot: Slot, value: Any) -> np.ndarray:
    """What a step rule returned for ``slot``, refused unless it is an array (or number,
    or list) of the slot's kind: a rule returning ``None`` or a recorded ``Expr`` is told
    so, and an integer result is not cast into a float slot (nor a float into an int)."""
    if not isinstance(value, (np.ndarray, np.generic, int, float, list, tuple)) \
            or isinstance(value, bool):
        raise TensorCodeError(f"the step rule returned {type(value).__name__} "
                              f"({value!r:.60}) for parameter {slot.label}; it must return the "
                              f"new value, an array of shape {list(slot.shape)}")
    array = np.asarray(value)
    kind = np.dtype(slot.dtype).kind
    if array.dtype.kind != kind and not isinstance(value, (int, float)):  # numbers are weak
        raise DTypeError(f"parameter {slot.label}: expected {slot.dtype}, got "
                         f"{array.dtype.name} from the step rule; return a {slot.dtype} "
                         "array (the kinds must agree: no cast between them)")
    return array


class Gradients(Table):
    """Gradients aligned slot for slot with a ``Parameters`` table.

    ``reached`` says, per slot, whether the loss reached the parameter (None: every
    slot, or not known). A gradient the plan records for a parameter the loss does not
    reach is zeros; the optimizers skip those slots as PyTorch skips a parameter whose
    ``grad`` is ``None`` (no decay, no momentum, no step count)."""

    __slots__ = ("_reached",)

    @property
    def reached(self) -> tuple[bool, ...] | None:
        return getattr(self, "_reached", None)

    def mark_reached(self, reached: Sequence[bool] | None) -> Gradients:
        """Record which slots the loss reached (one flag per slot); returns self."""
        if reached is not None:
            reached = tuple(bool(r) for r in reached)
            if len(reached) != len(self._layout.slots):
                raise ShapeError(f"reached holds {len(reached)} flags for "
                                 f"{len(self._layout.slots)} slots")
            if all(reached):
                reached = None
        self._reached = reached
        return self

    def clone(self) -> Gradients:
        return super().clone().mark_reached(self.reached)

    # -- arithmetic ------------------------------------------------------------------------
    # Gradient tables of one layout form a vector space: ``a + b``, ``a - b``, ``-a``,
    # ``s * a`` for a scalar ``s``, and ``sum(tables)`` (the shard gradients of one
    # minibatch summed as tables, as the guide's ``makemore_mlp_parallel`` does). Each
    # returns a new table with every dtype's buffer kept in its own dtype; anything else
    # (a ``Parameters`` table, another network's table, an array, a table times a table)
    # is refused, because none of them has one meaning.

    def __add__(self, other: Any) -> Gradients:
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self.clone()  # the 0 that ``sum(tables)`` starts from
        return self._combine(other, "+", np.add)

    def __radd__(self, other: Any) -> Gradients:
        return self.__add__(other)

    def __sub__(self, other: Any) -> Gradients:
        return self._combine(other, "-", np.subtract)

    def __rsub__(self, other: Any) -> Gradients:
        raise self._refusal(other, "-")

    def __neg__(self) -> Gradients:
        return Gradients(self._layout, {d: np.negative(b) for d, b in self._buffers.items()}
                         ).mark_reached(self.reached)

    def __pos__(self) -> Gradients:
        return self.clone()

    def __mul__(self, other: Any) -> Gradients:
        if isinstance(other, Table):
            raise TensorCodeError(
                f"{type(self).__name__} * {type(other).__name__}: gradient tables multiply "
                "only by a scalar (a Python or NumPy number); to combine two tables use + "
                "or -, and for a per-slot rule use parameters.step(gradients, rule)")
        scalar = self._scalar(other)
        buffers = {}
        for dtype, buffer in self._buffers.items():
            kind = self._layout.numpy_dtypes[dtype]
            if kind.kind in "iu" and scalar != int(scalar):
                raise DTypeError(f"cannot scale the {dtype} gradients by {scalar!r} and keep "
                                 f"their dtype; use an integer multiplier")
            buffers[dtype] = np.multiply(buffer, kind.type(scalar), dtype=kind)
        return Gradients(self._layout, buffers).mark_reached(self.reached)

    def __rmul__(self, other: Any) -> Gradients:
        return self.__mul__(other)

    def __truediv__(self, other: Any) -> Gradients:
        """``gradients / n``: every slot divided by the scalar ``n`` (the mean of ``n``
        shards is ``sum(shards) / n``), as ``gradients * (1 / n)`` scales them; integer
        slots divide only by 1 or -1 (anything else would leave their dtype)."""
        if isinstance(other, Table):
            raise self._refusal(other, "/")
        scalar = self._scalar(other)
        if scalar == 0:
            raise TensorCodeError("gradients / 0: division by zero; divide by the number of "
                                  "shards or examples")
        buffers = {}
        for dtype, buffer in self._buffers.items():
            kind = self._layout.numpy_dtypes[dtype]
            if kind.kind in "iu":
                if scalar not in (1, -1):
                    raise DTypeError(f"cannot divide the {dtype} gradients by {scalar!r} and "
                                     "keep their dtype; cast the parameters to a float dtype")
                buffers[dtype] = np.multiply(buffer, kind.type(scalar), dtype=kind)
            else:
                buffers[dtype] = np.divide(buffer, kind.type(scalar), dtype=kind)
        return Gradients(self._layout, buffers)

    def __rtruediv__(self, other: Any) -> Gradients:
        raise self._refusal(other, "/")

    def _combine(self, other: Any, symbol: str, ufunc: Any) -> Gradients:
        if not isinstance(other, Gradients):
            raise self._refusal(other, symbol)
        if other.layout is not self._layout:
            same_slots = [(s.shape, s.dtype) for s in other.layout.slots] == [
                (s.shape, s.dtype) for s in self._layout.slots]
            if same_slots:
                raise TensorCodeError(
                    f"Gradients {symbol} Gradients: the tables belong to different networks "
                    "(same shapes, other symbols); combine gradients of one network's "
                    "parameters, for example the shard gradients of one plan")
            raise ShapeError(
                f"Gradients {symbol} Gradients: the layouts differ ({self!r} and {other!r}); "
                "only tables of one network's parameters combine")
        mine, theirs = self.reached, other.reached
        reached = None if mine is None or theirs is None else \
            tuple(a or b for a, b in zip(mine, theirs))  # reached by either
        return Gradients(self._layout, {d: ufunc(b, other._buffers[d], dtype=b.dtype)
                                        for d, b in self._buffers.items()}
                         ).mark_reached(reached)

    @staticmethod
    def _refusal(other: Any, symbol: str) -> TensorCodeError:
        if isinstance(other, Parameters):
            return TensorCodeError(
                f"Parameters {symbol} Gradients is refused: a parameter table is a state and a "
                "gradient table a direction; update parameters with "
                "parameters.step(gradients, rule) (or an optimizer)")
        return TensorCodeError(
            f"Gradients {symbol} {type(other).__name__} is refused: gradient tables combine "
            "only with gradient tables of the same layout (+, -, sum) and scale only by a "
            "scalar (*)")

    @staticmethod
    def _scalar(value: Any) -> Any:
        """``value`` as a real scalar, or a clear refusal."""
        if isinstance(value, np.ndarray):
            if value.ndim != 0:
                raise ShapeError(f"gradient tables scale only by a scalar, got an array of "
                                 f"shape {list(value.shape)}; for per-slot scaling use "
                                 "parameters.step(gradients, rule)")
            value = value[()]
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise TensorCodeError(f"gradient tables scale only by a real scalar (a Python or "
                                  f"NumPy int or float), got {type(value).__name__}")
        return value


class ExplicitArray(np.ndarray):
    """What a step rule gets on a ``Tape(broadcast="explicit")`` network: an ndarray
    whose elementwise arithmetic refuses operands of different shapes, as the tape
    refuses them (a Python or NumPy scalar is a weak literal and is fine). Results stay
    explicit, so a chain of operations is checked at every step; ``np.broadcast_to``
    states a broadcast on purpose."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any
                        ) -> Any:
        if method == "__call__" and ufunc.nin > 1 and ufunc.signature is None:
            shapes = [np.shape(x) for x in inputs if np.ndim(x) > 0]
            if len(set(shapes)) > 1:
                listed = " and ".join(str(list(shape)) for shape in shapes)
                raise ShapeError(
                    f"step rule: {ufunc.__name__} of shapes {listed}; this network's tape "
                    "broadcasts nothing by accident (Tape(broadcast='explicit')), and that "
                    "holds in step rules too: broadcast the smaller side first with "
                    "np.broadcast_to(value, parameter.shape)")
        plain = [x.view(np.ndarray) if isinstance(x, ExplicitArray) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, ExplicitArray) else x
                                  for x in kwargs["out"])
        result = getattr(ufunc, method)(*plain, **kwargs)
        if isinstance(result, tuple):
            return tuple(_explicit(r) for r in result)
        return _explicit(result)


def _explicit(value: Any) -> Any:
    return value.view(ExplicitArray) if type(value) is np.ndarray else value


class Parameters(Table):
    """A caller-owned table of parameter payloads, in recording order."""

    __slots__ = ()

    def step(self, gradients: Gradients, rule: Callable[[np.ndarray, np.ndarray], Any]
             ) -> Parameters:
        """A new table with ``rule(parameter, gradient)`` applied to each slot, called
        once per slot in recording order."""
        return self.step_each(gradients, lambda _symbol, p, g: rule(p, g))

    def step_each(self, gradients: Gradients,
                  rule: Callable[[Any, np.ndarray, np.ndarray], Any]) -> Parameters:
        """Like ``step``, but ``rule(symbol, parameter, gradient)`` also gets the symbol,
        for per-parameter policy."""
        if not isinstance(gradients, Gradients):
            raise TypeError(f"step takes a Gradients table, got {type(gradients).__name__}; "
                            "stepping by another Parameters table is refused, as the "
                            "optimizers refuse it")
        self.check_pair(gradients)
        owner = self._layout.owner
        explicit = getattr(owner, "broadcast", "numpy") == "explicit"  # the recording tape
        buffers = {d: np.empty(n, dtype=d) for d, n in self._layout.sizes.items()}
        for slot, p, g in zip(self._layout.slots, self._payload_views(),
                              gradients._payload_views()):
            symbol = owner.symbol(slot.node)
            if explicit:  # the tape's rule reaches the rules: nothing broadcasts by accident
                p, g = p.view(ExplicitArray), g.view(ExplicitArray)
            result = _check_payload(slot, _rule_result(slot, rule(symbol, p, g)))
            buffers[slot.dtype][slot.offset:slot.offset + slot.size] = result.reshape(-1)
        return Parameters(self._layout, buffers)

    def replace(self, updates: Mapping[Any, Any]) -> Parameters:
        """A new table with some payloads replaced (``{symbol: array}``)."""
        payloads = list(self._payload_views())
        for symbol, value in updates.items():
            payloads[self._layout.index(symbol)] = value
        return Parameters.from_payloads(self._layout, payloads)


def feed_dict(feeds: Any) -> dict[Any, Any]:
    """Feeds as a dict ``{symbol: value}``. A list or tuple of ``(symbol, value)`` pairs
    (the guide's form) is taken as the same feeds; a symbol given twice, or any other
    container, is a ``FeedError`` saying to pass a dict."""
    if feeds is None:
        return {}
    if isinstance(feeds, Mapping):
        return feeds if isinstance(feeds, dict) else dict(feeds)
    if isinstance(feeds, (list, tuple)):
        pairs: dict[Any, Any] = {}
        for k, pair in enumerate(feeds):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise FeedError(f"feeds[{k}] is {pair!r:.80}, not a (symbol, value) pair; pass "
                                "feeds as a dict {symbol: value} (or a list of such pairs)")
            symbol, value = pair
            if not isinstance(symbol, Expr):
                raise FeedError(f"feeds[{k}] starts with {symbol!r:.80}, not an input symbol; "
                                "pass feeds as a dict {symbol: value}")
            if symbol in pairs:
                raise FeedError(f"feeds[{k}] feeds {symbol!r} a second time; pass each input "
                                "once (feeds as a dict {symbol: value})")
            pairs[symbol] = value
        return pairs
    raise FeedError(f"feeds must be a dict {{symbol: value}}, got {type(feeds).__name__}; "
                    "pass a dict (a list of (symbol, value) pairs also works)")


def gradients_table(layout: Layout, adjoints: Adjoints, read: Any) -> Gradients:
    """A ``Gradients`` table from the recorded gradient roots, read through ``read``;
    parameters outside ``adjoints.wrt`` get zeros, and they and the parameters the loss
    does not reach are marked unreached (``Gradients.reached``)."""
    payloads = [np.zeros(s.shape, s.dtype) for s in layout.slots]
    reached = [False] * len(payloads)
    for (p, g), r in zip(adjoints, adjoints.reached):
        k = layout.index(p)
        payloads[k] = read(g)
        reached[k] = r
    return Gradients.from_payloads(layout, payloads).mark_reached(reached)


def check_feed_type(name: str, expected_shape: tuple[int, ...], expected_dtype: str,
                    value: Any) -> np.ndarray:
    """Convert a fed value, raising ``FeedError`` naming the input on a mismatch.

    Arrays and NumPy scalars must match the dtype exactly; Python numbers and lists are
    weak and take the input's dtype when their kind fits (int into int or float, float
    into float)."""
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.name != expected_dtype:
            raise FeedError(f"input {name}: expected {expected_dtype}{list(expected_shape)}, "
                            f"got {array.dtype.name}{list(array.shape)}; cast the feed with "
                            f".astype({expected_dtype!r})")
    else:
        try:
            array = np.asarray(value)
        except Exception as error:  # ragged lists and other non-numbers
            raise FeedError(f"input {name}: cannot read {value!r} as a tensor") from error
        kind = array.dtype.kind
        target = np.dtype(expected_dtype).kind
        if not (kind == target or (kind in "iub" and target == "f")):
            raise FeedError(f"input {name}: expected {expected_dtype}{list(expected_shape)}, "
                            f"got {array.dtype.name}{list(array.shape)}")
        array = array.astype(expected_dtype)
    if array.shape != tuple(expected_shape):
        raise FeedError(f"input {name}: expected {expected_dtype}{list(expected_shape)}, got "
                        f"{array.dtype.name}{list(array.shape)}")
    # one copy in native byte order, C order: a ``>f4`` array is float32 by name but its
    # bytes are not what compiled code reads as float32
    array = np.array(array, dtype=np.dtype(expected_dtype), copy=True, order="C")
    array.flags.writeable = False
    return array

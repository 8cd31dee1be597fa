"""What a schedule hands a backend: typed locations and typed kernel records.

A value lives at a *location*: a ``Scalar`` baked into the code, or a ``Strided`` view
(offset and strides in elements) of a flat array. Once a schedule is built, every
``Strided`` names its array by an ``Arena``: the role the array plays in the generated
function (a parameter buffer of the table, a constant, an input, the scratch arena or
the output arena of a dtype) and, for constants and inputs, the argument position. The
offset is absolute within that array, so a backend never resolves a name: it turns an
arena into whatever it calls the array and indexes it.

While a schedule is being built, computed values point at their ``Buffer`` instead (the
arena offset is not known until liveness placed it); ``schedule.build``'s last stage
rebinds every location to its arena.

Each kind of kernel is its own record (``FusedKernel``, ``MatmulKernel``, ``TakeKernel``,
``ScatterAddKernel``, ``OneHotKernel``, ``ConcatKernel``, ``PadKernel``, ``CopyKernel``)
with its operands as fields. ``READS`` and ``WRITES`` name the fields holding locations,
so liveness and rebinding walk every kernel the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..core import registry as primitives
from ..core.ir import DTYPES, Graph, Node
from .patterns import Pat, Rules


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides (in elements) of ``shape``."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(strides))


# ---------------------------------------------------------------------------------------
# arrays and buffers


#: what an arena is to the generated function, in its argument order (a step plan's
#: entry points add the writable parameter buffers, ``update``, and the optimizer's
#: ``state`` buffers)
ROLES = ("parameter", "constant", "input", "scratch", "output", "update", "state")


@dataclass(frozen=True)
class Arena:
    """A flat array of the generated function: ``role`` (one of ``ROLES``), its
    ``dtype`` and, for a constant or an input, its argument ``index``. Parameters come
    as the table's buffer of that dtype; scratch and output arenas are one per dtype."""

    role: str
    dtype: str
    index: int = 0

    @property
    def label(self) -> str:
        """The arena's one name, in printed schedules and generated code alike:
        ``P_f32`` (the table's float32 buffer), ``C0`` (constant 0), ``X1`` (input 1),
        ``W_f64`` (scratch), ``O_i64`` (output), ``U_f32`` (a step's writable
        parameters), ``S1_f64`` (the second optimizer state table)."""
        if self.role == "constant":
            return f"C{self.index}"
        if self.role == "input":
            return f"X{self.index}"
        if self.role == "state":
            return f"S{self.index}_{DTYPES[self.dtype]}"
        letter = {"parameter": "P", "scratch": "W", "output": "O", "update": "U"}[self.role]
        return f"{letter}_{DTYPES[self.dtype]}"


@dataclass(eq=False)
class Buffer:
    """A flat region computed by one kernel: scratch (placed in the arena by liveness)
    or an output (a fixed region of the output arena). ``name`` identifies it in
    ``Kernel.reads``/``writes`` and printed schedules."""

    name: str
    dtype: str
    size: int
    kind: str  # "scratch" or "output"
    offset: int = 0
    first: int = -1  # kernel index that writes it
    last: int = -1   # last kernel index that reads it
    node: int | None = None

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    @property
    def arena(self) -> Arena:
        return Arena(self.kind, self.dtype)


# ---------------------------------------------------------------------------------------
# locations


@dataclass(frozen=True)
class Scalar:
    """A value every element of which is one constant, baked into the code."""

    value: Any
    dtype: str


@dataclass(frozen=True)
class Strided:
    """A strided view of a flat array: ``base`` is its ``Arena`` (a ``Buffer`` only
    while the schedule is being built), ``offset`` and ``strides`` in elements."""

    base: Arena | Buffer
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @property
    def contiguous(self) -> bool:
        return all(s == c for s, c, d in zip(self.strides, c_strides(self.shape), self.shape)
                   if d != 1)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def arena(self) -> Arena:
        """The array this view reads (only once the schedule is built)."""
        assert isinstance(self.base, Arena), "location not bound to an arena yet"
        return self.base

    @property
    def buffer(self) -> Buffer | None:
        """The schedule buffer this view lies in, while the schedule is being built."""
        return self.base if isinstance(self.base, Buffer) else None

    def at(self, base: Arena | Buffer, offset: int = 0) -> Strided:
        """This view moved onto ``base`` (``offset`` added)."""
        return Strided(base, self.offset + offset, self.shape, self.strides, self.dtype)

    def __str__(self) -> str:
        where = self.base.label if isinstance(self.base, Arena) else self.base.name
        return f"{where}[{self.offset}]"


Loc = Scalar | Strided


def contiguous(base: Arena | Buffer, shape: tuple[int, ...], dtype: str,
               offset: int = 0) -> Strided:
    """A row-major view of ``shape`` starting ``offset`` elements into ``base``."""
    return Strided(base, offset, tuple(shape), c_strides(shape), dtype)


def _reshaped(loc: Strided, node: Node) -> Strided | None:
    shape = node.type.shape
    if loc.contiguous:
        return Strided(loc.base, loc.offset, shape, c_strides(shape), loc.dtype)
    strides = reshaped_strides(loc.shape, loc.strides, shape)
    if strides is None:
        return None  # no strided view of it: the schedule copies it
    return Strided(loc.base, loc.offset, shape, strides, loc.dtype)


def reshaped_strides(shape: Sequence[int], strides: Sequence[int],
                     new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The strides of a row-major reshape of a strided view to ``new_shape`` that reads
    the same elements in place, or None when there is none (NumPy's no-copy reshape):
    each run of old axes that merges or splits into new axes must itself be contiguous
    within the run. The heads of an attention, a slice of the fused query-key-value
    projection split ``[B, T, C] -> [B, T, H, D]``, are such a view."""
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    if math.prod(shape) == 0 or math.prod(new_shape) != math.prod(shape):
        return None
    out = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(new_shape) and oi < len(old):
        oj, nj = oi + 1, ni + 1
        have, want = old[oi][0], new_shape[ni]
        while have != want:
            if want < have:
                want *= new_shape[nj]
                nj += 1
            else:
                have *= old[oj][0]
                oj += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        out[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            out[k - 1] = out[k] * new_shape[k]
        oi, ni = oj, nj
    for k in range(ni, len(new_shape)):  # trailing axes of one element
        out[k] = out[ni - 1] if ni else 1
    return tuple(out)


def _transposed(loc: Strided, node: Node) -> Strided:
    axes = node.attr("axes")
    return Strided(loc.base, loc.offset, node.type.shape, tuple(loc.strides[a] for a in axes),
                   loc.dtype)


def _broadcast(loc: Strided, node: Node) -> Strided:
    shape = node.type.shape
    lead = len(shape) - len(loc.shape)
    strides = [0] * lead + [0 if d == 1 and t != 1 else s for d, t, s in
                            zip(loc.shape, shape[lead:], loc.strides)]
    return Strided(loc.base, loc.offset, shape, tuple(strides), loc.dtype)


def _sliced(loc: Strided, node: Node) -> Strided:
    axis, start = node.attr("axis"), node.attr("start")
    return Strided(loc.base, loc.offset + start * loc.strides[axis], node.type.shape,
                   loc.strides, loc.dtype)


#: the strided location of each view op applied to a location (``view_of``); an action
#: gets the location and the view's node
VIEWS = Rules([
    (Pat("detach"), lambda loc, node: loc),
    (Pat("reshape"), _reshaped),
    (Pat("transpose"), _transposed),
    (Pat("broadcast_to"), _broadcast),
    (Pat("slice"), _sliced),
])


def view_of(loc: Loc, node: Node, graph: Graph) -> Loc | None:
    """The location of view op ``node`` applied to ``loc`` (``VIEWS``), or None if it is
    not a strided view of it (a reshape ``reshaped_strides`` cannot express)."""
    if isinstance(loc, Scalar):
        return loc
    if node.op not in VIEWS.ops():
        raise AssertionError(node.op)  # pragma: no cover
    found: Loc | None = VIEWS.apply(loc, node, graph.nodes)
    return found


def broadcast_access(loc: Strided, space: Sequence[int]) -> tuple[int, ...]:
    """Strides of ``loc`` over an iteration ``space`` it broadcasts to (right-aligned)."""
    lead = len(space) - len(loc.shape)
    return tuple([0] * lead + [0 if d == 1 else s for d, s in zip(loc.shape, loc.strides)])


def _map(value: Any, fn: Callable[[Loc], Loc]) -> Any:
    if isinstance(value, (Scalar, Strided)):
        return fn(value)
    if isinstance(value, list):
        return [_map(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


def _flatten(value: Any) -> list[Loc]:
    if isinstance(value, (Scalar, Strided)):
        return [value]
    if isinstance(value, list):
        return [v for item in value for v in _flatten(item)]
    if isinstance(value, dict):
        return [v for item in value.values() for v in _flatten(item)]
    return []


# ---------------------------------------------------------------------------------------
# kernels


@dataclass(eq=False)
class Kernel:
    """One loop nest (or library call). ``nodes`` are the graph nodes it computes,
    ``space`` the shape it iterates; ``reads``/``writes`` name the schedule buffers it
    reads and writes (filled by liveness). Subclasses add their operands as fields and
    list the location fields in ``READS``/``WRITES``."""

    kind: ClassVar[str] = ""
    READS: ClassVar[tuple[str, ...]] = ()
    WRITES: ClassVar[tuple[str, ...]] = ()

    nodes: list[int]
    space: tuple[int, ...]
    reads: set[str] = field(default_factory=set, init=False)
    writes: set[str] = field(default_factory=set, init=False)

    def read_locs(self) -> list[Loc]:
        return [loc for name in self.READS for loc in _flatten(getattr(self, name))]

    def write_locs(self) -> list[Strided]:
        return [loc for name in self.WRITES for loc in _flatten(getattr(self, name))
                if isinstance(loc, Strided)]

    def rebind(self, fn: Callable[[Loc], Loc]) -> None:
        """Replace every location this kernel reads or writes by ``fn(location)``."""
        for name in self.READS + self.WRITES:
            setattr(self, name, _map(getattr(self, name), fn))

    def headline(self) -> str:
        """What ``Schedule.describe`` prints after ``kernel k:``."""
        return self.kind


@dataclass(eq=False)
class FusedKernel(Kernel):
    """A fused elementwise group and the reductions it feeds, over ``space``: ``loads``
    are the values read from memory (node -> location), ``stores`` the members written
    to memory; every other member lives in a register."""

    kind: ClassVar[str] = "fused"
    READS: ClassVar[tuple[str, ...]] = ("loads",)
    WRITES: ClassVar[tuple[str, ...]] = ("stores",)

    loads: dict[int, Loc]
    stores: dict[int, Strided]

    def headline(self) -> str:
        return f"fused over [{','.join(map(str, self.space))}]"


@dataclass(eq=False)
class MatmulKernel(Kernel):
    """``out = a @ b`` over ``batch`` leading axes; ``a`` is m x k, ``b`` k x n (rank-1
    operands already promoted). ``mode``: ``blas`` (``np.dot`` on contiguous or
    transposed operands), ``ikj`` or ``kij`` (generated loops)."""

    kind: ClassVar[str] = "matmul"
    READS: ClassVar[tuple[str, ...]] = ("a", "b")
    WRITES: ClassVar[tuple[str, ...]] = ("out",)

    a: Loc
    b: Loc
    out: Strided
    batch: tuple[int, ...]
    m: int
    k: int
    n: int
    mode: str

    def headline(self) -> str:
        return f"matmul ({self.mode})"


@dataclass(eq=False)
class TakeKernel(Kernel):
    """``out = take(x, index, axis)`` with a range check of every index."""

    kind: ClassVar[str] = "take"
    READS: ClassVar[tuple[str, ...]] = ("x", "index")
    WRITES: ClassVar[tuple[str, ...]] = ("out",)

    x: Loc
    index: Loc
    out: Strided
    axis: int


@dataclass(eq=False)
class ScatterAddKernel(Kernel):
    """``out`` (``size`` along ``axis``) zeroed, then ``values`` added at ``index``."""

    kind: ClassVar[str] = "scatter_add"
    READS: ClassVar[tuple[str, ...]] = ("values", "index")
    WRITES: ClassVar[tuple[str, ...]] = ("out",)

    values: Loc
    index: Loc
    out: Strided
    axis: int
    size: int


@dataclass(eq=False)
class OneHotKernel(Kernel):
    """``out[..., index] = 1`` over ``n`` classes, zero elsewhere."""

    kind: ClassVar[str] = "one_hot"
    READS: ClassVar[tuple[str, ...]] = ("index",)
    WRITES: ClassVar[tuple[str, ...]] = ("out",)

    index: Loc
    out: Strided
    n: int


@dataclass(eq=False)
class ConcatKernel(Kernel):
    """``ins`` copied one after another along ``axis`` of ``out``."""

    kind: ClassVar[str] = "concat"
    READS: ClassVar[tuple[str, ...]] = ("ins",)
    WRITES: ClassVar[tuple[str, ...]] = ("out",)

    ins: list[Loc]
    out: Strided
    axis: int


@dataclass(eq=False)
class PadKernel(Kernel):
    """``out`` zeroed, then ``x`` copied ``before`` elements into ``axis``."""

    kind: ClassVar[str] = "pad"
    READS: ClassVar[tuple[str, ...]] = ("x",)
    WRITES: ClassVar[tuple[str, ...]] = ("out",)

    x: Loc
    out: Strided
    axis: int
    before: int


@dataclass(eq=False)
class CopyKernel(Kernel):
    """``dst = src`` elementwise over ``dst.shape`` (``src`` broadcast to it)."""

    kind: ClassVar[str] = "copy"
    READS: ClassVar[tuple[str, ...]] = ("src",)
    WRITES: ClassVar[tuple[str, ...]] = ("dst",)

    src: Loc
    dst: Strided


@dataclass(eq=False)
class RandomKernel(Kernel):
    """``out`` filled by the random op ``op`` from the Philox stream of ``key`` starting
    at counter block ``offset`` (``philox.py``); ``logits`` for ``categorical``. ``attrs``
    holds the op's remaining attributes (``p``, ``temperature``, ``top_k``, ``top_p``)."""

    kind: ClassVar[str] = "random"
    READS: ClassVar[tuple[str, ...]] = ("key", "logits")
    WRITES: ClassVar[tuple[str, ...]] = ("out",)

    op: str
    key: Loc
    logits: Loc | None
    out: Strided
    offset: int
    attrs: dict[str, Any]

    def headline(self) -> str:
        return f"random {self.op} at block {self.offset}"


@dataclass(eq=False)
class LayerNormKernel(Kernel):
    """A layer norm over the last axis of ``x`` (``row_kernels.LayerNormMatch``: ``match``
    names its nodes), ``eps`` baked, optional ``gain`` and ``bias`` vectors; ``stores``
    the members read outside the kernel (node -> location); the rest stay in
    registers and one row of scratch."""

    kind: ClassVar[str] = "layer_norm"
    READS: ClassVar[tuple[str, ...]] = ("x", "gain", "bias")
    WRITES: ClassVar[tuple[str, ...]] = ("stores",)

    x: Loc
    eps: Scalar
    gain: Loc | None
    bias: Loc | None
    stores: dict[int, Strided]
    match: Any

    @property
    def row(self) -> int:
        """The length of a row (the last axis)."""
        return int(self.space[-1]) if self.space else 1

    @property
    def rows(self) -> int:
        return math.prod(self.space[:-1]) if self.space else 1

    def headline(self) -> str:
        return f"layer_norm over [{','.join(map(str, self.space))}]"


@dataclass(eq=False)
class SoftmaxKernel(Kernel):
    """A softmax or log-sum-exp over the last axis of ``z`` (``row_kernels.SoftmaxMatch``:
    ``match`` names its nodes); ``stores`` the members read outside the kernel."""

    kind: ClassVar[str] = "softmax"
    READS: ClassVar[tuple[str, ...]] = ("z",)
    WRITES: ClassVar[tuple[str, ...]] = ("stores",)

    z: Loc
    stores: dict[int, Strided]
    match: Any

    @property
    def row(self) -> int:
        return int(self.space[-1]) if self.space else 1

    def headline(self) -> str:
        form = "softmax" if self.match.probabilities >= 0 else "log-sum-exp"
        return f"{form} over [{','.join(map(str, self.space))}]"


def _random_kernel(at: tuple[int, list[Loc], Strided], node: Node) -> RandomKernel:
    node_id, ins, out = at
    attrs = {k: v for k, v in node.attrs if k not in ("offset", "shape", "dtype")}
    return RandomKernel([node_id], node.type.shape, node.op, ins[0],
                        ins[1] if len(ins) > 1 else None, out, node.attr("offset"), attrs)


#: the kernel of each ``index`` or ``shape`` primitive that computes (``index_kernel``);
#: an action gets ``(node id, input locations, output location)`` and the node
INDEX_KERNELS = Rules([
    (Pat("take"), lambda at, node: TakeKernel(
        [at[0]], node.type.shape, at[1][0], at[1][1], at[2], node.attr("axis"))),
    (Pat("scatter_add"), lambda at, node: ScatterAddKernel(
        [at[0]], node.type.shape, at[1][0], at[1][1], at[2], node.attr("axis"),
        node.attr("size"))),
    (Pat("one_hot"), lambda at, node: OneHotKernel(
        [at[0]], node.type.shape, at[1][0], at[2], node.attr("n"))),
    (Pat("concat"), lambda at, node: ConcatKernel(
        [at[0]], node.type.shape, list(at[1]), at[2], node.attr("axis"))),
    (Pat("pad"), lambda at, node: PadKernel(
        [at[0]], node.type.shape, at[1][0], at[2], node.attr("axis"), node.attr("before"))),
    (Pat(where=lambda node, nodes: primitives.is_random(node.op)), _random_kernel),
])


def index_kernel(node_id: int, node: Node, ins: list[Loc], out: Strided) -> Kernel:
    """The kernel of an ``index`` or ``shape`` primitive that computes (``take``,
    ``scatter_add``, ``one_hot``, ``concat``, ``pad``, the random draws), its attributes
    as fields (``INDEX_KERNELS``)."""
    kernel: Kernel | None = INDEX_KERNELS.apply((node_id, ins, out), node, ())
    if kernel is None:
        raise AssertionError(f"no kernel for {node.op}")  # pragma: no cover
    return kernel


__all__ = ["Arena", "Buffer", "Scalar", "Strided", "Loc", "ROLES", "Kernel", "FusedKernel",
           "MatmulKernel", "TakeKernel", "ScatterAddKernel", "OneHotKernel", "ConcatKernel",
           "RandomKernel", "LayerNormKernel", "SoftmaxKernel",
           "PadKernel", "CopyKernel", "index_kernel", "c_strides", "contiguous", "view_of",
           "broadcast_access", "VIEWS", "INDEX_KERNELS"]

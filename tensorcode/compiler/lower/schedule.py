"""Schedule and buffers: the lowered program a backend generates code for.

``build(graph, sources)`` turns an optimized graph into a ``Schedule`` in named stages,
each a function below, in this order:

1. ``place_sources``: parameters, inputs and constants get their locations (a strided
   view of a parameter buffer, an input or a constant array; a size-1 leaf becomes a
   baked ``Scalar``). Reshape, transpose, broadcast, slice and detach compute nothing:
   they are views, and only a reshape that no strided view expresses is copied;
2. ``fuse`` (``fusion.py``): elementwise nodes of one shape, and the reductions they
   feed, share a loop nest; the layer norms and softmaxes ``row_kernels.py`` finds are
   kept out of it, each to be one ``LayerNormKernel`` or ``SoftmaxKernel``;
3. ``assign_buffers``: which values need memory (read across kernels, through views, or
   returned), one region of the output arena per root (in root order, so a gradient
   table can view the gradient roots without copying them) and one buffer for each
   other value;
4. ``lower_kernels``: typed kernel records (``kernels.py``) in a topological order:
   fused groups, matmuls (generated loops, or BLAS on contiguous operands), gathers,
   scatters, concatenations, pads and copies;
5. ``liveness``: which kernels write and read each buffer;
6. ``place_scratch``: a first-fit placement of scratch buffers in one arena per dtype,
   so scratch memory is close to the live maximum, not the sum of all nodes;
7. ``bind``: every location rebound from its buffer to its ``Arena`` with an absolute
   offset, which is all a backend needs to address memory.

``Schedule.describe()`` prints the lowered program: kernels, buffers and bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core import registry as primitives
from ..core.ir import SOURCE_OPS, Graph, Node, format_node
from .fusion import Fusion, fuse
from .kernels import (
    Arena,
    Buffer,
    CopyKernel,
    FusedKernel,
    Kernel,
    LayerNormKernel,
    Loc,
    MatmulKernel,
    Scalar,
    SoftmaxKernel,
    Strided,
    broadcast_access,
    c_strides,
    contiguous,
    index_kernel,
    view_of,
)
from .row_kernels import LayerNormMatch, SoftmaxMatch, layer_norms, softmaxes

#: matmuls with at most this many multiply-adds run as generated loops; larger float
#: matmuls call BLAS through ``np.dot`` on contiguous (or transposed) operands
LOOP_MATMUL_LIMIT = 1 << 15
#: arena offsets of buffers of 64 elements or more are rounded up to this many elements
#: (64 bytes of float32)
ALIGN = 16

#: whether ``build`` lowers the shapes ``row_kernels.py`` finds (layer norms, softmaxes and
#: log-sum-exps) as kernels of their own. Off by default: measured against the fused
#: kernels they replace (same bits), the layer norm ran 15-23% slower on rows of 128 and
#: 7% faster on rows of 768, the causal softmax over [4, 64, 64] 18% slower: each row's
#: scalar work sits between the kernel's loops, where the fused kernels vectorize it
#: across rows (see docs/benchmarks.md, "Where the time goes, per kernel")
FUSED_PATTERNS = False

#: ops lowered to one kernel record each by ``kernels.index_kernel``
INDEX_KERNEL_OPS = ("take", "scatter_add", "one_hot", "concat", "pad")


@dataclass
class Sources:
    """Where a lowered graph's sources come from: ``parameters`` node -> (dtype,
    offset) in the table's flat buffer; ``inputs`` the input nodes in argument order;
    ``parameter_dtypes`` the table's buffers in argument order."""

    parameters: dict[int, tuple[str, int]]
    inputs: list[int]
    parameter_dtypes: list[str]


@dataclass
class Schedule:
    """The lowered program: ``kernels`` in order, every location bound to an ``Arena``;
    ``buffers`` by name with their arena offsets and live ranges; ``locs`` each value's
    location; ``registers`` fused values that never touch memory (node -> kernel);
    ``constants`` the leaves passed as arrays, in argument order; ``roots`` (dtype,
    offset, shape) per root in the output arenas; ``arena``/``out_arena`` elements of
    scratch and output per dtype."""

    graph: Graph
    sources: Sources
    kernels: list[Kernel]
    buffers: dict[str, Buffer]
    locs: dict[int, Loc]
    registers: dict[int, int]
    constants: list[int]
    roots: list[tuple[str, int, tuple[int, ...]]]
    arena: dict[str, int]
    out_arena: dict[str, int]

    @property
    def scratch_bytes(self) -> int:
        return sum(n * np.dtype(d).itemsize for d, n in self.arena.items())

    @property
    def output_bytes(self) -> int:
        return sum(n * np.dtype(d).itemsize for d, n in self.out_arena.items())

    @property
    def naive_bytes(self) -> int:
        """What one buffer per computed node would take (the sum, not the live max)."""
        return sum(self.graph.nodes[b.node].type.nbytes for b in self.buffers.values()
                   if b.kind == "scratch" and b.node is not None)

    def describe(self) -> str:
        """The lowered program: sources, kernels with their nodes, buffers and bytes."""
        g = self.graph
        lines = []
        in_kernels = {i for k in self.kernels for i in k.nodes}
        for i, node in enumerate(g.nodes):
            loc = self.locs.get(i)
            if node.op in ("parameter", "input") or (node.op == "leaf" and i in self.constants):
                lines.append(f"{format_node(i, node)}  @ {loc}")
            elif node.op == "leaf":
                lines.append(f"{format_node(i, node)}  (baked into the code)")
            elif primitives.is_view(node.op) and i not in self.registers and i not in in_kernels:
                where = "a baked scalar" if isinstance(loc, Scalar) else (
                    f"{loc} strides {list(loc.strides)}" if isinstance(loc, Strided)
                    else "unused")
                lines.append(f"{format_node(i, node)}  (view: {where})")
        named = {b.node: name for name, b in self.buffers.items() if b.node is not None}
        for k, kernel in enumerate(self.kernels):
            writes = ", ".join(sorted(kernel.writes))
            lines.append(f"kernel {k}: {kernel.headline()}" + (f" -> {writes}" if writes else ""))
            for i in kernel.nodes:
                loc = self.locs.get(i)
                where = ""
                if i in self.registers and not isinstance(loc, Strided):
                    where = "  (register)"
                elif isinstance(loc, Strided):
                    where = f"  @ {loc}" + (f" ({named[i]})" if i in named else "")
                lines.append(f"  {format_node(i, g.nodes[i])}{where}")
        for name, buf in sorted(self.buffers.items()):
            lines.append(f"buffer {name}: {buf.dtype}[{buf.size}] at {buf.arena.label}"
                         f"[{buf.offset}] live kernels {buf.first}..{buf.last}")
        roots = ", ".join(f"{Arena('output', d).label}[{o}:{o + math.prod(s)}]"
                          for d, o, s in self.roots)
        lines.append(f"return {roots}")
        lines.append(f"scratch {self.scratch_bytes} bytes (one buffer per node would take "
                     f"{self.naive_bytes}); outputs {self.output_bytes} bytes; "
                     f"{len(self.kernels)} kernels")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# stage 1: sources and their views


def place_sources(graph: Graph, sources: Sources
                  ) -> tuple[dict[int, Loc], list[int], set[int]]:
    """Locations of the sources and of views of them: ``(locs, constants,
    materialize)``. ``constants`` are the leaves passed as arrays (argument order);
    ``materialize`` the view nodes that are no strided view of their input (a reshape
    that merges axes not contiguous among themselves) and must be copied. Views of
    computed values are located later, once their base has a buffer."""
    locs: dict[int, Loc] = {}
    constants: list[int] = []
    materialize: set[int] = set()
    for i, node in enumerate(graph.nodes):
        t = node.type
        if node.op == "parameter":
            dtype, offset = sources.parameters[i]
            locs[i] = contiguous(Arena("parameter", dtype), t.shape, dtype, offset)
        elif node.op == "input":
            locs[i] = contiguous(Arena("input", t.dtype, sources.inputs.index(i)), t.shape,
                                 t.dtype)
        elif node.op == "leaf":
            assert node.value is not None  # a leaf always carries its value
            if t.size == 1:
                locs[i] = Scalar(node.value.reshape(-1)[0].item(), t.dtype)
            else:
                locs[i] = contiguous(Arena("constant", t.dtype, len(constants)), t.shape,
                                     t.dtype)
                constants.append(i)
        else:
            loc = view_of(locs[node.inputs[0]], node, graph) if primitives.is_view(node.op) \
                else None
            if loc is None:  # computed, or a view that must be copied: a placeholder
                if primitives.is_view(node.op):
                    materialize.add(i)
                loc = contiguous(_PENDING, t.shape, t.dtype)
            locs[i] = loc
    # forget placeholders (and views of them): located again once buffers exist
    pending = [i for i, loc in locs.items() if isinstance(loc, Strided) and loc.base is _PENDING]
    for i in pending:
        del locs[i]
    return locs, constants, materialize


#: the base of a computed value's location before it has a buffer
_PENDING = Buffer("pending", "float64", 0, "scratch")


# ---------------------------------------------------------------------------------------
# stage 3: buffers


@dataclass
class Memory:
    """What ``assign_buffers`` decided: ``buffers`` by name, ``buffer_of`` value ->
    its buffer, ``needs_memory`` the values kernels read or write in memory, ``roots``
    (dtype, offset, shape) per root in the output arenas of ``out_arena`` elements, and
    ``root_copies`` the roots a copy writes into their region (node, destination)."""

    buffers: dict[str, Buffer]
    buffer_of: dict[int, Buffer]
    needs_memory: set[int]
    roots: list[tuple[str, int, tuple[int, ...]]]
    root_copies: list[tuple[int, Strided]]
    out_arena: dict[str, int]


def _base_of(graph: Graph, i: int, is_view: Callable[[int], bool]) -> int:
    while is_view(i):
        i = graph.nodes[i].inputs[0]
    return i


def assign_buffers(graph: Graph, fusion: Fusion, is_view: Callable[[int], bool],
                   units: dict[int, int] | None = None) -> Memory:
    """Give memory to every value read from memory (across kernels, through a view, or
    by a reduction's store) and to every root. Each root has its own region of the
    output arena of its dtype, in root order; the node computing a root writes there
    directly when the root is that node (or a reshape/detach of all of it), otherwise a
    copy kernel fills the region. Every other value gets a scratch buffer. A member of
    a kernel found by pattern (``units``) reads the other members in registers."""
    nodes = graph.nodes
    units = units or {}
    needs: set[int] = set()
    for i, node in enumerate(nodes):
        if node.op in SOURCE_OPS or is_view(i):
            continue
        for j in node.inputs:
            if i in units and units.get(j) == units[i]:
                continue
            if not fusion.in_register(graph, i, j):
                needs.add(_base_of(graph, j, is_view))
        if primitives.is_reduction(node.op) and i not in units:
            needs.add(i)
    for r in graph.outputs:
        needs.add(_base_of(graph, r, is_view))
    needs = {i for i in needs if nodes[i].op not in SOURCE_OPS}

    out_arena: dict[str, int] = {}
    roots: list[tuple[str, int, tuple[int, ...]]] = []
    buffers: dict[str, Buffer] = {}
    buffer_of: dict[int, Buffer] = {}
    root_copies: list[tuple[int, Strided]] = []
    for r in graph.outputs:
        t = nodes[r].type
        offset = out_arena.get(t.dtype, 0)
        out_arena[t.dtype] = offset + t.size
        roots.append((t.dtype, offset, t.shape))
        base = _base_of(graph, r, is_view)
        whole = base != r and nodes[base].op not in SOURCE_OPS and all(
            nodes[v].op in ("reshape", "detach") for v in _chain(graph, r, base))
        if nodes[base].op not in SOURCE_OPS and base not in buffer_of and (base == r or whole):
            name = f"o{len(roots) - 1}"
            buffers[name] = buffer_of[base] = Buffer(name, t.dtype, t.size, "output", offset,
                                                     node=base)
        else:
            root_copies.append((r, contiguous(Arena("output", t.dtype), t.shape, t.dtype,
                                              offset)))
    for i in sorted(needs):
        if i not in buffer_of:
            t = nodes[i].type
            buffers[f"b{i}"] = buffer_of[i] = Buffer(f"b{i}", t.dtype, t.size, "scratch",
                                                     node=i)
    return Memory(buffers, buffer_of, needs, roots, root_copies, out_arena)


def _chain(graph: Graph, top: int, base: int) -> list[int]:
    chain = []
    while top != base:
        chain.append(top)
        top = graph.nodes[top].inputs[0]
    return chain


# ---------------------------------------------------------------------------------------
# stage 4: kernels


class _Values:
    """Locations of values while kernels are lowered: a computed value is its buffer,
    a view a view of its base's location; copies get temporary scratch buffers."""

    def __init__(self, graph: Graph, locs: dict[int, Loc], memory: Memory,
                 is_view: Callable[[int], bool]) -> None:
        self.graph, self.locs, self.memory, self.is_view = graph, locs, memory, is_view
        self.temporaries = 0

    def __getitem__(self, i: int) -> Loc:
        if i in self.locs:
            return self.locs[i]
        node = self.graph.nodes[i]
        if self.is_view(i):
            loc = view_of(self[node.inputs[0]], node, self.graph)
            assert loc is not None
        else:
            loc = contiguous(self.memory.buffer_of[i], node.type.shape, node.type.dtype)
        self.locs[i] = loc
        return loc

    def temporary(self, shape: tuple[int, ...], dtype: str) -> Strided:
        name = f"t{self.temporaries}"
        self.temporaries += 1
        buf = self.memory.buffers[name] = Buffer(name, dtype, math.prod(shape), "scratch")
        return contiguous(buf, shape, dtype)


def _matmul_dims(node: Node, a: Node, b: Node) -> tuple[tuple[int, ...], int, int, int]:
    a_shape = a.type.shape if a.type.rank >= 2 else (1,) + a.type.shape
    b_shape = b.type.shape if b.type.rank >= 2 else b.type.shape + (1,)
    batch = primitives.broadcast_shapes("matmul", a_shape[:-2], b_shape[:-2])
    return batch, a_shape[-2], a_shape[-1], b_shape[-1]


def matmul_operand(loc: Loc, rank: int, is_left: bool) -> Loc:
    """A matmul operand as a rank>=2 view (1-D operands promoted as NumPy does)."""
    if isinstance(loc, Scalar) or rank >= 2:
        return loc
    if is_left:
        return Strided(loc.base, loc.offset, (1,) + loc.shape, (0,) + loc.strides, loc.dtype)
    return Strided(loc.base, loc.offset, loc.shape + (1,), loc.strides + (0,), loc.dtype)


def blas_layout(loc: Loc, rows: int, cols: int) -> str | None:
    """``"C"`` or ``"F"`` when the last two axes of ``loc`` are contiguous (or
    transposed-contiguous), so BLAS can read it in place; None otherwise."""
    if not isinstance(loc, Strided):
        return None
    r, c = loc.strides[-2], loc.strides[-1]
    if (c == 1 or cols == 1) and (r == cols or rows == 1):
        return "C"
    if (r == 1 or rows == 1) and (c == rows or cols == 1):
        return "F"
    return None


def _matmul(i: int, graph: Graph, values: _Values, kernels: list[Kernel]) -> None:
    """A matmul kernel: BLAS for large float products (operands BLAS cannot read in
    place copied first; a product with one vector side becomes a ``MatVec`` in the loop
    program), generated loops otherwise (``ikj``, or ``kij`` for narrow results, so no
    output waits on the one before)."""
    node = graph.nodes[i]
    a_node, b_node = graph.nodes[node.inputs[0]], graph.nodes[node.inputs[1]]
    batch, m, kk, n = _matmul_dims(node, a_node, b_node)
    a = matmul_operand(values[node.inputs[0]], a_node.type.rank, True)
    b = matmul_operand(values[node.inputs[1]], b_node.type.rank, False)
    dtype = node.type.dtype

    def copied(loc: Loc, shape: tuple[int, ...]) -> Strided:
        dst = values.temporary(shape, dtype)
        kernels.append(CopyKernel([], shape, loc, dst))
        return dst

    # a small product with one vector side whose matrix loops would read transposed
    # (a decode step's query against each head's cached keys) streams it in place as a
    # ``MatVec`` instead of copying it first
    transposed_vector = node.type.is_float and (m == 1) != (n == 1) and n >= 4 and \
        isinstance(b, Strided) and b.strides[-1] != 1 and \
        isinstance(a, Strided) and blas_layout(a, m, kk) is not None and \
        blas_layout(b, kk, n) is not None
    if node.type.is_float and (m * n * kk > LOOP_MATMUL_LIMIT or transposed_vector):
        a_shape = a_node.type.shape if a_node.type.rank >= 2 else (1,) + a_node.type.shape
        b_shape = b_node.type.shape if b_node.type.rank >= 2 else b_node.type.shape + (1,)
        if isinstance(a, Scalar) or blas_layout(a, m, kk) is None:
            a = copied(a, a_shape)
        if isinstance(b, Scalar) or blas_layout(b, kk, n) is None:
            b = copied(b, b_shape)
        mode = "blas"
    else:
        mode = "ikj" if n >= 4 else "kij"
        if mode == "ikj" and isinstance(b, Strided) and b.strides[-1] != 1 and n > 1:
            b = copied(b, b.shape)
    out = values[i]
    assert isinstance(out, Strided)
    kernels.append(MatmulKernel([i], node.type.shape, a, b, out, batch, m, kk, n, mode))


def _stores(members: Sequence[int], memory: Memory, values: _Values) -> dict[int, Strided]:
    stores: dict[int, Strided] = {}
    for i in members:
        if i in memory.needs_memory:
            loc = values[i]
            assert isinstance(loc, Strided)
            stores[i] = loc
    return stores


def _softmax(match: SoftmaxMatch, graph: Graph, memory: Memory, values: _Values
             ) -> SoftmaxKernel:
    return SoftmaxKernel(list(match.members), graph.nodes[match.z].type.shape,
                         values[match.z], _stores(match.members, memory, values), match)


def _layer_norm(match: LayerNormMatch, graph: Graph, memory: Memory, values: _Values
                ) -> LayerNormKernel:
    stores = _stores(match.members, memory, values)
    eps = values[match.eps]
    assert isinstance(eps, Scalar)  # a one-element leaf is baked
    gain = values[match.gain] if match.gain >= 0 else None
    bias = values[match.bias] if match.bias >= 0 else None
    return LayerNormKernel(list(match.members), graph.nodes[match.x].type.shape,
                           values[match.x], eps, gain, bias, stores, match)


def lower_kernels(graph: Graph, fusion: Fusion, memory: Memory, values: _Values,
                  norms: Sequence[LayerNormMatch | SoftmaxMatch] = ()
                  ) -> tuple[list[Kernel], dict[int, int]]:
    """The kernels in a topological order, and the fused values that live only in a
    register (node -> kernel index). Each fusion group is one ``FusedKernel``; each
    other computed node is placed after the groups it follows; a view that must be
    copied is a ``CopyKernel``; a layer norm or softmax found by pattern (``norms``) is
    one ``LayerNormKernel`` or ``SoftmaxKernel`` where its first node is; roots that are
    views, sources or repeats are copied into their output region last."""
    nodes = graph.nodes
    first = {match.members[0]: match for match in norms}
    inside = {i for match in norms for i in match.members}
    order = sorted([((k, 1, 0), "group", k) for k in range(len(fusion.groups))]
                   + [((after, 0, i), "node", i) for i, after in fusion.placed_after.items()])
    kernels: list[Kernel] = []
    registers: dict[int, int] = {}
    for _, what, ident in order:
        if what == "group":
            group = fusion.groups[ident]
            loads: dict[int, Loc] = {}
            for i in group.members:
                for j in nodes[i].inputs:
                    if not fusion.in_register(graph, i, j):
                        loads[j] = values[j]
                if i not in memory.needs_memory:
                    registers[i] = len(kernels)
            stores: dict[int, Strided] = {}
            for i in group.members:
                if i in memory.needs_memory:
                    store = values[i]
                    assert isinstance(store, Strided)
                    stores[i] = store
            kernels.append(FusedKernel(list(group.members), group.space, loads, stores))
            continue
        i, node = ident, nodes[ident]
        if i in first:
            match = first[i]
            kernels.append(_layer_norm(match, graph, memory, values)
                           if isinstance(match, LayerNormMatch)
                           else _softmax(match, graph, memory, values))
        elif i in inside:
            continue
        elif primitives.is_view(node.op):  # a reshape no strided view expresses: copy it
            dst = values[i]
            in_shape = nodes[node.inputs[0]].type.shape
            assert isinstance(dst, Strided)
            kernels.append(CopyKernel([i], in_shape, values[node.inputs[0]],
                                      contiguous(dst.base, in_shape, dst.dtype, dst.offset)))
        elif node.op == "matmul":
            _matmul(i, graph, values, kernels)
        elif node.op in INDEX_KERNEL_OPS or primitives.is_random(node.op):
            out = values[i]
            assert isinstance(out, Strided)
            kernels.append(index_kernel(i, node, [values[j] for j in node.inputs], out))
        else:  # pragma: no cover - elementwise ops and reductions are fused
            raise AssertionError(f"no lowering for {node.op}")
    for r, dest in memory.root_copies:
        kernels.append(CopyKernel([r], nodes[r].type.shape, values[r], dest))
    return kernels, registers


# ---------------------------------------------------------------------------------------
# stages 5-7: liveness, placement, binding


def liveness(kernels: Sequence[Kernel], buffers: dict[str, Buffer]) -> None:
    """Fill each kernel's ``reads``/``writes`` (buffer names) and each buffer's live
    range: the first kernel that writes it to the last that reads or writes it."""
    for k, kernel in enumerate(kernels):
        kernel.reads = {loc.base.name for loc in kernel.read_locs()
                        if isinstance(loc, Strided) and isinstance(loc.base, Buffer)}
        kernel.writes = {loc.base.name for loc in kernel.write_locs()
                         if isinstance(loc.base, Buffer)}
        for name in kernel.writes:
            buf = buffers[name]
            if buf.first < 0:
                buf.first = k
            buf.last = max(buf.last, k)
        for name in kernel.reads:
            buffers[name].last = max(buffers[name].last, k)


def place_scratch(buffers: dict[str, Buffer]) -> dict[str, int]:
    """First-fit placement of scratch buffers in one arena per dtype: largest first,
    at the lowest aligned offset that does not overlap a placed buffer whose lifetime
    overlaps (inclusive: a kernel never writes over what it reads). Returns the arena
    size (elements) per dtype."""
    arena: dict[str, int] = {}
    scratch = sorted((b for b in buffers.values() if b.kind == "scratch"),
                     key=lambda b: (-b.size, b.first, b.name))
    placed: dict[str, list[Buffer]] = {}
    for buf in scratch:
        if buf.first < 0:  # never written (cannot happen for a live value)
            buf.first = buf.last = 0
        others = sorted((o for o in placed.get(buf.dtype, [])
                         if not (o.last < buf.first or buf.last < o.first)),
                        key=lambda o: o.offset)
        offset = 0
        for o in others:
            if offset + buf.size <= o.offset:
                break
            offset = max(offset, _align(o.offset + o.size, buf.size))
        buf.offset = offset
        placed.setdefault(buf.dtype, []).append(buf)
        arena[buf.dtype] = max(arena.get(buf.dtype, 0), offset + buf.size)
    return arena


def _align(n: int, size: int) -> int:
    """Round a buffer's offset up to ``ALIGN`` elements, unless it is small enough
    that the padding would cost more than it saves."""
    if size < 4 * ALIGN:
        return n
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _bound(loc: Loc) -> Loc:
    if isinstance(loc, Strided) and isinstance(loc.base, Buffer):
        return loc.at(loc.base.arena, loc.base.offset)
    return loc


def bind(kernels: Sequence[Kernel], locs: dict[int, Loc]) -> None:
    """Rebind every location from its buffer to its ``Arena`` (offsets made absolute),
    in the kernels and in ``locs``: what the backend receives names arrays only."""
    for kernel in kernels:
        kernel.rebind(_bound)
    for i, loc in locs.items():
        locs[i] = _bound(loc)


# ---------------------------------------------------------------------------------------
# the pipeline


def build(graph: Graph, sources: Sources) -> Schedule:
    """Lower an optimized graph to kernels and buffers: the stages of the module
    docstring, in order."""
    locs, constants, materialize = place_sources(graph, sources)

    def is_view(i: int) -> bool:
        return primitives.is_view(graph.nodes[i].op) and i not in materialize

    norms: list[LayerNormMatch | SoftmaxMatch] = []
    if FUSED_PATTERNS:
        norms += layer_norms(graph, is_view)
        norms += softmaxes(graph, is_view, {i for m in norms for i in m.members})
    units = {i: match.members[0] for match in norms for i in match.members}
    fusion = fuse(graph, is_view, units)
    memory = assign_buffers(graph, fusion, is_view, units)
    kernels, registers = lower_kernels(graph, fusion, memory,
                                       _Values(graph, locs, memory, is_view), norms)
    liveness(kernels, memory.buffers)
    arena = place_scratch(memory.buffers)
    bind(kernels, locs)
    return Schedule(graph, sources, kernels, memory.buffers, locs, registers, constants,
                    memory.roots, arena, memory.out_arena)


__all__ = ["Schedule", "Sources", "Memory", "build", "place_sources", "assign_buffers",
           "lower_kernels", "liveness", "place_scratch", "bind", "blas_layout",
           "matmul_operand", "LOOP_MATMUL_LIMIT", "Kernel", "Buffer", "Scalar", "Strided",
           "Arena", "c_strides", "broadcast_access"]

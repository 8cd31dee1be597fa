"""Schedule and buffers: the lowered program a backend generates code for.

``build(graph, sources)`` turns an optimized graph into a ``Schedule``:

- every value gets a *location*: a baked scalar, or a strided view (offset and strides
  in elements) into a flat buffer: a parameter buffer (one per dtype, the table's own),
  a constant, an input, the scratch arena or the output arena of its dtype. Reshape,
  transpose, broadcast, slice and detach compute nothing: they are views, and only a
  reshape of a non-contiguous view is copied;
- kernels in a topological order: fused elementwise groups (from ``passes.fuse``, with
  the reductions they feed), matmuls, gathers and scatters, copies;
- liveness of every scratch buffer and a first-fit placement in one arena per dtype, so
  scratch memory is close to the live maximum, not the sum of all nodes;
- one output arena per dtype holding every root, in root order, so a gradient table can
  view the gradient roots without copying them.

``Schedule.describe()`` prints the lowered program: kernels, buffers and bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import primitives
from .ir import DTYPES, SOURCE_OPS, Graph, Node, format_node
from .passes import REDUCE_OPS, VIEW_OPS, fuse, is_elementwise

#: matmuls with at most this many multiply-adds run as generated loops; larger float
#: matmuls call BLAS through ``np.dot`` on contiguous (or transposed) operands
LOOP_MATMUL_LIMIT = 1 << 15
#: arena offsets of buffers of 64 elements or more are rounded up to this many elements
#: (64 bytes of float32)
ALIGN = 16


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(strides))


# ---------------------------------------------------------------------------------------
# locations


@dataclass(frozen=True)
class Scalar:
    """A value every element of which is one constant, baked into the code."""

    value: Any
    dtype: str


@dataclass(frozen=True)
class Strided:
    """A strided view into flat buffer ``buffer`` (a name the backend binds)."""

    buffer: str
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


Loc = Scalar | Strided


def view_of(loc: Loc, node: Node, graph: Graph) -> Loc | None:
    """The location of view op ``node`` applied to ``loc``, or None if it is not a
    strided view of it (a reshape of a non-contiguous view)."""
    shape = node.type.shape
    if isinstance(loc, Scalar):
        return loc
    op = node.op
    if op == "detach":
        return loc
    if op == "reshape":
        if not loc.contiguous:
            return None
        return Strided(loc.buffer, loc.offset, shape, c_strides(shape), loc.dtype)
    if op == "transpose":
        axes = node.attr("axes")
        return Strided(loc.buffer, loc.offset, shape, tuple(loc.strides[a] for a in axes),
                       loc.dtype)
    if op == "broadcast_to":
        lead = len(shape) - len(loc.shape)
        strides = [0] * lead + [0 if d == 1 and t != 1 else s for d, t, s in
                                zip(loc.shape, shape[lead:], loc.strides)]
        return Strided(loc.buffer, loc.offset, shape, tuple(strides), loc.dtype)
    if op == "slice":
        axis, start = node.attr("axis"), node.attr("start")
        return Strided(loc.buffer, loc.offset + start * loc.strides[axis], shape, loc.strides,
                       loc.dtype)
    raise AssertionError(op)  # pragma: no cover


def broadcast_access(loc: Strided, space: Sequence[int]) -> tuple[int, ...]:
    """Strides of ``loc`` over an iteration ``space`` it broadcasts to (right-aligned)."""
    lead = len(space) - len(loc.shape)
    return tuple([0] * lead + [0 if d == 1 else s for d, s in zip(loc.shape, loc.strides)])


# ---------------------------------------------------------------------------------------
# buffers and kernels


@dataclass
class Buffer:
    """A flat region computed by one kernel: scratch (placed in the arena by liveness)
    or an output (a fixed region of the output arena)."""

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


@dataclass
class Kernel:
    """One loop nest (or library call). ``kind`` is ``fused``, ``matmul``, ``take``,
    ``scatter_add``, ``one_hot``, ``concat``, ``pad`` or ``copy``; ``nodes`` the graph
    nodes it computes; ``reads`` the buffers it reads; ``writes`` the ones it writes."""

    kind: str
    nodes: list[int]
    space: tuple[int, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)
    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)


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
    graph: Graph
    sources: Sources
    kernels: list[Kernel]
    buffers: dict[str, Buffer]
    locs: dict[int, Loc]
    registers: dict[int, int]          # fused node -> kernel index (register-only values)
    constants: list[int]               # leaf nodes passed as arrays, in argument order
    roots: list[tuple[str, int, tuple[int, ...]]]  # (dtype, offset, shape) per root
    arena: dict[str, int]              # scratch elements per dtype
    out_arena: dict[str, int]          # output elements per dtype

    def param_name(self, dtype: str) -> str:
        return f"P_{DTYPES[dtype]}"

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
        for i, node in enumerate(g.nodes):
            if node.op == "parameter":
                dtype, offset = self.sources.parameters[i]
                lines.append(f"{format_node(i, node)}  @ {self.param_name(dtype)}[{offset}]")
            elif node.op == "input":
                lines.append(f"{format_node(i, node)}  @ X{self.sources.inputs.index(i)}")
            elif node.op == "leaf" and i in self.constants:
                lines.append(f"{format_node(i, node)}  @ C{self.constants.index(i)}")
            elif node.op == "leaf":
                lines.append(f"{format_node(i, node)}  (baked into the code)")
            elif node.op in VIEW_OPS and i not in self.registers and not any(
                    i in k.nodes for k in self.kernels):
                loc = self.locs.get(i)
                where = "a baked scalar" if isinstance(loc, Scalar) else (
                    f"{loc.buffer}[{loc.offset}] strides {list(loc.strides)}"
                    if isinstance(loc, Strided) else "unused")
                lines.append(f"{format_node(i, node)}  (view: {where})")
        for k, kernel in enumerate(self.kernels):
            head = f"kernel {k}: {kernel.kind}"
            if kernel.kind == "fused":
                head += f" over [{','.join(map(str, kernel.space))}]"
            if kernel.kind == "matmul":
                head += f" ({kernel.detail['mode']})"
            writes = ", ".join(sorted(kernel.writes))
            lines.append(head + (f" -> {writes}" if writes else ""))
            for i in kernel.nodes:
                where = ""
                loc = self.locs.get(i)
                if i in self.registers and not isinstance(loc, Strided):
                    where = "  (register)"
                elif isinstance(loc, Strided):
                    where = f"  @ {loc.buffer}[{loc.offset}]"
                lines.append(f"  {format_node(i, g.nodes[i])}{where}")
        for name, buf in sorted(self.buffers.items()):
            arena = "W" if buf.kind == "scratch" else "O"
            lines.append(f"buffer {name}: {buf.dtype}[{buf.size}] at {arena}_{DTYPES[buf.dtype]}"
                         f"[{buf.offset}] live kernels {buf.first}..{buf.last}")
        roots = ", ".join(f"O_{DTYPES[d]}[{o}:{o + math.prod(s)}]" for d, o, s in self.roots)
        lines.append(f"return {roots}")
        lines.append(f"scratch {self.scratch_bytes} bytes (one buffer per node would take "
                     f"{self.naive_bytes}); outputs {self.output_bytes} bytes; "
                     f"{len(self.kernels)} kernels")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# building


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
        return Strided(loc.buffer, loc.offset, (1,) + loc.shape, (0,) + loc.strides, loc.dtype)
    return Strided(loc.buffer, loc.offset, loc.shape + (1,), loc.strides + (0,), loc.dtype)


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


def build(graph: Graph, sources: Sources) -> Schedule:
    """Lower an optimized graph to kernels and buffers (see the module docstring)."""
    nodes = graph.nodes
    locs: dict[int, Loc] = {}
    constants: list[int] = []
    materialize: set[int] = set()  # view nodes that must be copied

    # -- source and view locations ----------------------------------------------------
    for i, node in enumerate(nodes):
        if node.op == "parameter":
            dtype, offset = sources.parameters[i]
            locs[i] = Strided(f"P_{DTYPES[dtype]}", offset, node.type.shape,
                              c_strides(node.type.shape), dtype)
        elif node.op == "input":
            k = sources.inputs.index(i)
            locs[i] = Strided(f"X{k}", 0, node.type.shape, c_strides(node.type.shape),
                              node.type.dtype)
        elif node.op == "leaf":
            if node.type.size == 1:
                locs[i] = Scalar(node.value.reshape(-1)[0].item(), node.type.dtype)
            else:
                locs[i] = Strided(f"C{len(constants)}", 0, node.type.shape,
                                  c_strides(node.type.shape), node.type.dtype)
                constants.append(i)
        elif node.op in VIEW_OPS:
            loc = view_of(locs[node.inputs[0]], node, graph)
            if loc is None:
                materialize.add(i)
                loc = Strided(f"@{i}", 0, node.type.shape, c_strides(node.type.shape),
                              node.type.dtype)
            locs[i] = loc
        else:  # computed: a placeholder until buffers are assigned
            locs[i] = Strided(f"@{i}", 0, node.type.shape, c_strides(node.type.shape),
                              node.type.dtype)
    # forget placeholders (and views of them): resolved again once buffers exist
    for i in list(locs):
        if isinstance(locs[i], Strided) and locs[i].buffer.startswith("@"):
            del locs[i]

    def is_view(i: int) -> bool:
        return nodes[i].op in VIEW_OPS and i not in materialize

    # views of computed values: resolved once the base has a buffer (below)
    fusion = fuse(graph, is_view)

    def base_of(i: int) -> int:
        while is_view(i):
            i = nodes[i].inputs[0]
        return i

    # -- which values need memory -------------------------------------------------------
    computed = [i for i, n in enumerate(nodes) if n.op not in SOURCE_OPS and not is_view(i)]
    needs_memory: set[int] = set()
    for i in computed:
        node = nodes[i]
        g = fusion.group_of.get(i)
        for j in node.inputs:
            direct = g is not None and fusion.group_of.get(j) == g and nodes[j].op not in REDUCE_OPS
            if not direct:
                needs_memory.add(base_of(j))
        if node.op in REDUCE_OPS:
            needs_memory.add(i)
    for r in graph.outputs:
        needs_memory.add(base_of(r))
    needs_memory = {i for i in needs_memory if nodes[i].op not in SOURCE_OPS}

    # -- outputs: one region per root, aliased to the computing node when it is whole ---
    out_arena: dict[str, int] = {}
    roots: list[tuple[str, int, tuple[int, ...]]] = []
    buffers: dict[str, Buffer] = {}
    buffer_of: dict[int, str] = {}
    root_copies: list[tuple[int, Strided]] = []  # (root node, destination)
    for r in graph.outputs:
        t = nodes[r].type
        offset = out_arena.get(t.dtype, 0)
        out_arena[t.dtype] = offset + t.size
        roots.append((t.dtype, offset, t.shape))
        dest = Strided(f"O_{DTYPES[t.dtype]}", offset, t.shape, c_strides(t.shape), t.dtype)
        base = base_of(r)
        whole = base != r and nodes[base].op not in SOURCE_OPS and all(
            nodes[v].op in ("reshape", "detach") for v in _chain(graph, r, base))
        if nodes[base].op not in SOURCE_OPS and base not in buffer_of and (base == r or whole):
            name = f"o{len(roots) - 1}"
            buffers[name] = Buffer(name, t.dtype, t.size, "output", offset, node=base)
            buffer_of[base] = name
        else:
            root_copies.append((r, dest))

    for i in sorted(needs_memory):
        if i not in buffer_of:
            name = f"b{i}"
            buffers[name] = Buffer(name, nodes[i].type.dtype, nodes[i].type.size, "scratch",
                                   node=i)
            buffer_of[i] = name

    def buffer_loc(i: int) -> Strided:
        buf = buffers[buffer_of[i]]
        shape = nodes[i].type.shape
        return Strided(buf.name, 0, shape, c_strides(shape), nodes[i].type.dtype)

    def resolve(i: int) -> Loc:
        """The location of value i (computed values through their buffer)."""
        if i in locs:
            return locs[i]
        if is_view(i):
            loc = view_of(resolve(nodes[i].inputs[0]), nodes[i], graph)
            assert loc is not None
            locs[i] = loc
            return loc
        locs[i] = buffer_loc(i)
        return locs[i]

    # -- kernel order -------------------------------------------------------------------
    items: list[tuple[tuple, str, int]] = []
    for k, group in enumerate(fusion.groups):
        items.append(((k, 1, 0), "group", k))
    for i, after in fusion.placed_after.items():
        items.append(((after, 0, i), "node", i))
    items.sort()

    kernels: list[Kernel] = []
    registers: dict[int, int] = {}
    copy_count = 0

    def add_copy(src: Loc, shape: tuple[int, ...], dtype: str, node: int | None,
                 dest: Strided | None = None) -> Strided:
        nonlocal copy_count
        if dest is None:
            name = f"t{copy_count}"
            copy_count += 1
            buffers[name] = Buffer(name, dtype, math.prod(shape), "scratch", node=None)
            dest = Strided(name, 0, shape, c_strides(shape), dtype)
        kernels.append(Kernel("copy", [] if node is None else [node], shape,
                              {"src": src, "dst": dest}))
        return dest

    for _, what, ident in items:
        if what == "group":
            group = fusion.groups[ident]
            kernel = Kernel("fused", list(group.members), group.space)
            index = len(kernels)
            loads: dict[int, Loc] = {}
            for i in group.members:
                for j in nodes[i].inputs:
                    direct = (fusion.group_of.get(j) == ident and nodes[j].op not in REDUCE_OPS)
                    if not direct:
                        loads[j] = resolve(j)
                if i in needs_memory:
                    resolve(i)
                else:
                    registers[i] = index
            kernel.detail["loads"] = loads
            kernel.detail["stores"] = {i: locs[i] for i in group.members if i in needs_memory}
            kernels.append(kernel)
            continue
        i = ident
        node = nodes[i]
        if node.op in VIEW_OPS:  # a reshape of a non-contiguous view: copy it
            src = resolve(node.inputs[0])
            dst = resolve(i)
            in_shape = nodes[node.inputs[0]].type.shape
            add_copy(src, in_shape, node.type.dtype, i,
                     dest=Strided(dst.buffer, dst.offset, in_shape, c_strides(in_shape),
                                  dst.dtype))
            continue
        ins = [resolve(j) for j in node.inputs]
        out = resolve(i)
        if node.op == "matmul":
            a_node, b_node = nodes[node.inputs[0]], nodes[node.inputs[1]]
            batch, m, kk, n = _matmul_dims(node, a_node, b_node)
            a = matmul_operand(ins[0], a_node.type.rank, True)
            b = matmul_operand(ins[1], b_node.type.rank, False)
            a_shape = a_node.type.shape if a_node.type.rank >= 2 else (1,) + a_node.type.shape
            b_shape = b_node.type.shape if b_node.type.rank >= 2 else b_node.type.shape + (1,)
            blas = node.type.is_float and m * n * kk > LOOP_MATMUL_LIMIT
            if blas:
                if isinstance(a, Scalar) or blas_layout(a, m, kk) is None:
                    a = add_copy(a, a_shape, node.type.dtype, None)
                if isinstance(b, Scalar) or blas_layout(b, kk, n) is None:
                    b = add_copy(b, b_shape, node.type.dtype, None)
                mode = "blas"
            else:
                # narrow results: k outermost, so no output waits on the one before
                mode = "ikj" if n >= 4 else "kij"
                if mode == "ikj" and isinstance(b, Strided) and b.strides[-1] != 1 and n > 1:
                    b = add_copy(b, b.shape, node.type.dtype, None)
            kernels.append(Kernel("matmul", [i], node.type.shape,
                                  {"a": a, "b": b, "out": out, "batch": batch, "m": m,
                                   "k": kk, "n": n, "mode": mode}))
        elif node.op in ("take", "scatter_add", "one_hot", "concat", "pad"):
            kernels.append(Kernel(node.op, [i], node.type.shape,
                                  {"ins": ins, "out": out, "attrs": node.attr_dict}))
        elif node.op == "astype" or is_elementwise(node) or node.op in REDUCE_OPS:
            raise AssertionError(f"{node.op} should have been fused")  # pragma: no cover
        else:  # pragma: no cover - every registry op is handled above
            raise AssertionError(f"no lowering for {node.op}")

    # roots that are views, sources or repeated: copy into their output region
    for r, dest in root_copies:
        add_copy(resolve(r), nodes[r].type.shape, nodes[r].type.dtype, r, dest=dest)

    # -- reads, writes and liveness -----------------------------------------------------
    for k, kernel in enumerate(kernels):
        kernel.reads = set()
        kernel.writes = set()
        for loc in _kernel_reads(kernel):
            if isinstance(loc, Strided) and loc.buffer in buffers:
                kernel.reads.add(loc.buffer)
        for loc in _kernel_writes(kernel):
            if loc.buffer in buffers:
                kernel.writes.add(loc.buffer)
        for name in kernel.writes:
            buf = buffers[name]
            if buf.first < 0:
                buf.first = k
            buf.last = max(buf.last, k)
        for name in kernel.reads:
            buffers[name].last = max(buffers[name].last, k)
    arena = _place(buffers)
    return Schedule(graph, sources, kernels, buffers, locs, registers, constants, roots,
                    arena, out_arena)


def _chain(graph: Graph, top: int, base: int) -> list[int]:
    chain = []
    while top != base:
        chain.append(top)
        top = graph.nodes[top].inputs[0]
    return chain


def _kernel_reads(kernel: Kernel) -> list[Loc]:
    d = kernel.detail
    if kernel.kind == "fused":
        return list(d["loads"].values())
    if kernel.kind == "matmul":
        return [d["a"], d["b"]]
    if kernel.kind == "copy":
        return [d["src"]]
    return list(d["ins"])


def _kernel_writes(kernel: Kernel) -> list[Strided]:
    d = kernel.detail
    if kernel.kind == "fused":
        return list(d["stores"].values())
    if kernel.kind == "copy":
        return [d["dst"]]
    return [d["out"]]


def _place(buffers: dict[str, Buffer]) -> dict[str, int]:
    """First-fit placement of scratch buffers in one arena per dtype: largest first,
    at the lowest aligned offset that does not overlap a placed buffer whose lifetime
    overlaps (inclusive: a kernel never writes over what it reads)."""
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


__all__ = ["Schedule", "Kernel", "Buffer", "Sources", "Scalar", "Strided", "build",
           "c_strides", "LOOP_MATMUL_LIMIT"]

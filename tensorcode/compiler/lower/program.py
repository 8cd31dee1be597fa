"""The typed program: everything a code generator and a loader need, and nothing else.

``build(schedule, step)`` turns the schedule's last stage into one ``Program``: the
kernel records (their locations bound to arenas) and each as a loop program, the
arrays of the generated code in argument order, each with its arena, dtype and size,
the roots' places in the output arenas, and the entry points a plan calls (``run``,
``run_into``, ``run_scalars``, ``run_batch``, and a step plan's ``run_step`` and
``run_steps``), each with its typed
arguments. A generator writes a function per entry point under ``EntryPoint.name`` with
the arguments' names; a loader finds the function by the same record and types its
arguments from ``Argument``. Nothing reads a generated name back as text, and an
arena's name has one home: ``Arena.label``.

A call of an entry point that cannot run reports why as data, the same for every
backend: a ``Status`` and an argument index, carried by ``Refused``. Each backend maps
its own failures to them (``backends.Compiled.refusal``) and the plan raises the
documented error from the pair; no backend's exception text is read.
"""

from __future__ import annotations

import enum
import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import FeedError
from ..core import ir
from ..core.dtypes import NUMPY
from ..core.ir import Graph
from .epilogue import fuse as fuse_epilogues
from .kernels import Arena, Kernel
from .loops import LoopKernel, scratch_sizes
from .partition import lower as lower_loops
from .schedule import Schedule
from .update import StepSpec


class Status(enum.IntEnum):
    """Why a call of an entry point did not run (``OK``: it ran). ``Refused.index`` says
    which argument: an input's position among the program's inputs, a buffer's among the
    fixed buffers (parameters and constants, then a step's writable ones), or for
    ``ARITY`` how many inputs the call got."""

    OK = 0
    #: the call got the wrong number of inputs
    ARITY = 1
    #: input ``index`` is not a C-contiguous, native-order array of its exact dtype
    INPUT = 2
    #: input ``index`` has the wrong shape (past the leading case or step axis of a
    #: batch, or that axis disagrees with the other inputs' or the steps')
    SHAPE = 3
    #: an index the program reads (``take``, ``scatter_add``, ``one_hot``) is out of
    #: range; ``Refused.detail`` names the op and the axis size
    RANGE = 4
    #: fixed buffer ``index`` (a parameter, constant, state or step buffer) is not one
    #: the program can take: a plan's own bookkeeping went wrong, not the caller's feed
    BUFFER = 5


class Refused(FeedError):
    """A call of an entry point that did not run: ``status``, ``index`` and, for
    ``Status.RANGE``, ``detail`` (the op's own words, generated from the kernel). The
    plan turns it into its documented error (``plans/plan.py``: ``call_error``); a raw
    compiled call (``bound.flat``, ``bound.scalars``) lets it through as it is, a
    ``FeedError`` that names the argument by position."""

    def __init__(self, status: Status, index: int = -1, detail: str = "") -> None:
        self.status = Status(status)
        self.index = index
        self.detail = detail
        super().__init__(detail or f"the compiled call refused argument #{index} "
                                   f"({self.status.name.lower()})")

    def __reduce__(self) -> tuple:
        return (Refused, (int(self.status), self.index, self.detail))


def check_inputs(program: Program, inputs: Sequence[Any], leading: int | None = None
                 ) -> Refused | None:
    """The first input of ``inputs`` that ``program``'s entry points refuse, as a
    ``Refused`` (``None``: all fit). ``leading`` is the extent of a batch's leading case
    or step axis (0: take it from the first input whose axis is not 1; ``None``: no
    such axis). The one statement of what an entry point accepts, for a backend that
    checks in Python or that diagnoses a refusal after its compiled code raised."""
    if len(inputs) != len(program.inputs):
        return Refused(Status.ARITY, len(inputs))
    if leading == 0:
        leading = next((v.shape[0] for v in inputs if isinstance(v, np.ndarray) and v.ndim
                        and v.shape[0] != 1), 1)
    for k, (x, value) in enumerate(zip(program.inputs, inputs)):
        if type(value) is not np.ndarray or value.dtype.name != x.dtype or \
                not value.dtype.isnative or not value.flags.c_contiguous:
            return Refused(Status.INPUT, k)
        if leading is None:
            if value.shape != x.shape:
                return Refused(Status.SHAPE, k)
        elif value.ndim == 0 or value.shape[1:] != x.shape or \
                value.shape[0] not in (leading, 1):
            return Refused(Status.SHAPE, k)
    return None


@dataclass(frozen=True)
class Array:
    """One array of the generated code: its ``arena`` (hence its name, ``name``), its
    ``shape`` as an entry point receives it (flat arenas are 1-D) and whether the code
    writes it."""

    arena: Arena
    shape: tuple[int, ...]
    writable: bool = False

    @property
    def name(self) -> str:
        return self.arena.label

    @property
    def dtype(self) -> str:
        return self.arena.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Argument:
    """One argument of an entry point: ``name`` in the generated code, ``dtype``,
    ``ndim`` (an array's; a 0-d input is an array too), whether the code writes it, and
    whether it is a plain number (``scalar``: a step's learning rate) rather than an
    array."""

    name: str
    dtype: str
    ndim: int
    writable: bool = False
    scalar: bool = False


@dataclass(frozen=True)
class EntryPoint:
    """A function of the generated code a plan calls: ``name`` and its ``arguments``."""

    name: str
    arguments: tuple[Argument, ...]


@dataclass(frozen=True)
class Root:
    """Where a root lands: ``offset`` elements into the ``dtype`` output arena."""

    dtype: str
    offset: int
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Program:
    """The schedule as its generators and loaders see it (see the module doc).

    ``parameters`` (one buffer of the parameter table per dtype, each as large as the
    code reaches), ``constants`` and ``inputs`` are read-only; ``scratch`` and
    ``outputs`` hold one flat arena per dtype. A step plan adds ``updates`` (the same
    parameter buffers, writable), ``states`` (one per state table and dtype) and
    ``step`` (where its update reads and writes). ``row_start``: where the reduction
    rows (``layout.row_terms``) begin in each scratch arena, past the schedule's own
    buffers. ``parameter_nodes`` ((node, dtype, offset) per parameter read),
    ``input_nodes`` and ``constant_nodes`` say which graph node each source array
    holds, for a backend that interprets ``graph`` instead of generating code.
    ``loops`` is each kernel as a loop program (``loops.py``), what every code
    generator renders, made on first use. Every generator and loader reads this record
    alone: none sees the ``Schedule`` it was built from."""

    graph: Graph
    kernels: tuple[Kernel, ...]
    parameters: tuple[Array, ...]
    constants: tuple[Array, ...]
    inputs: tuple[Array, ...]
    scratch: tuple[Array, ...]
    outputs: tuple[Array, ...]
    roots: tuple[Root, ...]
    row_start: dict[str, int]
    parameter_nodes: tuple[tuple[int, str, int], ...]
    input_nodes: tuple[int, ...]
    constant_nodes: tuple[int, ...]
    updates: tuple[Array, ...] = ()
    states: tuple[Array, ...] = ()
    step: StepSpec | None = None

    @functools.cached_property
    def loops(self) -> tuple[LoopKernel, ...]:
        """Each kernel as a loop program (``loops.lower``), partitioned, with epilogues
        moved into the blocks of split products (``epilogue.py``); made on first use: a
        process that loads a cached plan never needs it."""
        return fuse_epilogues(lower_loops(self.graph, self.kernels, self.row_start))

    # -- entry points ---------------------------------------------------------------
    @property
    def sources(self) -> tuple[Array, ...]:
        """What every entry point takes first: parameters, constants, inputs."""
        return self.parameters + self.constants + self.inputs

    @property
    def run(self) -> EntryPoint:
        """``run(P.., C.., X..)``: one call, the output arenas returned."""
        return EntryPoint("run", _arguments(self.sources))

    @property
    def run_into(self) -> EntryPoint:
        """``run_into(P.., C.., X.., W.., O..)``: ``run`` over arenas the caller passes."""
        return EntryPoint("run_into", _arguments(self.sources + self.scratch + self.outputs))

    @property
    def run_scalars(self) -> EntryPoint | None:
        """``run_scalars``: ``run``'s roots as numbers; only when every root is a scalar."""
        if not self.roots or any(root.shape for root in self.roots):
            return None
        return EntryPoint("run_scalars", _arguments(self.sources))

    @property
    def run_batch(self) -> EntryPoint:
        """``run_batch``: N cases, each input with a leading case axis."""
        inputs = tuple(Argument(a.name, a.dtype, len(a.shape) + 1) for a in self.inputs)
        return EntryPoint("run_batch", _arguments(self.parameters + self.constants) + inputs)

    def _step_tail(self, rate: Argument) -> tuple[Argument, ...]:
        """A step entry's arguments after the sources: the writable parameter buffers,
        the state buffers, each slot's step count and presence flag, the rate(s)."""
        return (_arguments(self.updates + self.states)
                + (Argument("steps", "float64", 1, True), Argument("present", "uint8", 1, True),
                   rate))

    @property
    def run_step(self) -> EntryPoint | None:
        """A step plan's ``run_step(P.., C.., X.., U.., S.., steps, present, lr)``."""
        if self.step is None:
            return None
        return EntryPoint("run_step", _arguments(self.sources)
                          + self._step_tail(Argument("lr", "float64", 0, scalar=True)))

    @property
    def run_steps(self) -> EntryPoint | None:
        """A step plan's ``run_steps``: K steps, each input with a leading step axis."""
        if self.step is None:
            return None
        inputs = tuple(Argument(a.name, a.dtype, len(a.shape) + 1) for a in self.inputs)
        return EntryPoint("run_steps", _arguments(self.parameters + self.constants) + inputs
                          + self._step_tail(Argument("lrs", "float64", 1)))

    def entry_points(self) -> tuple[EntryPoint, ...]:
        """Every entry point this program has."""
        found = (self.run, self.run_into, self.run_scalars, self.run_batch, self.run_step,
                 self.run_steps)
        return tuple(e for e in found if e is not None)

    @property
    def scratch_bytes(self) -> int:
        return sum(a.size * _itemsize(a.dtype) for a in self.scratch)

    @property
    def output_bytes(self) -> int:
        return sum(a.size * _itemsize(a.dtype) for a in self.outputs)


def _itemsize(dtype: str) -> int:
    return NUMPY[dtype].itemsize


def _arguments(arrays: tuple[Array, ...]) -> tuple[Argument, ...]:
    return tuple(Argument(a.name, a.dtype, len(a.shape), a.writable) for a in arrays)


def _parameter_size(schedule: Schedule, step: StepSpec | None, dtype: str) -> int:
    """How much of the parameter table's ``dtype`` buffer the code reaches: the end of
    the last parameter the graph reads, or that the update writes (a bound for the
    array a pointer is wrapped as, never larger than the table's buffer)."""
    g = schedule.graph
    ends = [offset + g.nodes[i].type.size
            for i, (d, offset) in schedule.sources.parameters.items() if d == dtype]
    if step is not None:
        ends += [offset + size for _, d, offset, size, _ in step.slots if d == dtype]
    return int(max(ends, default=0))


def build(schedule: Schedule, step: StepSpec | None = None) -> Program:
    """The ``Program`` of ``schedule`` (with ``step``, a step plan's)."""
    s, g = schedule, schedule.graph
    dtypes = list(s.sources.parameter_dtypes)
    parameters = tuple(Array(Arena("parameter", d), (_parameter_size(s, step, d),))
                       for d in dtypes)
    constants = tuple(Array(Arena("constant", g.nodes[i].type.dtype, k),
                            (max(g.nodes[i].type.size, 0),))
                      for k, i in enumerate(s.constants))
    inputs = tuple(Array(Arena("input", g.nodes[i].type.dtype, k),
                         tuple(int(d) for d in g.nodes[i].type.shape))
                   for k, i in enumerate(s.sources.inputs))
    scratch = tuple(Array(Arena("scratch", d), (n,), True)
                    for d, n in scratch_sizes(g, s.kernels, s.arena).items())
    outputs = tuple(Array(Arena("output", d), (int(s.out_arena[d]),), True)
                    for d in sorted(s.out_arena))
    roots = tuple(Root(d, int(offset), tuple(shape)) for d, offset, shape in s.roots)
    updates: tuple[Array, ...] = ()
    states: tuple[Array, ...] = ()
    if step is not None:
        updates = tuple(Array(Arena("update", a.dtype), a.shape, True) for a in parameters)
        states = tuple(Array(Arena("state", a.dtype, j), a.shape, True)
                       for j in range(len(step.rule.state_keys)) for a in parameters)
    return Program(g, tuple(s.kernels), parameters, constants, inputs, scratch, outputs,
                   roots, {d: int(n) for d, n in s.arena.items()},
                   tuple((i, d, int(o)) for i, (d, o) in s.sources.parameters.items()),
                   tuple(s.sources.inputs), tuple(s.constants), updates, states, step)


def ir_key(program: Program) -> str:
    """The lowered IR as hashed: text form, parameter offsets, input order, the
    contents of the scalars baked into the code (array constants are arguments), and
    the kernels found by pattern (a schedule decision the graph does not show)."""
    p = program
    lines = [ir.describe(p.graph)]
    lines += [f"{k.kind} {list(k.nodes)}" for k in p.kernels if k.kind in ("layer_norm", "softmax")]
    lines.append("parameters " + json.dumps(sorted(p.parameter_nodes)))
    lines.append("parameter_dtypes " + json.dumps([a.dtype for a in p.parameters]))
    lines.append("inputs " + json.dumps(list(p.input_nodes)))
    for i, node in enumerate(p.graph.nodes):
        if node.op == "leaf" and node.type.size == 1:
            assert node.value is not None  # a leaf always carries its value
            lines.append(f"scalar %{i} {node.value.reshape(-1)[0].item()!r}")
    return "\n".join(lines)


__all__ = ["ir_key", "Program", "Array", "Argument", "EntryPoint", "Root", "Status", "Refused",
           "check_inputs", "build"]

"""Plans: a lowered entry and its three call paths.

``network.entry(roots)`` is an ``Entry`` (``network.py``, re-exported here);
``entry.lower(backend)`` (``lowering.py``) optimizes the graph (``passes.optimize``),
schedules it (``schedule.build``) and builds a ``Plan``, which hands the schedule's
``Program`` to a ``Backend`` (``backends.get``):

- ``"llvm"`` (default): the schedule rendered to LLVM IR with llvmlite and kept as
  native code in the on-disk plan cache (``backends/llvm``), so a second process that
  lowers the same network loads machine code instead of compiling;
- ``"numba"``: generated loops compiled by Numba (``backends/numba/backend.py``);
- ``"reference"``: the NumPy interpreter running the same optimized graph.

``compile_stats()`` and ``cache_dir()`` (re-exported from the cache) count compilations
and cache loads in this process and name the cache directory.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import FeedError, RandomError, TensorCodeError
from ..backends import BACKENDS, Compiled
from ..backends import get as get_backend
from ..backends.counters import cache_dir, compile_stats
from ..core import registry as primitives
from ..lower.program import Program, Refused, Status
from ..lower.program import build as build_program
from ..lower.schedule import Schedule
from ..trace.expr import Expr
from .network import Entry, Network
from .saved import load_plan, save_plan
from .tables import Gradients, Parameters, feed_dict, gradients_table

if TYPE_CHECKING:  # pragma: no cover
    from ..trace.tape import Adjoints


# ---------------------------------------------------------------------------------------
# plans


class Plan:
    """A lowered, forward-only program with three call paths: ``forward(parameters,
    feeds) -> PlanRun`` (validated feeds by symbol), ``forward_batch`` (N cases in one
    compiled loop) and ``bind(parameters)`` (the low-overhead path every executor and
    operation uses; see ``BoundPlan`` and ``docs/compiler.md``)."""

    def __init__(self, entry: Entry, schedule: Schedule, backend: str,
                 origins: dict[int, int], approximate: bool = True, step: Any = None) -> None:
        self.entry = entry
        self.network = entry.network
        self.schedule = schedule
        self.backend = backend
        self.graph = schedule.graph
        self._origins = origins
        self._layout = self.network.layout
        g = self.graph
        # root positions: network node id -> list of root positions
        self.roots = entry.roots
        self._positions: dict[int, int] = {}
        for k, r in enumerate(self.roots):
            self._positions.setdefault(r, k)
        self._out_dtypes = sorted(schedule.out_arena)
        self._root_slices = []
        for dtype, offset, shape in schedule.roots:
            size = int(np.prod(shape, dtype=np.int64))
            self._root_slices.append((self._out_dtypes.index(dtype), offset, offset + size,
                                      tuple(shape)))
        self._inputs = [origins[i] for i in schedule.sources.inputs]  # network input ids
        self._defaults: list[np.ndarray] = []
        for i in schedule.sources.inputs:
            default = g.nodes[i].value
            assert default is not None  # every input node records its default feed
            self._defaults.append(default)
        self._input_types = {origins[i]: (g.nodes[i].type.shape, np.dtype(g.nodes[i].type.dtype))
                             for i in schedule.sources.inputs}
        self._batch_defaults = [d[None] for d in self._defaults]
        self._feed_slots = {i: (k, *self._input_types[i]) for k, i in enumerate(self._inputs)}
        self._consts = [np.ascontiguousarray(g.nodes[i].value).reshape(-1)
                        for i in schedule.constants]
        self._param_dtypes = schedule.sources.parameter_dtypes
        self._random_position, self.random_blocks = _random_facts(self)
        self._gradient_views: dict[int, Any] = {}
        implementation = get_backend(backend)
        self.approximate = approximate and implementation.approximates
        # a step plan's program holds its fused update too (step.py)
        self.program: Program = build_program(schedule, step)
        self._compiled: Compiled = implementation.prepare(self.program, self.approximate)
        self.key = self._compiled.key
        self._run = self._compiled.run
        #: what the backend's entry points raise when they refuse a call
        self._refused = self._compiled.refused

    # -- introspection ---------------------------------------------------------------
    @property
    def origins(self) -> dict[int, int]:
        """For each parameter and input node of the lowered graph, the network node it
        came from (what a saved plan records so it can run on the original network)."""
        return dict(self._origins)

    def describe(self) -> str:
        """The lowered program: kernels, buffers and bytes."""
        head = f"plan ({self.backend}){' ' + self.key if self.key else ''}: " \
               f"{len(self.graph)} nodes from {len(self.network.graph)}"
        return head + "\n" + self.schedule.describe()

    def source(self) -> str:
        """The generated module's source (a backend that generates code)."""
        return self._compiled.source

    def _program(self) -> Compiled:
        """The backend's entry points for this plan."""
        return self._compiled

    def inputs(self) -> list[Any]:
        """The input symbols this plan reads, in the order ``call`` and ``bind`` take."""
        return [self.network.symbol(i) for i in self._inputs]

    def reads(self, symbol: Any) -> bool:
        """Whether this plan reads input ``symbol`` (a feed for one it does not read is
        refused by ``forward``: callers holding feeds for every input keep these)."""
        return self.network.owns(symbol) and symbol.index in self._input_types

    def parameters(self) -> Parameters:
        """A fresh table of the network's recorded initials."""
        return self.network.parameters()

    # -- running ---------------------------------------------------------------------
    def _check_parameters(self, parameters: Any) -> None:
        if getattr(parameters, "layout", None) is not self._layout:
            self.network.check_parameters(parameters)

    def buffers(self, parameters: Parameters) -> list[np.ndarray]:
        """The parameter and constant buffers a call passes before its inputs, in the
        compiled code's argument order (what an exported library embeds)."""
        self._check_parameters(parameters)
        return self._arguments(parameters)

    def _arguments(self, parameters: Parameters) -> list[np.ndarray]:
        buffers = parameters.buffers()
        return [buffers[d] for d in self._param_dtypes] + self._consts

    @property
    def takes_randomness(self) -> bool:
        """Whether the plan reads a ``tape.random_key()`` (then every call needs a
        generator, which it advances by ``random_blocks`` counter blocks)."""
        return self._random_position is not None

    def _with_key(self, args: list, feeds: Mapping[Any, Any] | None, generator: Any) -> list:
        """``args`` with the generator's key state in the random key's place (the
        caller advances the generator once the call succeeded)."""
        position = self._random_position
        if position is None:
            return args
        if generator is None:
            if feeds and any(getattr(s, "index", None) == self._inputs[position]
                             and self.network.owns(s) for s in feeds):
                return args  # the key was fed by hand
            raise RandomError("this plan draws random numbers (dropout, sampling or a "
                              "random_* op): call it with generator=tc.random.Generator(seed)"
                              ", or feed its tape.random_key() input")
        args = list(args)
        args[position] = generator.key_state()
        return args

    def forward(self, parameters: Parameters, feeds: Mapping[Any, Any] | None = None,
                generator: Any = None) -> PlanRun:
        """Run the plan: every root computed in one call. A plan that takes randomness
        (``takes_randomness``) reads ``generator``'s Philox state and advances it past
        the plan's draws; a plan that does not ignores ``generator``."""
        if getattr(parameters, "layout", None) is not self._layout:
            self.network.check_parameters(parameters)
        if feeds and type(feeds) is not dict:
            feeds = feed_dict(feeds)
        if feeds:
            args = self._ready_feeds(feeds)
            if args is None:
                checked = self.network.check_feeds(feeds)
                for index in checked:
                    if index not in self._input_types:
                        raise _unused_feed(self, index)
                args = [checked.get(i, d) for i, d in zip(self._inputs, self._defaults)]
        else:
            args = self._defaults
        args = self._with_key(args, feeds, generator)
        buffers = parameters.buffers()
        try:
            outs = self._run(*[buffers[d] for d in self._param_dtypes], *self._consts, *args)
        except self._refused as error:
            raise self._failure(error, args) from None
        if generator is not None and self._random_position is not None:
            generator.advance(self.random_blocks)
        return PlanRun(self, outs, None)

    def _ready_feeds(self, feeds: Mapping[Any, Any]) -> list[np.ndarray] | None:
        """The call's inputs, taken as they are (no copy, so threads hold the GIL briefly)
        when every feed is a C-contiguous ndarray of the exact dtype and shape of an input
        the plan reads; else ``None``, and ``check_feeds`` converts or refuses. The call
        keeps none of them, as a bound plan."""
        tape, slots, args = self.network.tape, self._feed_slots, list(self._defaults)
        for symbol, value in feeds.items():
            slot = slots.get(symbol.index) if isinstance(symbol, Expr) and \
                symbol.builder is tape and type(value) is np.ndarray else None
            if slot is None or value.dtype != slot[2] or value.shape != slot[1] or \
                    not value.flags.c_contiguous:
                return None
            args[slot[0]] = value
        return args

    def forward_batch(self, parameters: Parameters, feeds: Mapping[Any, Any],
                      generator: Any = None) -> PlanRun:
        """Run the plan over N cases: every fed input carries a leading axis of N cases
        (the same N for all); unfed inputs take their default in every case. ``of``
        returns arrays with a leading axis of N. The loop over cases is compiled. A plan
        that takes randomness draws case c as the c-th of N consecutive ``forward``
        calls with ``generator`` would, and advances it past all N."""
        self._check_parameters(parameters)
        fed: dict[int, np.ndarray] = {}
        n = None
        expected = self._input_types
        for symbol, value in feed_dict(feeds).items():
            if not self.network.owns(symbol):
                self.network.check_feeds({symbol: value})  # raises the precise FeedError
            index = symbol.index
            if index not in expected:
                node = self.network.graph.nodes[index]
                if node.op != "input":
                    raise FeedError(f"feed for {symbol!r}: it is a {node.op}, not an input")
                raise _unused_feed(self, index)
            shape, dtype = expected[index]
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
            if array.ndim == 0 or array.shape[1:] != shape:
                raise FeedError(f"batched input {symbol!r}: expected [N, "
                                f"{', '.join(map(str, shape))}], got {list(array.shape)}")
            if array.dtype.name == dtype.name and not array.dtype.isnative:
                array = array.astype(dtype)  # once, to native byte order
            if array.dtype != dtype:
                if isinstance(value, np.ndarray):
                    raise FeedError(f"batched input {symbol!r}: expected {dtype.name}, got "
                                    f"{array.dtype.name}")
                array = array.astype(dtype)
            if n is None:
                n = array.shape[0]
            elif array.shape[0] != n:
                raise FeedError(f"batched inputs disagree on N: {n} and {array.shape[0]}")
            fed[index] = array if array.flags.c_contiguous else np.ascontiguousarray(array)
        n = 1 if n is None else n
        position = self._random_position
        if position is not None and self._inputs[position] not in fed:
            if generator is None:
                self._with_key([], None, None)  # raises RandomError naming the fix
            fed[self._inputs[position]] = generator.key_states(n, self.random_blocks)
            generator = (generator, n)
        else:
            generator = None
        if n == 0:
            outs = tuple(np.empty((0, a.size), a.dtype) for a in self.program.outputs)
        else:
            args = [fed.get(i, d) for i, d in zip(self._inputs, self._batch_defaults)]
            try:
                outs = self._program().batch()(*self._arguments(parameters), *args)
            except self._refused as error:
                raise self._failure(error, args, 0, CASE_AXIS) from None
        if generator is not None:
            generator[0].advance(generator[1] * self.random_blocks)
        return PlanRun(self, outs, n)

    def _failure(self, error: BaseException, inputs: Sequence[Any], leading: int | None = None,
                 axis: str = "") -> BaseException:
        """The documented error of a call the backend refused with ``error``: from the
        ``Status`` and argument index its ``refusal`` gives (``call_error``); ``error``
        itself when it is no refusal."""
        refused = self._compiled.refusal(error, inputs, leading)
        return error if refused is None else call_error(self, refused, inputs, axis)

    def bind(self, parameters: Parameters) -> BoundPlan:
        """A callable ``f(*inputs) -> tuple of roots`` with the table's buffers bound:
        no per-call validation of the table, one compiled call, views for results. The
        bound plan also offers the two lowest-overhead forms of the same call,
        ``bound.flat`` and ``bound.scalars`` (see ``BoundPlan``)."""
        self._check_parameters(parameters)
        return BoundPlan(self, parameters)

    def _outputs(self, parameters: Parameters, inputs: Sequence[np.ndarray]) -> tuple:
        """The output arenas of one call over checked ``inputs`` (a step plan on a
        backend that fuses no update runs this, then the optimizer's own update)."""
        return tuple(self._run(*self._arguments(parameters), *inputs))

    # -- saving ----------------------------------------------------------------------
    def save(self, directory: Any) -> pathlib.Path:
        """Write this plan as a portable artifact (``plan.json`` and
        ``values.safetensors``; no pickle, no code)."""
        return save_plan(self, pathlib.Path(directory))

    def export(self, directory: Any, parameters: Parameters | None = None, *,
               name: str = "plan", force: bool = False) -> dict:
        """Export the plan with ``parameters`` (default: the recorded initials) as a
        shared library: ``lib<name>.so``, ``<name>.h`` and ``manifest.json`` in
        ``directory`` (refused when it is not empty, unless ``force``); the llvm
        backend's code, bit for bit. Returns the manifest (see ``docs/embedding.md``)."""
        from ...aot.export import export_plan

        table = self.parameters() if parameters is None else parameters
        return export_plan(self, pathlib.Path(directory), table, name, force)

    @staticmethod
    def load(directory: Any, network: Network | None = None, backend: str | None = None,
             *, max_graph_bytes: int | None = None) -> Plan:
        """Rebuild a saved plan (validated; hits the plan cache when warm). With
        ``network`` the plan runs on that network's tables; without, on a network
        rebuilt from the artifact (``plan.network``). ``backend`` defaults to the one
        the plan was saved with. The graph's values, every node counted at once, may
        need at most ``max_graph_bytes``; by default ``GRAPH_MULTIPLE`` (256) times the
        bytes of the file's parameters, inputs and constants, and at least
        ``GRAPH_FLOOR_BYTES`` (64 MiB), so a small file cannot ask for gigabytes."""
        return load_plan(pathlib.Path(directory), network, backend, max_graph_bytes)


# ---------------------------------------------------------------------------------------
# bound plans


class BoundPlan:
    """``plan.bind(parameters)``: call with the inputs in ``plan.inputs()`` order.

    Inputs are C-contiguous arrays of their exact dtypes. Three forms of one call:

    - ``bound(*inputs)``: the roots as a tuple of views of that call's output buffers;
    - ``bound.flat``: ``(fn, roots)`` where ``fn(*inputs)`` returns the flat output
      buffers (one per dtype) and ``roots[k] = (buffer, start, stop, shape)`` says where
      root k lies in them: no view is built per root;
    - ``bound.scalars``: for a plan whose roots are all scalars, ``fn(*inputs)`` returning
      the roots as a tuple of Python numbers (the compiled code hands back the numbers,
      no output buffer is boxed); ``None`` when some root is not a scalar.

    Every call allocates its own output buffers, so results never alias between calls.
    """

    __slots__ = ("_fn", "_scalars", "_slices", "parameters", "plan")

    def __init__(self, plan: Plan, parameters: Parameters) -> None:

        self.plan = plan
        self.parameters = parameters
        self._slices = plan._root_slices
        self._scalars: Any = None
        self._fn: Callable[..., Any] = plan._program().bind(*plan._arguments(parameters))

    def __call__(self, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
        try:
            outs = self._fn(*inputs)
        except self.plan._refused as error:
            raise self.plan._failure(error, inputs) from None
        return tuple(outs[k][a:b].reshape(shape) for k, a, b, shape in self._slices)

    @property
    def refused(self) -> tuple[type[BaseException], ...]:
        """What ``flat``'s and ``scalars``' raw calls raise when the backend refuses a
        call (``backends.Compiled.refused``); ``bound(...)`` raises a ``FeedError``."""
        return self.plan._refused

    @property
    def flat(self) -> tuple[Any, list[tuple[int, int, int, tuple]]]:
        """``(fn, roots)``: the compiled call returning flat output buffers, and where
        each root lies in them."""
        return self._fn, list(self._slices)

    @property
    def scalars(self) -> Any:
        """``fn(*inputs) -> tuple of Python numbers`` when every root is a scalar, else
        ``None``; compiled on first use."""
        if any(shape for _, _, _, shape in self._slices):
            return None
        if self._scalars is None:
            plan = self.plan
            self._scalars = plan._program().bind_scalars(*plan._arguments(self.parameters))
        return self._scalars


#: the words ``call_error`` adds to a shape refused past a leading axis
CASE_AXIS = " after the case axis"
STEP_AXIS = "step"


def call_error(plan: Plan, refused: Refused, inputs: Sequence[Any], axis: str = ""
               ) -> TensorCodeError:
    """The documented error of a refused call, from its ``Status`` and argument index
    alone (``lower.program.Refused``; the same for every backend): a ``FeedError`` that
    names the input (generated code names inputs by position only; the name is put
    back here, as data), or for a fixed buffer a ``TensorCodeError``. ``axis`` says how
    a refused shape is described: ``""`` (one call), ``CASE_AXIS`` or ``STEP_AXIS``."""
    status, k = refused.status, refused.index
    if status is Status.RANGE:
        return FeedError(refused.detail)
    if status is Status.ARITY:
        return FeedError(f"the plan takes {len(plan._inputs)} inputs (plan.inputs() order), "
                         f"got {k}")
    if status is Status.BUFFER or not 0 <= k < len(plan._inputs):
        return TensorCodeError(f"the compiled plan refused its fixed buffer #{k} (status "
                               f"{status.name}): a parameter, constant or optimizer buffer "
                               "changed dtype, size or layout; bind the plan again")
    shape, dtype = plan._input_types[plan._inputs[k]]
    label = _input_label(plan, k)
    if status is Status.SHAPE:
        value = inputs[k]
        got = f", got {list(value.shape)}" if isinstance(value, np.ndarray) else ""
        if axis == STEP_AXIS:
            return FeedError(f"input {label}: expected shape [K or 1, "
                             f"{', '.join(map(str, shape))}] for K steps{got}")
        return FeedError(f"input {label}: expected shape {list(shape)}{axis}{got}")
    return _input_problem(plan, k, inputs[k], shape, dtype)


def _unused_feed(plan: Plan, index: int) -> FeedError:
    """A feed for network input ``index``, which the plan does not read: refused, since
    the caller expects it to change the result and it cannot."""
    name = plan.network.graph.nodes[index].name
    label = f'"{name}"' if name else f"%{index}"
    return FeedError(f"feed for input {label}: this plan does not read it (its roots do not "
                     "depend on it); drop the feed, or lower an entry whose roots use it")


def _input_label(plan: Plan, k: int) -> str:
    """Input ``k`` of the plan as messages name it: ``"name"`` or ``%id``."""
    index = plan._inputs[k]
    name = plan.network.graph.nodes[index].name
    return f'"{name}"' if name else f"%{index}"


def _input_problem(plan: Plan, k: int, value: Any, shape: tuple, dtype: np.dtype
                   ) -> FeedError:
    """Input ``k`` refused as ``Status.INPUT``: what about ``value`` no compiled
    signature takes (its kind, dtype, byte order or layout), and how to convert it."""
    label = _input_label(plan, k)
    want = f"a C-contiguous {dtype.name} array of shape {list(shape)}"
    convert = f"convert with np.ascontiguousarray(value, dtype={dtype.name!r})"
    if not isinstance(value, np.ndarray):
        return FeedError(f"input {label}: expected {want}, got {type(value).__name__}; "
                         f"{convert}")
    if value.dtype.name != dtype.name:
        problem = f"dtype {value.dtype.name}"
    elif not value.dtype.isnative:
        problem = f"non-native byte order ({value.dtype.str})"
    else:
        problem = "a non-contiguous array"
    return FeedError(f"input {label}: expected {want}, got {problem}; {convert}")


class PlanRun:
    """The roots of one ``plan.forward`` (or ``forward_batch``): read with ``of``."""

    __slots__ = ("_outs", "batch", "plan")

    def __init__(self, plan: Plan, outs: tuple, batch: int | None) -> None:
        self.plan = plan
        self._outs = outs
        self.batch = batch

    def _position(self, symbol: Any) -> int:
        plan = self.plan
        index = plan.network.node_of(symbol)
        position = plan._positions.get(index)
        if position is None:
            raise TensorCodeError(
                f"{symbol!r} is not a root of this plan; lower an entry whose roots include "
                f"it (this plan's roots are {', '.join('%' + str(r) for r in plan.roots)})")
        return position

    def of(self, symbol: Any) -> np.ndarray:
        """The value of root ``symbol`` (with a leading case axis for a batch run)."""
        k, a, b, shape = self.plan._root_slices[self._position(symbol)]
        if self.batch is None:
            return self._outs[k][a:b].reshape(shape)
        return self._outs[k][:, a:b].reshape((self.batch,) + shape)

    def recorded_gradients(self, adjoints: Adjoints) -> Gradients:
        """The gradients ``adjoints`` recorded, as a table aligned with the parameters;
        a view of the plan's output buffer when the gradient roots follow the table's
        layout (as ``adjoints.roots()`` does for every parameter), a copy otherwise."""
        if self.batch is not None:
            raise TensorCodeError("recorded_gradients reads one case; a batch run has "
                                  f"{self.batch}: read run.of(gradient) per case instead")
        plan = self.plan
        views = plan._gradient_views.get(id(adjoints))
        if views is None or views[0] is not adjoints:
            views = (adjoints, _gradient_view_plan(plan, adjoints))
            plan._gradient_views[id(adjoints)] = views
        layout_view = views[1]
        if layout_view is not None:
            outs = self._outs
            buffers = {d: outs[k][a:b] for d, k, a, b in layout_view}
            table = Gradients.adopt(plan._layout, buffers)
            if not all(adjoints.reached):
                reached = [True] * len(plan._layout.slots)
                for p, r in zip(adjoints.wrt, adjoints.reached):
                    reached[plan._layout.index(p)] = r
                table.mark_reached(reached)
            return table
        return gradients_table(plan._layout, adjoints, self.of)


def _random_facts(plan: Plan) -> tuple[int | None, int]:
    """Where the plan reads its random key (position among its inputs, or None when it
    draws nothing) and how many counter blocks a call uses: every draw its network
    records on that key, so each entry of one network moves the stream alike."""
    g = plan.graph
    keys = {plan._origins[g.nodes[i].inputs[0]] for i in range(len(g.nodes))
            if primitives.is_random(g.nodes[i].op) and g.nodes[i].inputs[0] in plan._origins}
    if not keys:
        return None, 0
    if len(keys) > 1:
        raise RandomError("a plan reads one random key; this one draws from "
                          f"{len(keys)} inputs: record every draw with tape.random_key()")
    (key,) = keys
    nodes = plan.network.graph.nodes
    blocks = max(node.attr("offset") + primitives.random_blocks(node.op, node.type)
                 for node in nodes if primitives.is_random(node.op) and node.inputs[0] == key)
    return plan._inputs.index(key), int(blocks)


def _gradient_view_plan(plan: Plan, adjoints: Adjoints) -> list | None:
    """Where each dtype's gradients sit in the output arenas when they are laid out
    exactly like the parameter table (every slot, in order, contiguous); else None."""
    layout = plan._layout
    network = plan.network
    by_slot: dict[int, int] = {}
    try:
        for p, g in adjoints:
            by_slot[layout.index(p)] = plan._positions[network.node_of(g)]
    except (TensorCodeError, KeyError, TypeError):
        return None
    if len(by_slot) != len(layout.slots):
        return None
    result: dict[str, tuple[int, int, int]] = {}
    for k, slot in enumerate(layout.slots):
        # the first root position holding this gradient must sit at base + offset
        out_k, a, b, _shape = plan._root_slices[by_slot[k]]
        if plan._out_dtypes[out_k] != slot.dtype or b - a != slot.size:
            return None
        base = a - slot.offset
        if slot.dtype in result:
            if result[slot.dtype][1] != base:
                return None
        else:
            result[slot.dtype] = (out_k, base, base + layout.sizes[slot.dtype])
    return [(d, k, a, b) for d, (k, a, b) in result.items()]


__all__ = ["Entry", "Plan", "PlanRun", "BoundPlan", "compile_stats", "cache_dir",
           "BACKENDS"]

"""The sealed spec (``Network``), one evaluation of it (``Run``), the eager backward and
the sub-programs a plan is lowered from (``Entry``).

A ``Network`` is structure, shapes, recorded initials and input defaults: it holds no
live weights. Every run takes a caller-owned ``Parameters`` table and feeds, so training
never versions the graph. The sealed spec belongs to the compiler (a plan is lowered from
it and reads tables in its layout); the runtime and the products build on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import FeedError, RandomError, TensorCodeError
from ..backends import DEFAULT_BACKEND, interpreter
from ..core import ir
from ..core import registry as primitives
from ..core.ir import Graph, Node
from ..core.verify import verify
from ..lower.passes import canonical_order, dce, optimize
from ..lower.schedule import Sources
from ..trace.autodiff import gradients as record_gradients
from ..trace.expr import Expr
from ..trace.tape import Eager, Recorder, check_reached
from .tables import Gradients, Layout, Parameters, check_feed_type, feed_dict, gradients_table

if TYPE_CHECKING:  # pragma: no cover
    from ..trace.tape import Adjoints


class Network:
    """An immutable recorded program: ``describe``, ``parameters``, ``forward``, ``entry``."""

    def __init__(self, tape: Recorder) -> None:
        """Seal what ``tape`` recorded (``Tape.into_network()`` is the usual spelling).
        The graph is verified once here; the tape records nothing more afterwards."""
        self.tape = tape
        nodes = tape.nodes()
        self.graph = ir.Graph(nodes)
        verify(self.graph)
        self._parameter_ids = tuple(self.graph.ids("parameter"))
        self._input_ids = frozenset(self.graph.ids("input"))
        self.layout = Layout(tape, [(i, nodes[i].name, nodes[i].type.shape, nodes[i].type.dtype)
                                    for i in self._parameter_ids])

    # -- introspection ----------------------------------------------------------------------
    def describe(self) -> str:
        """The graph's stable textual form."""
        return ir.describe(self.graph)

    def symbol(self, index: int) -> Expr:
        """The ``Expr`` recorded as node ``index``."""
        return self.tape.symbol(index)

    def inputs(self) -> list[Expr]:
        return [self.symbol(i) for i in sorted(self._input_ids)]

    def parameter_symbols(self) -> list[Expr]:
        return [self.symbol(i) for i in self._parameter_ids]

    def owns(self, symbol: Any) -> bool:
        """Whether ``symbol`` is an ``Expr`` recorded on this network's tape."""
        return isinstance(symbol, Expr) and symbol.builder is self.tape

    def input_ids(self) -> frozenset[int]:
        """The node ids of the network's inputs."""
        return self._input_ids

    def node_of(self, symbol: Any) -> int:
        if not isinstance(symbol, Expr):
            raise TypeError(f"expected an Expr symbol of this network, got {symbol!r}")
        if symbol.builder is not self.tape:
            raise TensorCodeError(f"{symbol!r} was recorded on another tape than this network")
        return symbol.index

    def __len__(self) -> int:
        return len(self.graph)

    # -- state ------------------------------------------------------------------------------
    def parameters(self) -> Parameters:
        """A fresh table holding copies of the recorded initials."""
        return Parameters.from_payloads(
            self.layout, [self.graph.nodes[i].value for i in self._parameter_ids])

    def check_parameters(self, parameters: Parameters) -> None:
        if not isinstance(parameters, Parameters):
            raise TypeError(f"expected a Parameters table, got {type(parameters).__name__}")
        if parameters.layout is not self.layout:
            raise TensorCodeError("this Parameters table belongs to another network; make one "
                                  "with network.parameters()")

    def check_feeds(self, feeds: Mapping[Any, Any] | None) -> dict[int, np.ndarray]:
        """Validate feeds: each key an input symbol of this network, each value of the
        input's exact shape and dtype (``FeedError`` names the input otherwise)."""
        checked: dict[int, np.ndarray] = {}
        for symbol, value in feed_dict(feeds).items():
            if not isinstance(symbol, Expr):
                raise FeedError(f"feed keys must be input symbols (Expr), got {symbol!r}")
            if symbol.builder is not self.tape:
                raise FeedError(f"feed for {symbol!r}: that symbol belongs to another network")
            node = self.graph.nodes[symbol.index]
            if node.op != "input":
                raise FeedError(f"feed for {symbol!r}: it is a {node.op}, not an input; only "
                                "tape.input(...) symbols can be fed")
            name = f'"{node.name}"' if node.name else f"%{symbol.index}"
            checked[symbol.index] = check_feed_type(name, node.type.shape, node.type.dtype, value)
        return checked

    # -- running ----------------------------------------------------------------------------
    def forward(self, parameters: Parameters, feeds: Mapping[Any, Any] | None = None,
                generator: Any = None) -> Run:
        """Evaluate with the reference interpreter (lazily: only what is read). A
        network with a ``tape.random_key()`` draws from ``generator`` (advanced past
        every draw recorded on that key) unless its key is fed."""
        self.check_parameters(parameters)
        checked = self.check_feeds(feeds)
        key = self.tape.drawn_key
        if key is not None and key.index not in checked:
            if generator is None:
                raise RandomError("this network draws random numbers (dropout, sampling or "
                                  "a random_* op): call forward(..., generator="
                                  "tc.random.Generator(seed)), or feed its tape.random_key()")
            checked[key.index] = generator.key_state()
            generator.advance(max(
                node.attr("offset") + primitives.random_blocks(node.op, node.type)
                for node in self.graph.nodes
                if primitives.is_random(node.op) and node.inputs[0] == key.index))
        return Run(self, parameters, checked)

    def entry(self, roots: Iterable[Any]) -> Entry:
        """The sub-program computing ``roots``, ready to ``lower()`` into a plan."""
        return Entry(self, [self.node_of(r) for r in roots])


class Run:
    """One evaluation: read values with ``of``, differentiate with ``backward``."""

    def __init__(self, network: Network, parameters: Parameters,
                 feeds: dict[int, np.ndarray]) -> None:
        self.network = network
        self.parameters = parameters
        values: dict[int, np.ndarray] = {}
        for slot, payload in zip(network.layout.slots, parameters.payloads()):
            values[slot.node] = payload
        for i in network.input_ids():
            default = network.graph.nodes[i].value
            assert default is not None  # every input node records its default feed
            values[i] = feeds.get(i, default)
        self._values = values

    def value(self, index: int) -> np.ndarray:
        if index not in self._values:
            interpreter().evaluate(self.network.graph, self._values, [index])
        return self._values[index]

    def of(self, symbol: Any) -> np.ndarray:
        """The value of ``symbol`` in this run (read-only)."""
        return self.value(self.network.node_of(symbol))

    def backward(self, loss: Any, *, allow_disconnected: bool = False) -> Backward:
        """Reverse mode from the scalar ``loss``, evaluated eagerly with the same VJP
        rules ``tape.differentiate`` records, and refused as it refuses: asking for the
        gradients of symbols none of which reaches the loss through differentiable ops
        (a loss behind ``detach``, a disconnected or nondifferentiable one) is a
        ``TrainingError`` rather than a table of zeros, unless ``allow_disconnected``."""
        return Backward(self, self.network.node_of(loss), repr(loss), allow_disconnected)

    def recorded_gradients(self, adjoints: Adjoints) -> Gradients:
        """The gradients an ``Adjoints`` recorded, read from this run as a table."""
        return gradients_table(self.network.layout, adjoints, self.of)


class Backward:
    """The runtime twin of ``differentiate``: project gradients onto a table."""

    def __init__(self, run: Run, loss: int, shown: str = "",
                 allow_disconnected: bool = False) -> None:
        self._run = run
        self._loss = loss
        self._shown = shown or f"%{loss}"
        self._allow_disconnected = allow_disconnected
        self._cache: dict[tuple[int, ...], list[np.ndarray]] = {}

    def _grads(self, wrt: Sequence[int]) -> list[np.ndarray]:
        key = tuple(wrt)
        if key not in self._cache:
            run = self._run
            if wrt and not self._allow_disconnected:
                check_reached(run.network.graph.nodes, self._loss, set(wrt), self._shown,
                              "run.backward")
            run.value(self._loss)
            eager = Eager()
            wrapped: dict[int, Expr] = {}

            def expr_of(i: int) -> Expr:
                if i not in wrapped:
                    wrapped[i] = eager.wrap(run.value(i))
                return wrapped[i]

            grads = record_gradients(run.network.graph.nodes, self._loss, list(wrt), eager, expr_of)
            self._cache[key] = [g.value for g in grads]
        return self._cache[key]

    def parameters(self, parameters: Parameters) -> Gradients:
        """Gradients of the loss for every slot of ``parameters`` (zeros where the loss
        does not reach)."""
        network = self._run.network
        network.check_parameters(parameters)
        slots = network.layout.slots
        grads = self._grads([s.node for s in slots])
        return Gradients.from_payloads(network.layout, grads)

    def of(self, symbol: Any) -> np.ndarray:
        """The gradient of the loss with respect to one parameter or input."""
        index = self._run.network.node_of(symbol)
        return self._grads([index])[0]


# ---------------------------------------------------------------------------------------
# entries


class Entry:
    """The sub-program of a network computing ``roots`` (node ids), ready to lower."""

    def __init__(self, network: Network, roots: Sequence[int]) -> None:
        roots = [int(r) for r in roots]
        if not roots:
            raise TensorCodeError("an entry needs at least one root")
        for r in roots:
            if not 0 <= r < len(network.graph.nodes):
                raise TensorCodeError(f"root %{r} is not a node of this network")
        self.network = network
        self.roots = tuple(roots)

    def graph(self) -> Graph:
        """The network's graph with this entry's roots as outputs (before any pass),
        each parameter and input carrying its network node id as its ``origin``."""
        nodes = tuple(replace(node, origin=i) if node.op in ("parameter", "input") else node
                      for i, node in enumerate(self.network.graph.nodes))
        return Graph(nodes, self.roots)

    def origins(self) -> dict[int, int]:
        """For the graph ``optimized()`` returned last, the network node each parameter
        and input node came from."""
        return dict(self._origins)

    def describe(self) -> str:
        """The entry's program before lowering: what the roots depend on."""
        return ir.describe(dce(self.graph()))

    def optimized(self) -> tuple[Graph, Sources]:
        """The optimized graph in canonical order, and where its sources come from."""
        network = self.network
        slots = {s.node: (k, s) for k, s in enumerate(network.layout.slots)}
        graph = optimize(self.graph())

        def origin(node: Node) -> int:
            assert node.origin is not None  # ``graph()`` gave every source its origin
            return node.origin

        def rank(i: int, node: Node) -> tuple:
            if node.op == "parameter":
                return (slots[origin(node)][0],)
            if node.op == "input":
                return (origin(node),)
            return (i,)
        graph = canonical_order(graph, rank)
        parameters, inputs, origins = {}, [], {}
        for i, node in enumerate(graph.nodes):
            if node.op == "parameter":
                slot = slots[origin(node)][1]
                parameters[i] = (slot.dtype, slot.offset)
                origins[i] = slot.node
            elif node.op == "input":
                inputs.append(i)
                origins[i] = origin(node)
        sources = Sources(parameters, inputs, sorted(network.layout.sizes))
        self._origins = origins
        return graph, sources

    def lower(self, backend: str = DEFAULT_BACKEND, approximate: bool | None = None,
              optimizer: Any = None) -> Any:
        """``tensorcode.compiler.plans.lower(self, backend, approximate, optimizer)``:
        a ``Plan`` for ``backend``, or a ``StepPlan`` with ``optimizer`` (see there).
        ``approximate`` (default: on unless the environment sets
        ``TENSORCODE_EXACT_MATH=1``) lets the compiled backends evaluate float32 ``tanh``,
        ``exp`` and ``sigmoid`` as vectorizable approximations within the ulp bounds of
        ``lower/approximations.py``; float64 and the reference backend are always exact."""
        # a network sits below the plans lowered from it (``Plan.load`` rebuilds one), so
        # this thin call is the one import against the plans' order, made when called
        from .lowering import lower

        return lower(self, backend, approximate, optimizer)

"""The build contract every worker follows, and the arithmetic on flat gradient buffers.

A worker never receives a network: it calls the same ``build`` callable the driver was
given and records the network itself, so the only things that cross the network are the
callable (by reference or by value, as Ray pickles functions), feeds and the tables'
flat per-dtype buffers. Both sides then check that they recorded the same parameter
layout, so a ``build`` that records something different on another machine (another
library version, a random shape) is refused instead of silently mixing tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compiler.backends import DEFAULT_BACKEND, check_backend
from ..compiler.plans.network import Network
from ..compiler.plans.tables import Gradients, Layout, Parameters
from ..compiler.trace.expr import Expr
from ..compiler.trace.tape import Adjoints
from ..errors import FeedError, TensorCodeError

#: what ``build()`` returns: ``(network, adjoints)``, the loss being ``adjoints.loss``
Build = Callable[[], Any]
#: a table crossing the network: ``{dtype: flat buffer}``
Buffers = dict[str, np.ndarray]


@dataclass(frozen=True)
class Recording:
    """What one ``build()`` recorded: the sealed network, the recorded gradients of its
    scalar loss, and its named inputs (feeds are keyed by these names across machines,
    since ``Expr`` symbols belong to one process's tape)."""

    network: Network
    adjoints: Adjoints
    inputs: Mapping[str, Expr]

    @property
    def loss(self) -> Expr:
        return self.adjoints.loss

    def signature(self) -> tuple[tuple[str | None, tuple[int, ...], str], ...]:
        """The parameter layout as plain data (name, shape, dtype per slot), comparable
        across processes."""
        return layout_signature(self.network.layout)

    def feeds(self, named: Mapping[str, Any] | None) -> dict[Expr, Any]:
        """``{name: array}`` as the ``{symbol: array}`` feeds a plan takes."""
        feeds: dict[Expr, Any] = {}
        for name, value in (named or {}).items():
            symbol = self.inputs.get(name)
            if symbol is None:
                raise FeedError(f"no input named {name!r}; this network's named inputs are "
                                f"{sorted(self.inputs)}")
            feeds[symbol] = value
        return feeds

    def lower(self, backend: str = DEFAULT_BACKEND) -> Any:
        """The plan computing the loss and every gradient in one call."""
        return self.network.entry(self.adjoints.roots()).lower(check_backend(backend))


def record(build: Build) -> Recording:
    """Call ``build()`` and check what it returned: ``(network, adjoints)`` with the
    adjoints of a scalar loss recorded on the network's tape."""
    if not callable(build):
        raise TensorCodeError(f"build must be a callable that records the network, got "
                              f"{type(build).__name__}")
    made = build()
    if isinstance(made, Recording):
        return made
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], Network)
            and isinstance(made[1], Adjoints)):
        raise TensorCodeError("build() must return (network, adjoints): the sealed network "
                              "(tape.into_network()) and tape.differentiate(loss, ...)'s "
                              f"result; got {type(made).__name__}")
    network, adjoints = made
    if not network.owns(adjoints.loss):
        raise TensorCodeError("the adjoints were recorded on another tape than the network")
    if network.graph.nodes[adjoints.loss.index].type.shape != ():
        raise TensorCodeError("the loss must be a scalar (reduce it with .mean() or .sum())")
    inputs: dict[str, Expr] = {}
    for symbol in network.inputs():
        name = network.graph.nodes[symbol.index].name
        if name is not None:
            inputs[name] = symbol
    return Recording(network, adjoints, inputs)


def layout_signature(layout: Layout) -> tuple[tuple[str | None, tuple[int, ...], str], ...]:
    return tuple((slot.name, slot.shape, slot.dtype) for slot in layout.slots)


def check_signature(expected: Sequence[Any], got: Sequence[Any], who: str) -> None:
    """Refuse a worker whose ``build()`` recorded another parameter layout."""
    if tuple(map(tuple, expected)) != tuple(map(tuple, got)):
        raise TensorCodeError(f"{who} recorded another parameter layout than the driver "
                              f"({len(got)} slots vs {len(expected)}); build() must record "
                              "the same parameters everywhere")


def buffers_of(table: Parameters | Gradients) -> Buffers:
    """A table's flat buffers as a plain dict (what Ray ships)."""
    return dict(table.buffers())


def sum_gradients(layout: Layout, tables: Sequence[Mapping[str, np.ndarray]],
                  scale: float = 1.0) -> Gradients:
    """The sum of several workers' gradient buffers (added in the order given, so the
    result does not depend on which worker answered first), times ``scale``, as a
    ``Gradients`` table in ``layout``."""
    if not tables:
        raise TensorCodeError("sum_gradients needs at least one table of gradients")
    summed: Buffers = {}
    for dtype, size in layout.sizes.items():
        total = np.zeros(size, dtype=dtype)
        for k, buffers in enumerate(tables):
            buffer = buffers.get(dtype)
            if buffer is None or buffer.shape != (size,) or buffer.dtype != total.dtype:
                raise TensorCodeError(f"gradient table {k} has no flat [{size}] {dtype} buffer")
            total += buffer
        if scale != 1.0:
            total *= total.dtype.type(scale)
        summed[dtype] = total
    return Gradients.from_buffers(layout, summed)


def split_rows(named: Mapping[str, Any], parts: int, expected: Mapping[str, tuple[int, ...]]
               ) -> list[dict[str, np.ndarray]]:
    """``named`` feeds cut into ``parts`` equal shards along the first axis; each shard
    must have the row count the workers' network was recorded with (``expected``)."""
    shards: list[dict[str, np.ndarray]] = [{} for _ in range(parts)]
    for name, value in named.items():
        array = np.asarray(value)
        if name not in expected:
            raise FeedError(f"no input named {name!r}; the network's named inputs are "
                            f"{sorted(expected)}")
        shape = expected[name]
        if array.ndim == 0 or array.shape[0] != parts * shape[0]:
            raise FeedError(f"input {name!r}: each of the {parts} workers records "
                            f"{shape[0] if shape else 0} rows, so the batch needs "
                            f"{parts * shape[0] if shape else 0} rows; got "
                            f"{list(array.shape)}")
        for k, piece in enumerate(np.split(array, parts)):
            shards[k][name] = np.ascontiguousarray(piece)
    return shards


def input_shapes(recording: Recording) -> dict[str, tuple[int, ...]]:
    graph = recording.network.graph
    return {name: graph.nodes[symbol.index].type.shape
            for name, symbol in recording.inputs.items()}


class Lowered:
    """A recording with its plan lowered once: the worker side of a training step."""

    def __init__(self, recording: Recording, backend: str = DEFAULT_BACKEND) -> None:
        self.recording = recording
        self.plan = recording.lower(backend)

    def loss_and_gradients(self, parameters: Parameters, named: Mapping[str, Any] | None
                           ) -> tuple[float, Gradients]:
        run = self.plan.forward(parameters, self.recording.feeds(named))
        return (float(run.of(self.recording.loss)),
                run.recorded_gradients(self.recording.adjoints))

    def loss(self, parameters: Parameters, named: Mapping[str, Any] | None = None) -> float:
        run = self.plan.forward(parameters, self.recording.feeds(named))
        return float(run.of(self.recording.loss))

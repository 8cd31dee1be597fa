"""Layered training of a ``GptModel``: one compiled block forward and one compiled block
backward, run per layer over zero-copy views of the model's tables.

Compiling the whole model's loss and gradients as one program compiles every block's
forward and backward again, so its cost grows with depth (a 4-layer model is already
hundreds of kernels in one function). Here the cost is five small plans, whatever the
depth:

- ``embed``: token ids ``[B, T]`` to the first block's input;
- ``block``: one block's forward, ``x`` to ``y``, also returning the values its
  backward reads (the results of its matmuls and reductions; elementwise values are
  recomputed there instead of kept, see ``autodiff.record_backward``);
- ``block_backward``: given those values and the adjoint ``dy`` of the block's output,
  the gradients of that block's parameters and the adjoint ``dx`` of its input;
- ``head_loss``: the final hidden state and the targets to the loss, the gradients of
  the edge parameters (``wte`` through the tied head, ``ln_f``) and the adjoint of the
  hidden state;
- ``embed_backward``: the adjoint of the first block's input to the gradients of
  ``wte`` and ``wpe``.

Every gradient is IR recorded from the primitives' VJP rules, the upstream adjoint
entering as an input through the scalar ``sum(y * dy)``, whose gradient with respect
to anything ``y`` depends on is exactly the vector-Jacobian product with ``dy``: the
edges' with ``tape.differentiate`` on their own tape, the block's with
``autodiff.record_backward`` on a second tape that reads the forward's saved values as
inputs. Both block tapes record one block under the path ``h.0`` with the model's
parameter order, so layer ``k``'s run of the model's table (``Gpt`` records each
block's parameters contiguously) is their table, used as a view; each layer's
gradients land in the same run of one gradient table. The step over the whole table is
the optimizer's ``step``, as for any other model.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..compiler.plans.network import Network
from ..compiler.plans.plan import BoundPlan, Plan
from ..compiler.plans.tables import Gradients, Parameters
from ..compiler.plans.tape import Tape
from ..compiler.trace.backward import record_backward
from ..compiler.trace.expr import Expr
from ..errors import CompileError, FeedError
from ..nn import init as initializers
from ..nn.transformer import Gpt, GptConfig, TransformerBlock


class LayeredModel(Protocol):
    """What layered training reads of a model (``gpt2.GptModel`` is one; it builds on
    this module, so the step names the attributes it needs instead of the class)."""

    config: GptConfig
    dtype: str
    batch: int
    context: int
    backend: str
    network: Network

    @property
    def parameters(self) -> Parameters: ...

    def set_parameters(self, parameters: Parameters) -> None: ...

#: the plans a layered training step runs, whatever the depth
PLANS = ("embed", "block", "block_backward", "head_loss", "embed_backward")



def check_layered_layout(network: Any, edge_network: Any, block_network: Any, n_layer: int,
                         dtype: str, advice: str) -> None:
    """Refuse a model whose table is not the edge run (wte, wpe, ln_f) then one
    block-shaped run per layer, all of ``dtype``: the layered plans run on views of it,
    so each view must be exactly a small network's table. ``advice`` says what to use
    instead."""
    slots = network.layout.slots
    edge_slots = edge_network.layout.slots
    block_slots = block_network.layout.slots
    runs = [(slots[:len(edge_slots)], edge_slots)]
    start = len(edge_slots)
    for _ in range(n_layer):
        runs.append((slots[start:start + len(block_slots)], block_slots))
        start += len(block_slots)
    if start != len(slots) or set(network.layout.sizes) != {dtype} or any(
            [s.shape for s in run] != [s.shape for s in want] for run, want in runs):
        raise CompileError("the model's parameter table is not laid out as the edges "
                           f"then one run per block; {advice}")


class LayeredTraining:
    """The training step of a ``GptModel`` over per-layer plans (module docstring).

    ``gradients(ids, targets)`` returns the loss and a ``Gradients`` table in the
    model's layout; ``step(ids, targets, optimizer, lr)`` also applies the optimizer
    and gives the model its new parameters. ``ids`` and ``targets`` are int arrays of
    the model's ``[batch, context]``.
    """

    def __init__(self, model: LayeredModel) -> None:
        config = model.config
        dtype = model.dtype
        b, t, c = model.batch, model.context, config.n_embd
        # the edges (wte, wpe, ln_f): the prefix of the model's table
        edge_tape = Tape()
        edge = Gpt(edge_tape, config, init=initializers.zeros(), with_blocks=False,
                   dtype=dtype)
        self.ids = edge_tape.input(np.zeros((b, t), np.int64), name="ids")
        self.targets = edge_tape.input(np.zeros((b, t), np.int64), name="targets")
        self.hidden = edge_tape.input(np.zeros((b, t, c), dtype), name="x")
        self.embedded_adjoint = edge_tape.input(np.zeros((b, t, c), dtype), name="dx")
        self.embedded = edge.embed(self.ids)
        self.loss = edge.loss(edge.head(self.hidden), self.targets)
        edge_parameters = edge_tape.parameters()
        self.head_adjoints = edge_tape.differentiate(self.loss, edge_parameters,
                                                     inputs=[self.hidden])
        self.embed_adjoints = edge_tape.differentiate(
            (self.embedded * self.embedded_adjoint).sum(), edge_parameters)
        self.edge_network = edge_tape.into_network()
        # one block body: its forward (also returning what the backward reads) and its
        # backward, recorded on a tape of its own from the forward's VJP rules
        block_tape = Tape()
        block = TransformerBlock(block_tape, c, config.n_head, config.layer_norm_epsilon,
                                 init=initializers.zeros(), name="h.0", dtype=dtype)
        self.x = block_tape.input(np.zeros((b, t, c), dtype), name="x")
        self.y_adjoint = block_tape.input(np.zeros((b, t, c), dtype), name="dy")
        self.y = block(self.x)
        surrogate = (self.y * self.y_adjoint).sum()
        self.block_network = block_tape.into_network()
        backward_tape = Tape()
        TransformerBlock(backward_tape, c, config.n_head, config.layer_norm_epsilon,
                         init=initializers.zeros(), name="h.0", dtype=dtype)
        recorded = record_backward(block_tape, surrogate, [self.x], backward_tape)
        self.block_gradients, self.saved = recorded
        self.backward_network = backward_tape.into_network()
        fed = {self.x.index, self.y_adjoint.index, self.y.index}
        self.saved_roots = [block_tape.symbol(i) for i in self.saved if i not in fed]
        self.saved_stand = [self.saved[root.index] for root in self.saved_roots]
        self.model = model
        self.dtype = dtype
        self._check_layout()
        self._plans: dict[str, Plan] = {}
        self._bound: dict[str, list[BoundPlan]] = {}
        self._views_of: Parameters | None = None
        self.edge_parameters: Parameters
        self.layer_parameters: dict[Any, list[Parameters]] = {}

    def _check_layout(self) -> None:
        check_layered_layout(self.model.network, self.edge_network, self.block_network,
                             self.model.config.n_layer, self.dtype,
                             "train it with the one-tape plan "
                             "(GptModel(..., train=True).plan('train'))")

    # -- plans ------------------------------------------------------------------------
    def plan(self, name: str) -> Plan:
        """One of ``PLANS``, lowered once (or loaded from the plan cache)."""
        if name not in self._plans:
            edge, block = self.edge_network, self.block_network
            table = {
                "embed": (edge, [self.embedded]),
                "head_loss": (edge, [*self.head_adjoints.roots(),
                                     *self.head_adjoints.input_gradients]),
                "embed_backward": (edge, self.embed_adjoints.roots()[1:]),
                "block": (block, [self.y, *self.saved_roots]),
                "block_backward": (self.backward_network, self.block_gradients),
            }
            if name not in table:
                raise ValueError(f"unknown plan {name!r}; use one of {PLANS}")
            network, roots = table[name]
            self._plans[name] = network.entry(roots).lower(self.model.backend)
        return self._plans[name]

    def lower(self) -> None:
        """Lower (or load) every plan of the step."""
        for name in PLANS:
            self.plan(name)

    def _rebind(self, parameters: Parameters) -> None:
        """Views of ``parameters``: the edge table and one table per layer (no copy)."""
        if self._views_of is parameters:
            return
        buffer = parameters.buffers()[self.dtype]
        edge_size = self.edge_network.layout.sizes[self.dtype]
        block_size = self.block_network.layout.sizes[self.dtype]
        self.edge_parameters = Parameters.adopt(self.edge_network.layout,
                                                {self.dtype: buffer[:edge_size]})
        runs = [buffer[edge_size + k * block_size:edge_size + (k + 1) * block_size]
                for k in range(self.model.config.n_layer)]
        self.layer_parameters = {
            network: [Parameters.adopt(network.layout, {self.dtype: run}) for run in runs]
            for network in (self.block_network, self.backward_network)}
        self._bound = {}
        self._views_of = parameters

    def _bind(self, name: str) -> list[BoundPlan]:
        if name not in self._bound:
            plan = self.plan(name)
            if name.startswith("block"):
                self._bound[name] = [plan.bind(p)
                                     for p in self.layer_parameters[plan.network]]
            else:
                self._bound[name] = [plan.bind(self.edge_parameters)]
        return self._bound[name]

    # -- running ----------------------------------------------------------------------
    def _feeds(self, ids: Any, targets: Any) -> tuple[np.ndarray, np.ndarray]:
        model = self.model
        want = (model.batch, model.context)
        arrays = []
        for label, value in (("ids", ids), ("targets", targets)):
            array = np.asarray(value)
            if array.shape != want or array.dtype.kind not in "iu":
                raise FeedError(f"training {label} must be an int array {list(want)} (the "
                                f"model's batch and context), got {array.dtype} "
                                f"{list(array.shape)}")
            if array.size and (array.min() < 0 or array.max() >= model.config.vocab_size):
                raise FeedError(f"training {label} must lie in [0, {model.config.vocab_size})"
                                f"; got {int(array.min())}..{int(array.max())}")
            arrays.append(np.ascontiguousarray(array, dtype=np.int64))
        return arrays[0], arrays[1]

    def gradients(self, ids: Any, targets: Any) -> tuple[float, Gradients]:
        """The loss and the gradients of every parameter of the model's current table."""
        ids, targets = self._feeds(ids, targets)
        parameters = self.model.parameters
        self._rebind(parameters)
        layout = self.model.network.layout
        (x,) = self._bind("embed")[0](ids)
        kept = []  # what each layer's backward reads: its input, output and saved values
        for bound in self._bind("block"):
            y, *saved = bound(x)
            values = {self.x.index: x, self.y.index: y}
            kept.append({self.saved[i]: v for i, v in values.items() if i in self.saved}
                        | dict(zip(self.saved_stand, saved)))
            x = y
        head = self._bind("head_loss")[0]
        outs = _call_in_order(head, {self.hidden: x, self.targets: targets})
        loss, edge_gradients, adjoint = outs[0], outs[1:-1], outs[-1]
        buffer = np.empty(layout.sizes[self.dtype], self.dtype)
        edge_size = self.edge_network.layout.sizes[self.dtype]
        block_size = self.block_network.layout.sizes[self.dtype]
        blocks = self._bind("block_backward")
        for k in range(len(blocks) - 1, -1, -1):
            feeds = kept[k]
            if self.y_adjoint.index in self.saved:
                feeds[self.saved[self.y_adjoint.index]] = adjoint
            outs = _call_in_order(blocks[k], feeds)
            kept[k] = {}
            start = edge_size + k * block_size
            _pack(buffer[start:start + block_size], outs[:-1],
                  self.block_network.layout.slots)
            adjoint = outs[-1]
        embed = _call_in_order(self._bind("embed_backward")[0],
                               {self.ids: ids, self.embedded_adjoint: adjoint})
        edge = buffer[:edge_size]
        _pack(edge, edge_gradients, self.edge_network.layout.slots)
        for slot, g in zip(self.edge_network.layout.slots, embed):
            edge[slot.offset:slot.offset + slot.size] += g.reshape(-1)
        return float(loss), Gradients.adopt(layout, {self.dtype: buffer})

    def step(self, ids: Any, targets: Any, optimizer: Any, lr: float) -> float:
        """One update of the model's parameters with ``optimizer`` (any ``tc.optim``
        optimizer, its state kept by the caller's object); returns the loss before it."""
        loss, gradients = self.gradients(ids, targets)
        self.model.set_parameters(optimizer.step(self.model.parameters, gradients, lr))
        return loss


def _pack(buffer: np.ndarray, payloads: Any, slots: Any) -> None:
    """Write each slot's payload at its offset of the flat ``buffer``."""
    for slot, g in zip(slots, payloads):
        buffer[slot.offset:slot.offset + slot.size] = g.reshape(-1)


def _call_in_order(bound: BoundPlan, feeds: dict[Expr, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Call a bound plan with ``feeds`` arranged in the order its plan reads inputs."""
    return bound(*[feeds[symbol] for symbol in bound.plan.inputs()])


__all__ = ["LayeredTraining", "PLANS", "check_layered_layout"]

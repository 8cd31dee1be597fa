"""Recording: the ``Recorder`` a tape is, the ``Adjoints`` it returns, the eager builder.

A ``Recorder`` turns every op applied to its ``Expr`` handles into a node of the IR, and
``differentiate`` records reverse-mode gradients as more nodes (``autodiff.py``). The
user's ``Tape`` (``plans/tape.py``) is a ``Recorder`` that also seals into a ``Network``;
everything in this layer records through a ``Recorder`` and never needs the network.
``Eager`` evaluates each op at once with its NumPy reference (the runtime backward).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ...errors import ShapeError, TensorCodeError, TrainingError
from ..core import registry as primitives
from ..core.ir import Graph, Node, Type, closure, freeze_attrs
from . import composites  # noqa: F401 - gives Expr its composite methods
from .autodiff import gradients, needs_gradient
from .expr import Builder, Expr, as_array, check_broadcast_mode


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
                 inputs: Sequence[Expr] = (), input_gradients: Sequence[Expr] = (),
                 reached: Sequence[bool] | None = None) -> None:
        self.loss = loss
        self.wrt = tuple(wrt)
        self.gradients = tuple(gradients)
        self.inputs = tuple(inputs)
        self.input_gradients = tuple(input_gradients)
        #: per ``wrt`` parameter, whether the loss reaches it (its gradient is not the
        #: explicit zeros of an unreached parameter): PyTorch's ``grad is not None``
        self.reached = tuple(reached) if reached is not None else (True,) * len(self.wrt)

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


def _python_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


class Recorder(Builder):
    """Records ops into an IR graph (``Tape`` adds the sealing into a ``Network``).

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
        self._network: Any = None  # what sealed the recording (``Tape.into_network``)
        self._modes = [check_broadcast_mode(broadcast)]
        self._literals: set[int] = set()  # nodes lifted from Python numbers
        self._random_key: Expr | None = None
        self._random_blocks = 0
        #: the explicit zeros ``differentiate`` recorded as the gradients of parameters
        #: the loss does not reach (a step plan leaves those parameters alone)
        self.unreached_gradients: set[int] = set()

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
        adjoint a piece of a larger model hands back to the piece before it."""
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
            check_reached(self._nodes, loss.index, {p.index for p in [*wrt, *fed]},
                          repr(loss))
        reached: list[bool] = []
        with self.broadcasting("numpy"):  # the rules' broadcasts are their definition
            grads = gradients(self._nodes, loss.index, [p.index for p in [*wrt, *fed]],
                              self, lambda i: self._exprs[i], reached)
        # the zeros standing for unreached parameters: a step plan skips their update
        self.unreached_gradients.update(
            g.index for g, r in zip(grads[:len(wrt)], reached) if not r)
        return Adjoints(loss, wrt, grads[:len(wrt)], fed, grads[len(wrt):],
                        reached[:len(wrt)])

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



def check_reached(nodes: Sequence[Node], loss: int, wrt: set[int], shown: str,
                  what: str = "differentiate") -> None:
    """``TrainingError`` unless some of ``wrt`` (node ids) reaches the loss (node
    ``loss``, written ``shown`` in messages) through differentiable ops; the message
    says what cuts the path (a detach, or steps without gradients). ``what`` names the
    caller: ``tape.differentiate`` and ``run.backward`` refuse alike."""
    loss_type = nodes[loss].type
    if loss_type.shape != () or not loss_type.is_float or any(
            not nodes[i].type.is_float for i in wrt):
        return  # ``gradients`` refuses these with its own message
    if needs_gradient(nodes, wrt, loss)[loss]:
        return
    example = ("run.backward(error * error)" if what == "run.backward"
               else "tape.differentiate(error * error, ...)")
    reached = set(closure(Graph(tuple(nodes[:loss + 1])), [loss]))
    if not reached & wrt:
        raise TrainingError(
            f"{what}: the loss {shown} does not depend on any of the symbols "
            "differentiated against (disconnected), so every gradient would be zero; "
            "differentiate a loss computed from them (or pass allow_disconnected=True)")
    detached = [i for i in sorted(reached) if nodes[i].op == "detach"
                and needs_gradient(nodes, wrt, nodes[i].inputs[0])[nodes[i].inputs[0]]]
    if detached:
        raise TrainingError(
            f"{what}: the loss {shown} reaches the parameters only through "
            f"detach/stop_gradient (%{detached[0]}), which stops gradients, so every "
            "gradient would be zero. Expr.detach() is JAX's stop_gradient, not the Rust "
            "guide's .detach() (which makes a handle): differentiate the expression "
            f"itself, e.g. {example}")
    raise TrainingError(
        f"{what}: the loss {shown} depends on the parameters only through steps "
        "without gradients (comparisons, integer or recorded values), so every gradient "
        "would be zero: it is nondifferentiable")


__all__ = ["Recorder", "Eager", "Adjoints", "check_reached"]

"""Update rules: an optimizer's update as IR, lowered beside a step plan's loss or alone.

Every optimizer that can be compiled (the built-in ``Sgd``, ``Adam`` and ``AdamW`` and
every ``tc.optim.RuleOptimizer``) writes its update once, with ``Expr`` operations on
scalars, and records it per parameter dtype as a small graph (``UpdateRule``). Its
inputs, in order:

- ``parameter``, ``gradient`` and one value per state table (``state_keys``): one
  element of the flat buffers;
- ``lr``: the learning rate in the parameters' dtype;
- ``lr64``, ``step``, ``first`` (float64): the learning rate as the caller's float, the
  slot's step count after this update, and 1 when the slot has no state yet (PyTorch's
  "no momentum buffer yet"), else 0.

Its outputs are the new parameter and the new value of each state table. Each node has
a *level*: ``CALL`` when it depends on the learning rate alone (computed once per
call), ``SLOT`` when it also reads ``step`` or ``first`` (once per parameter, as PyTorch
computes Adam's bias corrections in Python floats per tensor), ``ELEMENT`` otherwise.

Backends lower the graph like any other: the Numba backend renders each node through
its lowering table's template into a loop over the slots around a loop over the elements
(``backends/numba/update.py``), for an eager ``opt.step`` and inside a step plan alike;
``evaluate`` interprets it with the registry's NumPy references (the ``reference``
backend). Only elementwise ops and scalar constants may appear.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import CompileError, DTypeError
from ..core import registry as primitives
from ..core.dtypes import FLOAT_DTYPES

#: dtypes a compiled update supports (the built-in optimizers' dtypes)
FLOATS = tuple(sorted(FLOAT_DTYPES))

#: the per-call and per-slot inputs after the state values, in order
SCALAR_INPUTS = ("lr", "lr64", "step", "first")

CONST, CALL, SLOT, ELEMENT = 0, 1, 2, 3


class UpdateRule:
    """An update recorded on a tape from scalar inputs (see the module doc).

    ``graphs`` maps each parameter dtype to ``(nodes, inputs, outputs)``: the tape's
    nodes, the node ids of the inputs in the documented order (``None`` for one the
    rule never read) and the node ids of the new parameter and of each new state value.
    ``state_keys`` names the state tables the rule reads and writes, in argument order;
    ``keeps_state`` whether an update marks its slots as having state (``present``)."""

    def __init__(self, name: str, graphs: Mapping[str, tuple[Sequence[Any],
                                                             Sequence[int | None],
                                                             Sequence[int]]],
                 state_keys: Sequence[str], keeps_state: bool = True) -> None:
        self.name = name
        self.state_keys = tuple(state_keys)
        #: whether an update gives its slots state (``present``); False for a rule that
        #: keeps none (plain SGD: PyTorch's state dict then stays empty)
        self.keeps_state = bool(keeps_state)
        self.graphs: dict[str, tuple[list[Any], list[int | None], list[int]]] = {}
        expected_inputs = 2 + len(self.state_keys) + len(SCALAR_INPUTS)
        for dtype, (nodes, inputs, outputs) in graphs.items():
            nodes, inputs = list(nodes), [None if i is None else int(i) for i in inputs]
            outputs = [int(o) for o in outputs]
            if len(inputs) != expected_inputs or len(outputs) != 1 + len(self.state_keys):
                raise CompileError(f"update rule {name}: expected {expected_inputs} inputs "
                                   f"and {1 + len(self.state_keys)} outputs")
            for i in closure(nodes, outputs):
                node = nodes[i]
                if node.op == "input":
                    if i not in inputs:
                        raise CompileError(f"update rule {name}: input %{i} is not one of "
                                           "the rule's arguments")
                    continue
                if node.type.dtype not in FLOATS:
                    raise DTypeError(f"update rule {name}: node %{i} is {node.type.dtype}; "
                                     "an update computes in float32 or float64")
                if node.op == "leaf":
                    if node.type.size != 1:
                        raise CompileError(f"update rule {name}: constant %{i} is not a "
                                           "scalar")
                    continue
                if node.type.shape != () or not primitives.is_elementwise(node.op):
                    raise CompileError(
                        f"update rule {name}: op {node.op!r} (%{i}) is not elementwise on "
                        "scalars; an update computes each element from the same element "
                        "of the parameter, gradient and state")
            self.graphs[dtype] = (nodes, inputs, outputs)
        self._key: str | None = None

    def key(self) -> str:
        """Text that identifies the rule and its hyperparameters (compiled code is keyed
        by it)."""
        if self._key is None:
            from ..core.ir import Graph, describe

            parts = [f"update {self.name} state={self.state_keys} keeps={self.keeps_state}"]
            for dtype, (nodes, inputs, outputs) in sorted(self.graphs.items()):
                parts.append(f"{dtype} inputs={inputs}")
                parts.append(describe(Graph(tuple(nodes), tuple(outputs))))
            self._key = "\n".join(parts)
        return self._key

    @property
    def exact(self) -> bool:
        """Whether every op of the rule is correctly rounded IEEE arithmetic, so the
        reference backend reproduces a compiled update bit for bit on any CPU; a rule
        with a transcendental op (Adam's ``beta ** step``) is held to it within a few ulps
        (``registry.is_transcendental``)."""
        return not any(primitives.is_transcendental(nodes[i].op)
                       for nodes, _, outputs in self.graphs.values()
                       for i in closure(nodes, outputs))

    def graph(self, dtype: str) -> tuple[list[Any], list[int | None], list[int]]:
        if dtype not in self.graphs:
            raise DTypeError(f"update rule {self.name} was not recorded for {dtype}")
        return self.graphs[dtype]

    def levels(self, dtype: str) -> dict[int, int]:
        """Each needed node's level (``CONST``, ``CALL``, ``SLOT``, ``ELEMENT``)."""
        nodes, inputs, outputs = self.graph(dtype)
        n_state = len(self.state_keys)
        fixed: dict[int, int] = {}
        for position, i in enumerate(inputs):
            if i is not None:
                scalar = position - 2 - n_state
                fixed[i] = ELEMENT if scalar < 0 else (CALL if scalar < 2 else SLOT)
        levels: dict[int, int] = {}
        for i in closure(nodes, outputs):
            node = nodes[i]
            if i in fixed:
                levels[i] = fixed[i]
            elif node.op == "leaf":
                levels[i] = CONST
            else:
                levels[i] = max([levels[j] for j in node.inputs], default=CONST)
        return levels


def closure(nodes: Sequence[Any], outputs: Sequence[int]) -> list[int]:
    """The nodes ``outputs`` depend on, each after its inputs."""
    seen: set[int] = set()
    order: list[int] = []
    for root in outputs:
        stack = [(root, False)]
        while stack:
            j, done = stack.pop()
            if done:
                order.append(j)
                continue
            if j in seen:
                continue
            seen.add(j)
            stack.append((j, True))
            for a in reversed(nodes[j].inputs):
                if a not in seen:
                    stack.append((a, False))
    return order


def evaluate(rule: UpdateRule, dtype: str, parameter: np.ndarray, gradient: np.ndarray,
             states: Sequence[np.ndarray], lr: float, sizes: np.ndarray, steps: np.ndarray,
             first: np.ndarray) -> list[np.ndarray]:
    """The rule over flat buffers with the registry's NumPy references (the reference
    backend): ``sizes``, ``steps`` and ``first`` hold one entry per slot (the slots lie
    end to end in the buffers). Returns the new parameter buffer and the new state
    buffers; nothing is written."""
    nodes, inputs, outputs = rule.graph(dtype)
    levels = rule.levels(dtype)
    cast = np.dtype(dtype).type
    given = [parameter, gradient, *states, np.asarray(cast(lr)), np.asarray(np.float64(lr)),
             np.asarray(steps, np.float64), np.asarray(first, np.float64)]
    values: dict[int, np.ndarray] = {i: v for i, v in zip(inputs, given) if i is not None}
    spread: dict[int, np.ndarray] = {}

    def operand(j: int, level: int) -> np.ndarray:
        # a slot's value reaches its elements repeated over the slot (one value when
        # every slot holds the same, as they do while their step counts agree)
        if level == ELEMENT and levels[j] == SLOT:
            if j not in spread:
                value = values[j]
                spread[j] = value[0] if bool(np.all(value == value[0])) else \
                    np.repeat(value, sizes)
            return spread[j]
        return values[j]

    with np.errstate(all="ignore"):  # NaN and infinity propagate, as in the loops
        for i in closure(nodes, outputs):
            node = nodes[i]
            if i in values:
                continue
            if node.op == "leaf":
                values[i] = np.asarray(node.value).reshape(())
                continue
            entry = primitives.REGISTRY[node.op]
            args = [operand(j, levels[i]) for j in node.inputs]
            # the registry's rule with its attrs bound, as the reference plans run it
            result = entry.prepare(node.attr_dict)(args) if entry.prepare is not None \
                else entry.reference(args, node.attr_dict)
            kind = np.dtype(node.type.dtype)
            values[i] = np.asarray(result if result.dtype is kind else result.astype(kind))
    size = parameter.shape[0]
    results: list[np.ndarray] = []
    for o in outputs:
        value = operand(o, ELEMENT)
        if value.dtype != np.dtype(dtype):
            raise DTypeError(f"update rule {rule.name} computed {value.dtype.name} for "
                             f"{dtype} parameters")
        if value.shape != (size,) or any(value is r for r in results) or \
                any(value is v for v in given):
            value = np.array(np.broadcast_to(value, (size,)), dtype=dtype)
        results.append(value)
    return results


@dataclass(frozen=True)
class StepSpec:
    """Where a step plan's update reads and writes, for the code generator.

    ``rule``: the update; ``loss``: (output dtype, offset) of the scalar loss root;
    ``slots``: per parameter slot, ``(slot index, dtype, parameter offset, size,
    gradient offset)``, the gradient lying in the output arena of the slot's dtype;
    ``skipped``: the slots the loss does not reach, which the update leaves alone
    (parameter, state and step count), as PyTorch leaves a parameter whose gradient is
    ``None``."""

    rule: UpdateRule
    loss: tuple[str, int]
    slots: tuple[tuple[int, str, int, int, int], ...]
    skipped: frozenset[int] = frozenset()

    @property
    def updated(self) -> tuple[tuple[int, str, int, int, int], ...]:
        """The slots the update changes (``slots`` less ``skipped``)."""
        return tuple(t for t in self.slots if t[0] not in self.skipped)

    def key(self) -> str:
        return (f"{self.rule.key()}\nloss {self.loss}\nslots {self.slots}\n"
                f"skipped {sorted(self.skipped)}")


__all__ = ["UpdateRule", "StepSpec", "FLOATS", "SCALAR_INPUTS", "closure", "evaluate",
           "CONST", "CALL", "SLOT", "ELEMENT"]

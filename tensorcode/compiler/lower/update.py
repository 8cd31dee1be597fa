"""Update rules a step plan lowers beside the loss and its gradients.

An optimizer that can be fused hands the compiler an ``UpdateRule``: which state tables
the rule reads and writes (flat per-dtype buffers, in the parameter table's layout), and
the loop body it runs for each element, as generated Python source for the Numba
backend. ``module`` places the body inside a per-slot loop of the plan's
generated module, so one compiled call computes the loss and the gradients and then
updates the parameters and the state in place.

Three rules exist:

- ``SgdRule`` and ``AdamRule`` write exactly the operations of the built-in optimizers'
  compiled loops (``runtime/optim_kernels.py``), in the same order and with every
  scalar cast to the buffer's dtype the same way, so a fused trajectory equals the
  unfused one bit for bit (tests hold them equal);
- ``ExprRule`` lowers a rule recorded with ``Expr`` operations on scalar inputs: each
  node becomes the scalar expression the registry gives its op (the same template the
  backend's fused loops use, never an approximation), so a custom optimizer's update
  is code the compiler generated from validated nodes, not text a user wrote.

Every literal in the emitted code is made here from a number (``float.hex``) or an
integer; names are fixed prefixes with integer suffixes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import CompileError, DTypeError
from ..core import registry as primitives
from ..core.ir import number_literal

NP = {"float32": "np.float32", "float64": "np.float64", "int32": "np.int32",
      "int64": "np.int64"}

#: dtypes a fused update supports (the built-in optimizers' dtypes)
FLOATS = ("float32", "float64")


class Literals:
    """Module-level constants of the emitted code, one global per distinct value."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.names: dict[tuple[str, str], str] = {}
        self.lines: list[str] = []

    def __call__(self, value: Any, dtype: str) -> str:
        text = number_literal(value, dtype)
        key = (dtype, text)
        if key not in self.names:
            name = f"{self.prefix}{len(self.names)}"
            self.names[key] = name
            self.lines.append(f"{name} = {NP[dtype]}({text})")
        return self.names[key]


@dataclass
class Emitted:
    """One dtype's update code: ``setup`` once per call (``lr`` in scope), ``slot`` once
    per slot (``k`` the slot index, ``steps``/``present`` in scope), ``element`` per
    element (``p_``, ``g_`` and one ``s{j}_`` per state table, index ``i``), ``finish``
    per slot after its loop."""

    setup: list[str] = field(default_factory=list)
    slot: list[str] = field(default_factory=list)
    element: list[str] = field(default_factory=list)
    finish: list[str] = field(default_factory=list)


class UpdateRule:
    """What a fused update needs from an optimizer. ``state_keys``: the state tables the
    rule updates in place, in argument order; ``key()``: text that identifies the rule
    and its hyperparameters (part of the plan's cache key through the source);
    ``emit(dtype, literal)``: the code for one dtype's buffer."""

    state_keys: tuple[str, ...] = ()

    def key(self) -> str:
        raise NotImplementedError  # pragma: no cover - abstract

    def emit(self, dtype: str, literal: Literals) -> Emitted:
        raise NotImplementedError  # pragma: no cover - abstract


def _f(dtype: str, value: float) -> Any:
    """``value`` cast to ``dtype`` as the optimizers cast their scalars."""
    return np.dtype(dtype).type(value)


class SgdRule(UpdateRule):
    """``optim_kernels.sgd_update`` fused: weight decay, momentum (the first buffer is
    the gradient), nesterov, ``p + (-lr) * d`` written back into the parameters."""

    def __init__(self, momentum: float, dampening: float, weight_decay: float,
                 nesterov: bool, maximize: bool) -> None:
        self.momentum, self.dampening, self.weight_decay = momentum, dampening, weight_decay
        self.nesterov, self.maximize = bool(nesterov), bool(maximize)
        self.state_keys = ("momentum_buffer",) if momentum != 0 else ()

    def key(self) -> str:
        return (f"sgd momentum={float(self.momentum).hex()} "
                f"dampening={float(self.dampening).hex()} "
                f"weight_decay={float(self.weight_decay).hex()} "
                f"nesterov={self.nesterov} maximize={self.maximize}")

    def emit(self, dtype: str, literal: Literals) -> Emitted:
        out = Emitted()
        np_t = NP[dtype]
        out.setup.append(f"neg_lr = {np_t}(-lr)")
        use_momentum = self.momentum != 0
        if use_momentum:
            out.slot.append("first = present[k] == 0")
        body = ["d = g_[i]"]
        if self.maximize:
            body.append("d = -d")
        if self.weight_decay != 0:
            wd = literal(_f(dtype, self.weight_decay), dtype)
            body.append(f"d = d + {wd} * p_[i]")
        if use_momentum:
            m = literal(_f(dtype, self.momentum), dtype)
            omd = literal(_f(dtype, 1 - self.dampening), dtype)
            body.append(f"b = d if first else s0_[i] * {m} + {omd} * d")
            body.append("s0_[i] = b")
            body.append(f"d = d + {m} * b" if self.nesterov else "d = b")
        body.append("p_[i] = p_[i] + neg_lr * d")
        out.element = body
        out.finish.append("steps[k] += 1.0")
        if use_momentum:
            out.finish.append("present[k] = 1")
        return out


class AdamRule(UpdateRule):
    """``optim_kernels.adam_update`` fused, with the per-slot bias corrections computed
    in float64 inside the call from the slot's step count (PyTorch's Python-float
    arithmetic: ``1 - beta ** step``, ``lr / bias_correction1``, ``sqrt``), then cast."""

    def __init__(self, betas: tuple[float, float], eps: float, weight_decay: float,
                 amsgrad: bool, maximize: bool, decoupled: bool) -> None:
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps, self.weight_decay = eps, weight_decay
        self.amsgrad, self.maximize, self.decoupled = bool(amsgrad), bool(maximize), \
            bool(decoupled)
        keys = ("exp_avg", "exp_avg_sq")
        self.state_keys = keys + ("max_exp_avg_sq",) if amsgrad else keys

    def key(self) -> str:
        return (f"adam betas={self.betas[0].hex()},{self.betas[1].hex()} "
                f"eps={float(self.eps).hex()} weight_decay={float(self.weight_decay).hex()} "
                f"amsgrad={self.amsgrad} maximize={self.maximize} decoupled={self.decoupled}")

    def emit(self, dtype: str, literal: Literals) -> Emitted:
        out = Emitted()
        np_t = NP[dtype]
        beta1, beta2 = self.betas
        b1 = literal(beta1, "float64")
        b2 = literal(beta2, "float64")
        weight1 = 1 - beta1
        use_decay = self.weight_decay != 0
        if use_decay and self.decoupled:
            wd64 = literal(float(self.weight_decay), "float64")
            out.setup.append(f"decay_factor = {np_t}(1 - lr * {wd64})")
        out.slot += [
            "st = steps[k] + 1.0",
            f"step_size = {np_t}(-(lr / (1 - {b1} ** st)))",
            f"bc2 = {np_t}(np.sqrt(1 - {b2} ** st))",
        ]
        body = ["d = g_[i]"]
        if self.maximize:
            body.append("d = -d")
        body.append("p = p_[i]")
        if use_decay:
            if self.decoupled:
                body.append("p = p * decay_factor")
            else:
                body.append(f"d = d + {literal(_f(dtype, self.weight_decay), dtype)} * p")
        w1 = _f(dtype, weight1)
        if abs(w1) < 0.5:
            body.append(f"m = s0_[i] + {literal(w1, dtype)} * (d - s0_[i])")
        else:
            one_minus = _f(dtype, 1) - w1
            body.append(f"m = d - (d - s0_[i]) * {literal(one_minus, dtype)}")
        body.append("s0_[i] = m")
        body.append(f"v = s1_[i] * {literal(_f(dtype, beta2), dtype)} + "
                    f"{literal(_f(dtype, 1 - beta2), dtype)} * d * d")
        body.append("s1_[i] = v")
        eps = literal(_f(dtype, self.eps), dtype)
        if self.amsgrad:
            body += ["w = s2_[i]",
                     "if not (w >= v):",
                     "    w = v if (v >= w or v != v) else w",
                     "s2_[i] = w",
                     f"denom = np.sqrt(w) / bc2 + {eps}"]
        else:
            body.append(f"denom = np.sqrt(v) / bc2 + {eps}")
        body.append("p_[i] = p + step_size * m / denom")
        out.element = body
        out.finish += ["steps[k] = st", "present[k] = 1"]
        return out


class ExprRule(UpdateRule):
    """A rule recorded on a tape from scalar inputs (``parameter``, ``gradient``, one per
    state key, ``lr``), lowered node by node through the registry's scalar templates.

    ``graphs`` maps each parameter dtype to ``(nodes, inputs, outputs)``: the tape's
    nodes, the node ids of the scalar inputs in that order, and the node ids of the new
    parameter and of each new state value. Only elementwise ops and scalar constants
    may appear (anything else is refused)."""

    def __init__(self, name: str, graphs: Mapping[str, tuple[Sequence[Any], Sequence[int],
                                                             Sequence[int]]],
                 state_keys: Sequence[str]) -> None:
        self.name = name
        self.state_keys = tuple(state_keys)
        self.graphs = {d: (list(n), [int(i) for i in ins], [int(o) for o in outs])
                       for d, (n, ins, outs) in graphs.items()}
        for nodes, inputs, outputs in self.graphs.values():
            if len(inputs) != 3 + len(self.state_keys) or \
                    len(outputs) != 1 + len(self.state_keys):
                raise CompileError(f"fused rule {name}: expected {3 + len(self.state_keys)} "
                                   f"inputs and {1 + len(self.state_keys)} outputs")
            for i in _closure(nodes, outputs):
                node = nodes[i]
                if node.op == "input":
                    if i not in inputs:
                        raise CompileError(f"fused rule {name}: input %{i} is not one of the "
                                           "rule's arguments")
                    continue
                if node.op == "leaf":
                    if node.type.size != 1:
                        raise CompileError(f"fused rule {name}: constant %{i} is not a "
                                           "scalar")
                    continue
                if node.type.shape != () or not primitives.is_elementwise(node.op):
                    raise CompileError(
                        f"fused rule {name}: op {node.op!r} (%{i}) is not elementwise on "
                        "scalars; a fused update computes each element from the same element "
                        "of the parameter, gradient and state")

    def key(self) -> str:
        from ..core.ir import Graph, describe

        parts = [f"expr {self.name} state={self.state_keys}"]
        for dtype, (nodes, inputs, outputs) in sorted(self.graphs.items()):
            parts.append(f"{dtype} inputs={inputs}")
            parts.append(describe(Graph(tuple(nodes), tuple(outputs))))
        return "\n".join(parts)

    def emit(self, dtype: str, literal: Literals) -> Emitted:
        if dtype not in self.graphs:
            raise DTypeError(f"fused rule {self.name} was not recorded for {dtype}")
        nodes, inputs, outputs = self.graphs[dtype]
        out = Emitted()
        names = {inputs[0]: "p_[i]", inputs[1]: "g_[i]"}
        for j, i in enumerate(inputs[2:-1]):
            names[i] = f"s{j}_[i]"
        names[inputs[-1]] = "lr_"
        out.setup.append(f"lr_ = {NP[dtype]}(lr)")
        body: list[str] = []
        for i in _closure(nodes, outputs):
            node = nodes[i]
            if node.type.dtype != dtype:
                raise DTypeError(f"fused rule {self.name}: node %{i} is {node.type.dtype}, "
                                 f"the parameters are {dtype}")
            if node.op == "input":
                body.append(f"e{i} = {names[i]}")
                continue
            if node.op == "leaf":
                body.append(f"e{i} = {literal(node.value.reshape(-1)[0], dtype)}")
                continue
            entry = primitives.REGISTRY[node.op]
            args = [f"e{j}" for j in node.inputs]
            operand = nodes[node.inputs[0]].type.dtype if node.inputs else dtype
            text = entry.lowerings["numba"].template.format(
                *args, one=literal(1, dtype), zero=literal(0, dtype),
                zero0=literal(0, operand), np_dtype=NP[dtype])
            body.append(f"e{i} = {text}")
        # every old value is read above, before any new one is written
        body.append(f"p_[i] = e{outputs[0]}")
        for j, o in enumerate(outputs[1:]):
            body.append(f"s{j}_[i] = e{o}")
        out.element = body
        out.finish += ["steps[k] += 1.0", "present[k] = 1"]
        return out


def _closure(nodes: Sequence[Any], outputs: Sequence[int]) -> list[int]:
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


@dataclass(frozen=True)
class StepSpec:
    """Where a step plan's update reads and writes, for the code generator.

    ``rule``: the update; ``loss``: (output dtype, offset) of the scalar loss root;
    ``slots``: per parameter slot, ``(slot index, dtype, parameter offset, size,
    gradient offset)``, the gradient lying in the output arena of the slot's dtype."""

    rule: UpdateRule
    loss: tuple[str, int]
    slots: tuple[tuple[int, str, int, int, int], ...]

    def key(self) -> str:
        return f"{self.rule.key()}\nloss {self.loss}\nslots {self.slots}"


__all__ = ["UpdateRule", "SgdRule", "AdamRule", "ExprRule", "StepSpec", "Literals", "Emitted",
           "FLOATS"]

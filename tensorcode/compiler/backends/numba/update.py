"""The Numba lowering of an optimizer's update rule (``compiler/lower/update.py``).

``function_lines(rule, dtype, name, literal)`` renders one dtype's update as a function

    name(P, G, U, S0.., K, PS, N, GS, steps, present, lr)

that walks the slots listed by ``K`` (slot index), ``PS`` (offset in ``P``, ``U`` and the
state buffers), ``N`` (size) and ``GS`` (offset in ``G``). Per call it computes the
rule's ``CALL`` nodes, per slot its ``SLOT`` nodes (the step count ``steps[k] + 1`` and
``first``), and per element its ``ELEMENT`` nodes, each through this backend's scalar
template for its op (``lowerings.py``, the table the fused loops use); it writes the new
parameter into ``U`` and the new state into the state buffers, then the slot's step
count and ``present`` flag. Every old value is read before any new one is written, so
``U`` may be ``P`` (a step plan updates in place) or a fresh buffer (an eager step).

``numba.step`` places these functions in a step plan's module; ``eager(rule, dtype)``
compiles one as its own module through the plan cache (``numba.backend``), for
``opt.step``: it depends on the rule and the dtype only, so every model of a machine
shares it. Every literal is made here from a number (``ir.number_literal``); names are
fixed prefixes with integer suffixes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.dtypes import NUMPY_SOURCE as NP
from ...core.ir import number_literal
from ...lower.update import CALL, CONST, ELEMENT, SLOT, UpdateRule, closure
from .lowerings import IMPORTS, templates


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
    element (``p_``, ``g_``, ``u_`` and one ``s{j}_`` per state table, index ``i``)."""

    setup: list[str] = field(default_factory=list)
    slot: list[str] = field(default_factory=list)
    element: list[str] = field(default_factory=list)


def emit(rule: UpdateRule, dtype: str, literal: Literals) -> Emitted:
    """The three sections of ``rule`` for ``dtype`` (see the module doc)."""
    nodes, inputs, outputs = rule.graph(dtype)
    levels = rule.levels(dtype)
    n_state = len(rule.state_keys)
    reads = ["p_[i]", "g_[i]", *[f"s{j}_[i]" for j in range(n_state)]]
    out = Emitted()
    names: dict[int, str] = {}
    for position, i in enumerate(inputs):
        if i is None:
            continue
        scalar = position - 2 - n_state
        if scalar < 0:
            out.element.append(f"e{i} = {reads[position]}")
            names[i] = f"e{i}"
        else:
            names[i] = ("lr_", "lr", "st", "first")[scalar]
    if inputs[2 + n_state] is not None:
        out.setup.append(f"lr_ = {NP[dtype]}(lr)")
    if inputs[2 + n_state + 3] is not None:
        out.slot.append("first = 1.0 if present[k] == 0 else 0.0")
    sections = {CALL: out.setup, SLOT: out.slot, ELEMENT: out.element}
    for i in closure(nodes, outputs):
        node = nodes[i]
        if i in names:
            continue
        kind = node.type.dtype
        if node.op == "leaf":
            names[i] = literal(node.value.reshape(-1)[0], kind)
            continue
        operand = nodes[node.inputs[0]].type.dtype if node.inputs else kind
        text = templates(node.op).format(
            *[names[j] for j in node.inputs], one=literal(1, kind), zero=literal(0, kind),
            zero0=literal(0, operand), np_dtype=NP[kind])
        names[i] = f"e{i}"
        level = levels[i]
        sections[level if level != CONST else CALL].append(f"e{i} = {text}")
    # every old value is read above, before any new one is written
    out.element.append(f"u_[i] = {names[outputs[0]]}")
    for j, o in enumerate(outputs[1:]):
        out.element.append(f"s{j}_[i] = {names[o]}")
    return out


def function_lines(rule: UpdateRule, dtype: str, name: str, literal: Literals) -> list[str]:
    """The source of ``name(P, G, U, S0.., K, PS, N, GS, steps, present, lr)``."""
    emitted = emit(rule, dtype, literal)
    states = [f"s{j}" for j in range(len(rule.state_keys))]
    lines = [f"def {name}(P, G, U, {''.join(x + ', ' for x in states)}K, PS, N, GS, steps, "
             "present, lr):"]
    lines += [f"    {line}" for line in emitted.setup]
    lines += ["    for q in range(K.shape[0]):",
              "        k = K[q]",
              "        start = PS[q]",
              "        n = N[q]",
              "        gs = GS[q]",
              # per-slot views indexed from zero: the indices are provably non-negative,
              # so the element loop needs no wraparound handling and vectorizes
              "        p_ = P[start:start + n]",
              "        g_ = G[gs:gs + n]",
              "        u_ = U[start:start + n]"]
    lines += [f"        {x}_ = {x}[start:start + n]" for x in states]
    lines.append("        st = steps[k] + 1.0")
    lines += [f"        {line}" for line in emitted.slot]
    lines.append("        for i in range(n):")
    lines += [f"            {line}" for line in emitted.element]
    lines.append("        steps[k] = st")
    if rule.keeps_state:
        lines.append("        present[k] = 1")
    lines.append("")
    return lines


def _array(dtype: str, readonly: bool) -> str:
    return f"types.Array(types.{dtype}, 1, 'C', readonly={readonly})"


_EAGER: dict[tuple[str, str], Callable[..., None]] = {}
_EAGER_LOCK = threading.Lock()


def eager(rule: UpdateRule, dtype: str,
          compiled_functions: Callable[[str, dict[str, str]], dict[str, Any]]
          ) -> Callable[..., None]:
    """``update(P, G, U, S0.., K, PS, N, GS, steps, present, lr)`` for ``dtype``, compiled
    (or loaded from the plan cache) on first use; ``P``, ``G`` and the slot tables are
    read, ``U``, the state buffers, ``steps`` and ``present`` written. The backend passes
    ``compiled_functions`` (its plan cache), so this module does not import it back."""
    memo = (rule.key(), dtype)
    function = _EAGER.get(memo)
    if function is not None:
        return function
    literal = Literals("L")
    body = function_lines(rule, dtype, "update", literal)
    source = "\n".join(["# Generated by TensorCode: an optimizer's eager update. The file "
                        "name is its key.",
                        "# Do not edit: the plan cache regenerates this file and compares "
                        "it before use.",
                        *IMPORTS, "", *literal.lines, "", *body]) + "\n"
    types_ = ([_array(dtype, True)] * 2 + [_array(dtype, False)]
              + [_array(dtype, False)] * len(rule.state_keys)
              + [_array("int64", True)] * 4
              + [_array("float64", False), _array("uint8", False), "types.float64"])
    signature = "(" + ", ".join(types_) + ",)"
    with _EAGER_LOCK:
        function = compiled_functions(source, {"update": signature})["update"]
        _EAGER[memo] = function
    return function


__all__ = ["Literals", "Emitted", "emit", "function_lines", "eager", "NP"]

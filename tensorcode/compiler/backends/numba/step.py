"""The step entry points of a plan module lowered with an optimizer.

``generate(program)`` returns the source appended to the plan's module
(``module.generate``) when the plan is a step plan (``compiler/plans/step.py``):

- ``rule_<dtype>``: the rule's update function (``numba.update.function_lines``), and
  ``update_<dtype>(U, O, S.., steps, present, lr)`` calling it over the slots the loss
  reaches (their tables are literals of the module), reading the gradients from the
  output arena ``O`` and writing the new parameters and state in place;
- ``update(U_.., O_.., S_.., steps, present, lr)``: every dtype's update;
- ``run_step(P_.., C.., X.., U_.., S_.., steps, present, lr)``: ``body`` (the loss and the
  gradients, into fresh output arenas), then ``update``; returns the loss as a number;
- ``run_steps(P_.., C.., X.., U_.., S_.., steps, present, lrs)``: K steps, each input
  with a leading axis of K (or 1, the same value every step), one learning rate per
  step; scratch and output arenas allocated once; returns the K losses.

``P_..`` (read-only) and ``U_..`` (writable) are the same parameter buffers: the body
reads them through the read-only type it is compiled for in ``run``, so the step shares
its compiled body instead of compiling a second one. ``helpers(program)`` names the
functions ``backend`` compiles as internal (no Python wrapper) like ``body``.
"""

from __future__ import annotations

from ...core.dtypes import DTYPES
from ...lower.program import Program
from ...lower.update import FLOATS
from .loops import NP
from .source import allocate, body_call, case_inputs, head
from .update import Literals, function_lines


def helpers(program: Program) -> list[str]:
    """The functions of the step section only the entry points call (compiled as internal,
    like ``body``): per parameter dtype the rule's function and its update over the
    dtype's slots, then ``update`` (always last)."""
    names: list[str] = []
    for a in program.updates:
        names += [_rule_name(a.dtype), _update_name(a.dtype)]
    return names + ["update"]


def _rule_name(dtype: str) -> str:
    return f"rule_{DTYPES[dtype]}"


def _update_name(dtype: str) -> str:
    return f"update_{DTYPES[dtype]}"


def generate(program: Program) -> list[str]:
    """The step section of the plan module for ``program`` (see the module doc)."""
    p = program
    spec = p.step
    assert spec is not None  # only a step plan's program has a step section
    rule = spec.rule
    literal = Literals("L")
    states = "".join(f"s{j}, " for j in range(len(rule.state_keys)))
    for u in p.updates:
        if u.dtype not in FLOATS:
            raise TypeError(f"a fused update needs float parameters, not {u.dtype}")
    lines: list[str] = []
    functions: list[str] = []
    names = helpers(p)
    for u in p.updates:
        d = u.dtype
        slots = [t for t in spec.updated if t[1] == d]
        short = DTYPES[d]
        tables = {"K": [t[0] for t in slots], "P": [t[2] for t in slots],
                  "N": [t[3] for t in slots], "G": [t[4] for t in slots]}
        for letter, values in tables.items():
            lines.append(f"U{letter}_{short} = np.array({[int(v) for v in values]!r}, "
                         "np.int64)")
        rule_name, name = _rule_name(d), _update_name(d)
        functions += function_lines(rule, d, rule_name, literal)
        functions += [f"def {name}(U, O, {states}steps, present, lr):",
                      f"    {rule_name}(U, O, U, {states}UK_{short}, UP_{short}, UN_{short}, "
                      f"UG_{short}, steps, present, lr)", ""]
    lines += literal.lines
    lines.append("")
    lines += functions
    outputs = {a.dtype: a.name for a in p.outputs}
    update_args = ([a.name for a in p.updates] + [a.name for a in p.outputs]
                   + [a.name for a in p.states])
    lines.append(f"def {names[-1]}({', '.join(update_args)}, steps, present, lr):")
    for u in p.updates:
        st = [a.name for a in p.states if a.dtype == u.dtype]
        lines.append(f"    {_update_name(u.dtype)}({u.name}, {outputs[u.dtype]}, "
                     f"{''.join(x + ', ' for x in st)}steps, present, lr)")
    lines.append("")
    loss_dtype, loss_offset = spec.loss
    loss_out = outputs[loss_dtype]
    call = body_call(p)
    update_call = f"{names[-1]}({', '.join(update_args)}, steps, present, lr)"
    # one step
    lines.append(head(p.run_step))  # type: ignore[arg-type]
    for k, x in enumerate(p.inputs):
        label = f"#{k}"  # by position: the plan puts the name back, as data
        lines.append(f"    if {x.name}.shape != {x.shape!r}:")
        lines.append(f"        raise ValueError('input {label}: expected shape {list(x.shape)}')")
        flat = "" if len(x.shape) == 1 else f".reshape({max(x.size, 0)})"
        lines.append(f"    x{k} = {x.name}{flat}")
    lines += allocate(p.scratch) + allocate(p.outputs)
    lines.append(f"    {call}")
    lines.append(f"    {update_call}")
    lines.append(f"    return {loss_out}[{loss_offset}]")
    lines.append("")
    # K steps
    lines.append(head(p.run_steps))  # type: ignore[arg-type]
    lines.append("    n = lrs.shape[0]")
    for k, x in enumerate(p.inputs):
        label = f"#{k}"  # by position: the plan puts the name back, as data
        lines.append(f"    if {x.name}.shape[1:] != {x.shape!r} or ({x.name}.shape[0] != n and "
                     f"{x.name}.shape[0] != 1):")
        lines.append(f"        raise ValueError('input {label}: expected shape [K or 1, "
                     f"{', '.join(map(str, x.shape))}] for K steps')")
        if len(x.shape) > 1:
            lines.append(f"    {x.name} = {x.name}.reshape({x.name}.shape[0], {x.size})")
    lines += allocate(p.scratch) + allocate(p.outputs)
    lines.append(f"    losses = np.empty(n, {NP[loss_dtype]})")
    lines.append("    for c in range(n):")
    lines += case_inputs(p)
    lines.append("        lr = lrs[c]")
    lines.append(f"        {call}")
    lines.append(f"        {update_call}")
    lines.append(f"        losses[c] = {loss_out}[{loss_offset}]")
    lines.append("    return losses")
    lines.append("")
    return lines


__all__ = ["generate", "helpers"]

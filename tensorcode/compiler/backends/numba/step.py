"""The step entry points of a plan module lowered with an optimizer.

``generate(program)`` returns the source appended to the plan's module
(``module.generate``) when the plan is a step plan (``compiler/plans/step.py``):

- ``update_<dtype>(U, O, S.., steps, present, lr)``: one dtype's update, a loop over
  the dtype's slots (per-slot scalars such as Adam's bias corrections computed once per
  slot) around the rule's element loop (``compiler/lower/update.py``), which writes the new
  parameters into ``U`` and the new state into the state buffers in place;
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

from ...core.ir import DTYPES
from ...lower.program import Program
from ...lower.update import FLOATS, Literals
from .loops import NP
from .lowerings import templates
from .source import allocate, body_call, case_inputs, head


def helpers(program: Program) -> list[str]:
    """The functions of the step section only the entry points call (compiled as internal,
    like ``body``): one update per parameter dtype, and ``update``."""
    return [f"update_{DTYPES[a.dtype]}" for a in program.updates] + ["update"]


def generate(program: Program) -> list[str]:
    """The step section of the plan module for ``program`` (see the module doc)."""
    p = program
    spec = p.step
    assert spec is not None  # only a step plan's program has a step section
    rule = spec.rule
    literal = Literals("L", templates)
    n_states = len(rule.state_keys)
    for u in p.updates:
        if u.dtype not in FLOATS:
            raise TypeError(f"a fused update needs float parameters, not {u.dtype}")
    lines: list[str] = []
    functions: list[str] = []
    names = helpers(p)
    for u, name in zip(p.updates, names):
        d = u.dtype
        slots = [t for t in spec.slots if t[1] == d]
        short = DTYPES[d]
        tables = {"K": [t[0] for t in slots], "P": [t[2] for t in slots],
                  "N": [t[3] for t in slots], "G": [t[4] for t in slots]}
        for letter, values in tables.items():
            lines.append(f"U{letter}_{short} = np.array({[int(v) for v in values]!r}, "
                         "np.int64)")
        emitted = rule.emit(d, literal)
        states = [f"s{j}" for j in range(n_states)]
        fn = [f"def {name}(U, O, {''.join(x + ', ' for x in states)}steps, present, lr):"]
        fn += [f"    {line}" for line in emitted.setup]
        fn.append(f"    for q in range({len(slots)}):")
        fn += [f"        k = UK_{short}[q]", f"        start = UP_{short}[q]",
               f"        n = UN_{short}[q]", f"        gs = UG_{short}[q]",
               "        p_ = U[start:start + n]", "        g_ = O[gs:gs + n]"]
        fn += [f"        {x}_ = {x}[start:start + n]" for x in states]
        fn += [f"        {line}" for line in emitted.slot]
        fn.append("        for i in range(n):")
        fn += [f"            {line}" for line in emitted.element]
        fn += [f"        {line}" for line in emitted.finish]
        functions += fn + [""]
    lines += literal.lines
    lines.append("")
    lines += functions
    outputs = {a.dtype: a.name for a in p.outputs}
    update_args = ([a.name for a in p.updates] + [a.name for a in p.outputs]
                   + [a.name for a in p.states])
    lines.append(f"def {names[-1]}({', '.join(update_args)}, steps, present, lr):")
    for u, name in zip(p.updates, names):
        st = [a.name for a in p.states if a.dtype == u.dtype]
        lines.append(f"    {name}({u.name}, {outputs[u.dtype]}, "
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

"""The step entry points of a plan module lowered with an optimizer.

``generate(schedule, spec)`` returns the source appended to the plan's module
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
its compiled body instead of compiling a second one. ``STEP_SIGNATURE`` and
``STEPS_SIGNATURE`` are the argument types as text, and ``HELPERS`` names the functions
``backend`` compiles as internal (no Python wrapper) like ``body``.
"""

from __future__ import annotations

from ...lower.kernels import Arena
from ...lower.schedule import Schedule
from ...lower.update import FLOATS, Literals, StepSpec
from .loops import NP, array_name, scratch_sizes

_SHORT = {"float32": "f32", "float64": "f64"}


def _array_type(dtype: str, ndim: int, readonly: bool) -> str:
    return f"types.Array(types.{dtype}, {ndim}, 'C', readonly={readonly})"


def generate(schedule: Schedule, spec: StepSpec) -> list[str]:
    """The step section of the plan module for ``schedule`` (see the module doc)."""
    s, g = schedule, schedule.graph
    rule = spec.rule
    literal = Literals("L")
    dtypes = list(s.sources.parameter_dtypes)
    for d in dtypes:
        if d not in FLOATS:
            raise TypeError(f"a fused update needs float parameters, not {d}")
    params = [array_name(Arena("parameter", d)) for d in dtypes]
    consts = [array_name(Arena("constant", g.nodes[i].type.dtype, k))
              for k, i in enumerate(s.constants)]
    inputs = [array_name(Arena("input", g.nodes[i].type.dtype, k))
              for k, i in enumerate(s.sources.inputs)]
    scratch = scratch_sizes(s)
    arenas, outs = list(scratch), sorted(s.out_arena)
    w_names = [array_name(Arena("scratch", d)) for d in arenas]
    o_names = [array_name(Arena("output", d)) for d in outs]
    u_names = [f"U_{_SHORT[d]}" for d in dtypes]
    s_names = [f"S{j}_{_SHORT[d]}" for j in range(len(rule.state_keys)) for d in dtypes]
    lines: list[str] = []
    helpers: list[str] = []
    functions: list[str] = []
    for d in dtypes:
        slots = [t for t in spec.slots if t[1] == d]
        short = _SHORT[d]
        tables = {"K": [t[0] for t in slots], "P": [t[2] for t in slots],
                  "N": [t[3] for t in slots], "G": [t[4] for t in slots]}
        for letter, values in tables.items():
            lines.append(f"U{letter}_{short} = np.array({[int(v) for v in values]!r}, "
                         "np.int64)")
        emitted = rule.emit(d, literal)
        states = [f"s{j}" for j in range(len(rule.state_keys))]
        name = f"update_{short}"
        helpers.append(name)
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
    update_args = u_names + o_names + s_names
    lines.append(f"def update({', '.join(update_args)}, steps, present, lr):")
    for d, u in zip(dtypes, u_names):
        o = array_name(Arena("output", d))
        st = [f"S{j}_{_SHORT[d]}" for j in range(len(rule.state_keys))]
        lines.append(f"    update_{_SHORT[d]}({u}, {o}, {''.join(x + ', ' for x in st)}"
                     "steps, present, lr)")
    lines.append("")
    helpers.append("update")
    loss_dtype, loss_offset = spec.loss
    loss_out = array_name(Arena("output", loss_dtype))
    flat_inputs = [f"x{k}" for k in range(len(inputs))]
    body_call = f"body({', '.join(params + consts + flat_inputs + w_names + o_names)})"
    update_call = f"update({', '.join(update_args)}, steps, present, lr)"
    head = ", ".join(params + consts + inputs + u_names + s_names)
    # one step
    lines.append(f"def run_step({head}, steps, present, lr):")
    for k, i in enumerate(s.sources.inputs):
        node = g.nodes[i]
        shape = tuple(node.type.shape)
        label = f"#{k}"  # by position: the plan puts the name back, as data
        lines.append(f"    if {inputs[k]}.shape != {shape!r}:")
        lines.append(f"        raise ValueError('input {label}: expected shape {list(shape)}')")
        flat = "" if node.type.rank == 1 else f".reshape({max(node.type.size, 0)})"
        lines.append(f"    x{k} = {inputs[k]}{flat}")
    lines += [f"    {w} = np.empty({scratch[d]}, {NP[d]})" for d, w in zip(arenas, w_names)]
    lines += [f"    {o} = np.empty({s.out_arena[d]}, {NP[d]})" for d, o in zip(outs, o_names)]
    lines.append(f"    {body_call}")
    lines.append(f"    {update_call}")
    lines.append(f"    return {loss_out}[{loss_offset}]")
    lines.append("")
    # K steps
    lines.append(f"def run_steps({head}, steps, present, lrs):")
    lines.append("    n = lrs.shape[0]")
    for k, i in enumerate(s.sources.inputs):
        node = g.nodes[i]
        shape = tuple(node.type.shape)
        label = f"#{k}"  # by position: the plan puts the name back, as data
        x = inputs[k]
        lines.append(f"    if {x}.shape[1:] != {shape!r} or ({x}.shape[0] != n and "
                     f"{x}.shape[0] != 1):")
        lines.append(f"        raise ValueError('input {label}: expected shape [K or 1, "
                     f"{', '.join(map(str, shape))}] for K steps')")
        if node.type.rank > 1:
            lines.append(f"    {x} = {x}.reshape({x}.shape[0], {node.type.size})")
    lines += [f"    {w} = np.empty({scratch[d]}, {NP[d]})" for d, w in zip(arenas, w_names)]
    lines += [f"    {o} = np.empty({s.out_arena[d]}, {NP[d]})" for d, o in zip(outs, o_names)]
    lines.append(f"    losses = np.empty(n, {NP[loss_dtype]})")
    lines.append("    for c in range(n):")
    for k, i in enumerate(s.sources.inputs):
        x = inputs[k]
        case = f"c if {x}.shape[0] != 1 else 0"
        if g.nodes[i].type.rank == 0:
            lines.append(f"        j{k} = {case}")
            lines.append(f"        x{k} = {x}[j{k}:j{k} + 1]")
        else:
            lines.append(f"        x{k} = {x}[{case}]")
    lines.append("        lr = lrs[c]")
    lines.append(f"        {body_call}")
    lines.append(f"        {update_call}")
    lines.append(f"        losses[c] = {loss_out}[{loss_offset}]")
    lines.append("    return losses")
    lines.append("")
    # signatures
    head_types = ([_array_type(d, 1, True) for d in dtypes]
                  + [_array_type(g.nodes[i].type.dtype, 1, True) for i in s.constants])
    tail_types = ([_array_type(d, 1, False) for d in dtypes]
                  + [_array_type(d, 1, False) for _ in rule.state_keys for d in dtypes]
                  + [_array_type("float64", 1, False), "types.Array(types.uint8, 1, 'C')"])
    step_types = (head_types + [_array_type(g.nodes[i].type.dtype, g.nodes[i].type.rank, True)
                                for i in s.sources.inputs] + tail_types + ["types.float64"])
    steps_types = (head_types + [_array_type(g.nodes[i].type.dtype, g.nodes[i].type.rank + 1,
                                             True) for i in s.sources.inputs]
                   + tail_types + [_array_type("float64", 1, True)])
    lines.append(f"STEP_SIGNATURE = {_tuple(step_types)!r}")
    lines.append(f"STEPS_SIGNATURE = {_tuple(steps_types)!r}")
    lines.append(f"HELPERS = {tuple(helpers)!r}")
    lines.append("")
    return lines


def _tuple(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if items else "") + ")"


__all__ = ["generate"]

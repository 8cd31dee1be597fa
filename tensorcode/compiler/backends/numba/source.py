"""Pieces of entry-point source every section of a plan module writes the same way: a
function's head from its ``EntryPoint``, the call of ``body``, allocations of arenas, and
a case's inputs inside a loop over cases (``module.py`` and ``step.py`` both use them)."""

from __future__ import annotations

from ...lower.program import Array, EntryPoint, Program
from .loops import NP


def head(entry: EntryPoint) -> str:
    return f"def {entry.name}({', '.join(a.name for a in entry.arguments)}):"


def body_call(program: Program) -> str:
    """The call of ``body`` every entry point makes (inputs as their flat ``x..``)."""
    names = ([a.name for a in program.parameters + program.constants]
             + [f"x{k}" for k in range(len(program.inputs))]
             + [a.name for a in program.scratch + program.outputs])
    return f"body({', '.join(names)})"


def allocate(arrays: tuple[Array, ...], rows: str = "") -> list[str]:
    """Lines allocating ``arrays`` (with ``rows``, one row of each per case)."""
    return [f"    {a.name}{'_all' if rows else ''} = np.empty("
            f"{f'({rows}, {a.size})' if rows else a.size}, {NP[a.dtype]})" for a in arrays]


def case_inputs(p: Program) -> list[str]:
    """Lines binding case ``c``'s flat inputs ``x..`` inside a loop over cases (an input
    with one case serves every case)."""
    lines = []
    for k, x in enumerate(p.inputs):
        case = f"c if {x.name}.shape[0] != 1 else 0"
        if not x.shape:  # a scalar per case: a one-element slice
            lines.append(f"        j{k} = {case}")
            lines.append(f"        x{k} = {x.name}[j{k}:j{k} + 1]")
        else:
            lines.append(f"        x{k} = {x.name}[{case}]")
    return lines


__all__ = ["head", "body_call", "allocate", "case_inputs"]

"""A distilled router as a shared library (``Distillation.export``).

The program's plan is lowered with the llvm backend for its outputs (the plan the
default executor runs, reused when it is already in this process) and exported by
``aot.export``: the inputs named and ordered as the input contract, the outputs as the
output contract, and the ``covered`` root kept inside the library, which turns it into
the covered flag exactly as ``Router`` decides (``cases.claims``: covered above
``CLAIM_THRESHOLD`` and finite, every output finite) and refuses a non-finite input as
the router's validator does.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..aot.export import export_library, plan_library
from ..aot.library import Library, Port
from ..compiler.backends import LLVM
from .cases import CLAIM_THRESHOLD, COVERED


def algorithm_library(algorithm: Any, name: str, router: bool = True) -> Library:
    """The ``Library`` of a compiled ``Algorithm`` (a ``Distillation``'s program, or a
    saved algorithm): a router (``router``, see the module docstring) answering the
    contract's outputs but ``covered``, or a plan answering every output."""
    program = algorithm.program
    names = list(program.outputs)
    plan = program.network.entry([program.outputs[n] for n in names]).lower(LLVM)
    by_index = {symbol.index: name for name, symbol in program.inputs.items()}
    read = [by_index[symbol.index] for symbol in plan.inputs()]
    library = plan_library(plan, algorithm.parameter_table(), name, read, names)
    inputs = [Port(input_name, "float64", tuple(shape),
                   slot=read.index(input_name) if input_name in read else None)
              for input_name, shape in algorithm.inputs.items()]
    if not router:
        return dataclasses.replace(library, inputs=inputs)
    ports = {port.name: port for port in library.outputs}
    covered = ports.get(COVERED)
    return dataclasses.replace(
        library, kind="router", inputs=inputs,
        outputs=[ports[n] for n in names if n != COVERED],
        covered=None if covered is None else (covered.arena, covered.offset),
        threshold=CLAIM_THRESHOLD)


def export_router(distillation: Any, directory: str | os.PathLike, name: str = "router",
                  force: bool = False) -> dict:
    """``distillation`` exported as a router library into ``directory``."""
    return export_library(algorithm_library(distillation.program, name), directory, force)


__all__ = ["algorithm_library", "export_router"]

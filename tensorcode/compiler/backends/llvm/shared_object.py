"""A plan's object code for linking into a shared library (``tensorcode export``).

``position_independent_object(program, approximate)`` renders the plan's module with
the code generator the backend uses (``codegen.render``), runs the same pass pipeline
at ``OPT_LEVEL`` for the same CPU and features (``objects.compile_object``) and emits it
position-independent with the small code model, which a shared library needs (the
in-process object is emitted for MCJIT's JIT code model, whose absolute relocations a
linker cannot place in a ``.so``). Only how addresses are formed differs: the IR, the
optimizer and the instructions that compute are the same, so the library's results are
the in-process plan's bit for bit (the export's tests check it).

``plan_facts(program)`` says what the library's wrapper must know to call the object:
the entry points, the argument layout, the scratch and output sizes, the status
messages, and the BLAS routines and libm functions it calls.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ....errors import CompileError
from .interface import BLAS_PREFIX, ENTRIES, Layout, layout_of

if TYPE_CHECKING:  # pragma: no cover
    from ...lower.program import Program

#: the entry point the export calls (once per case; ``tc_batch`` runs the same body)
RUN_ENTRY = "tc_run"


@functools.cache
def _pic_machine() -> Any:
    from .objects import OPT_LEVEL, runtime

    llvm = runtime().llvm
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=OPT_LEVEL, reloc="pic", codemodel="default")


def target_facts() -> dict[str, str]:
    """The triple, CPU and CPU features the object is compiled for: a library runs only
    on a CPU with these features."""
    from .objects import runtime

    llvm = runtime().llvm
    return {"triple": llvm.get_process_triple(), "cpu": llvm.get_host_cpu_name(),
            "features": llvm.get_host_cpu_features().flatten()}


def position_independent_object(program: Program, approximate: bool) -> bytes:
    """``program``'s module (a forward plan: a step plan is refused) compiled as the
    backend compiles it, emitted position-independent; its undefined symbols are checked
    against the backend's allowlist."""
    from .codegen import render
    from .objects import check_symbols, compile_object

    if program.step is not None:
        raise CompileError("a step plan updates its parameters in place; export a forward "
                           "plan (lower the entry without an optimizer step)")
    module, _ = render(program, approximate)
    data = compile_object(module, machine=_pic_machine())
    check_symbols(data)
    return data


def plan_facts(program: Program, data: bytes) -> tuple[Layout, list[str]]:
    """The argument layout of ``program``'s module and the BLAS symbols ``data`` (its
    object) leaves undefined."""
    from .objects import undefined_symbols

    blas = sorted(s for s in set(undefined_symbols(data)) if s.startswith(BLAS_PREFIX))
    return layout_of(program), blas


__all__ = ["ENTRIES", "RUN_ENTRY", "plan_facts", "position_independent_object",
           "target_facts"]

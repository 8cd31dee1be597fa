"""What a plan object's caller and the plan cache need to know, without building IR.

A warm process loads plans from the cache and calls them; it needs the entry points'
names, the argument layout of a program's module (``layout_of``: cheap, no IR, read
from the typed ``Program``), the
symbols an object may call (``BLAS_PREFIX``, ``LIBM``) and whether an optimizer's rule
can be lowered (``rule_api``), but not the code generator: nothing here imports
``llvmlite.ir``, so a process that only loads plans never does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from ....errors import CompileError
from ...lower.kernels import Arena, Kernel, OneHotKernel, ScatterAddKernel, TakeKernel
from ...lower.loops import index_message
from ...lower.program import Program

ENTRIES = ("tc_run", "tc_batch", "tc_run_objects")
#: where a NumPy array object keeps its data pointer: ``PyArrayObject`` starts with the
#: object header (a reference count and a type pointer), then ``data`` (what
#: ``PyArray_DATA`` reads). ``tc_run_objects`` reads its inputs' and outputs' data there;
#: ``program`` calls it only where reading there is proven at import
ARRAY_DATA_OFFSET = 2 * struct.calcsize("P")
#: a step plan's entry points (``tc_step``: body then update; ``tc_steps``: K of them)
STEP_ENTRIES = ("tc_step", "tc_steps")
#: the entry point a profiled plan adds (``profile.py``, ``backends/profiling.py``)
PROFILE_ENTRY = "tc_profile"


@dataclass
class Layout:
    """What the caller of a rendered module must know: ``arguments`` the arenas in
    pointer order (parameters, constants, inputs, scratch, outputs), the element count
    of each scratch and output arena, and ``errors`` the message of each nonzero status
    (status ``s`` is ``errors[s - 1]``)."""

    arguments: list[Arena]
    scratch: dict[str, int]
    outputs: dict[str, int]
    errors: list[str] = field(default_factory=list)


def layout_of(program: Program) -> Layout:
    """The argument layout of ``program``'s module (cheap: no IR is built)."""
    arguments = [a.arena for a in program.sources]
    scratch = {a.dtype: a.size for a in program.scratch}
    arguments += [Arena("scratch", d) for d in scratch]
    outputs = {a.dtype: a.size for a in program.outputs}
    arguments += [Arena("output", d) for d in outputs]
    errors: list[str] = []
    for kernel in program.kernels:
        message = range_error(program, kernel)
        if message is not None and message not in errors:
            errors.append(message)
    return Layout(arguments, scratch, outputs, errors)


def range_error(program: Program, kernel: Kernel) -> str | None:
    """The message of an index out of range in ``kernel`` (None: it reads no index), from
    the graph of ``program``."""
    g = program.graph
    if isinstance(kernel, TakeKernel):
        node = g.nodes[kernel.nodes[0]]
        size = g.nodes[node.inputs[0]].type.shape[kernel.axis]
    elif isinstance(kernel, ScatterAddKernel):
        size = kernel.size
    elif isinstance(kernel, OneHotKernel):
        size = kernel.n
    else:
        return None
    return index_message(kernel.kind, size)


#: an optimizer's eager update module's one entry point
EAGER_ENTRY = "tc_update"

#: the prefix of the Fortran BLAS symbols of the OpenBLAS SciPy's wheel bundles (the
#: library ``scipy.linalg.cython_blas`` calls, so results match Numba's ``np.dot``)
BLAS_PREFIX = "scipy_"

#: the worker pool's entry point a partitioned loop calls (``backends/pool.py``)
POOL_RUN = "tc_pool_run"

#: the libm functions a lowering calls by name (float64, float32), per op
LIBM = {"tanh": ("tanh", "tanhf"), "log1p": ("log1p", "log1pf"), "erf": ("erf", "erff")}


def rule_api() -> Any:
    """The rule-graph interface of ``compiler/update.py``."""
    from ...lower import update

    needed = ("CALL", "SLOT", "ELEMENT", "CONST", "SCALAR_INPUTS", "closure")
    if not all(hasattr(update, name) for name in needed):
        raise CompileError("the llvm backend lowers optimizer steps from update rules "
                           "recorded as graphs; this optimizer's rule is not one: lower "
                           "the step plan with backend='numba'")
    return update


__all__ = ["ARRAY_DATA_OFFSET", "BLAS_PREFIX", "EAGER_ENTRY", "ENTRIES", "LIBM",
           "STEP_ENTRIES", "Layout", "layout_of", "range_error", "rule_api"]

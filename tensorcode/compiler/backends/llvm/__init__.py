"""The ``llvm`` backend: a ``Program`` rendered to LLVM IR, compiled by llvmlite, loaded natively.

``LlvmBackend.prepare(program, approximate)`` returns an ``LlvmProgram``:

1. the key: a hash of the lowered IR (``lower.program.ir_key``), ``approximate``, the
   versions and CPU (``environment_key``) and the source of the code generator;
2. a program already loaded in this process is reused;
3. else the authenticated cache entry ``l_<key>.o`` (``cache.py``) is loaded when its
   tag is valid; an entry that exists without a valid tag is reported once, counted
   (``untrusted_entries``) and recompiled;
4. else the program is rendered (``codegen.py``), compiled (``objects.py``) and
   written to the cache. A fresh object and a cached one load the same way
   (``objects.load``): symbols checked against the allowlist, an MCJIT engine, the
   entry points called through ``ctypes``. Numba is never imported.

``compile_stats()`` counts ``compiled`` and ``cache_loaded`` plans as for Numba, and
``llvm_compile_ms`` the milliseconds spent compiling; ``TENSORCODE_LOG_COMPILES=1``
prints one line per compile with its time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ....errors import CacheError
from ...lower.program import ir_key

if TYPE_CHECKING:  # pragma: no cover
    from ...lower.program import Program
    from .program import LlvmProgram

_PROGRAMS: dict[str, Any] = {}
_LOCK = threading.Lock()

@functools.cache
def environment_key() -> str:
    """Versions, CPU and generator source that compiled plan objects depend on."""
    import llvmlite
    import llvmlite.binding as llvm
    import numpy as np

    from ....version import __version__
    from ..plan_directory import source_digest
    from .objects import OPT_LEVEL

    try:
        cpu = llvm.get_host_cpu_name() + ":" + llvm.get_host_cpu_features().flatten()
    except Exception:  # pragma: no cover - an LLVM without feature detection
        cpu = llvm.get_host_cpu_name()
    return json.dumps({"tensorcode": __version__, "llvmlite": llvmlite.__version__,
                       "llvm": ".".join(map(str, llvm.llvm_version_info)), "cpu": cpu,
                       "numpy": np.__version__, "python": sys.version_info[:2],
                       "opt": OPT_LEVEL, "generator": source_digest(_GENERATOR_SOURCES)},
                      sort_keys=True)


#: the packages (and single modules) whose source decides what a plan's object does:
#: this backend, the schedule, kernels, loop programs (with the float32 approximations)
#: and fusion it renders, the op registry and the Philox constants, and the tiled
#: product's IR it shares with the Numba backend
_GENERATOR_SOURCES = ("tensorcode.compiler.backends.llvm", "tensorcode.compiler.lower",
                      "tensorcode.compiler.core", "tensorcode.compiler.backends.tiles")


def plan_key(program: Program, approximate: bool, profile: bool = False) -> str:
    step = program.step
    text = f"llvm\n{environment_key()}\napproximate={approximate}\n{ir_key(program)}"
    if profile:
        text += "\nprofile"
    if step is not None:
        text += f"\nstep\n{step.key()}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class LlvmBackend:
    """The ``Backend`` that renders LLVM IR and loads object code (cached)."""

    name = "llvm"
    approximates = True

    def prepare(self, program: Program, approximate: bool) -> LlvmProgram:
        return prepared(program, approximate)

    def update(self, rule: Any, dtype: str) -> Callable[..., None]:
        """An optimizer's eager update for ``dtype``, compiled (``eager_update``)."""
        return eager_update(rule, dtype)

    def shared_object(self, program: Program, approximate: bool) -> dict[str, Any]:
        """What ``tensorcode export`` links into a library (``shared_object.py``):
        ``object`` the plan's code, position-independent; ``entry`` the symbol to call;
        ``layout`` its argument layout; ``blas`` the BLAS symbols it calls; ``target``
        the triple, CPU and features it was compiled for."""
        from .shared_object import RUN_ENTRY, plan_facts, position_independent_object, target_facts

        data = position_independent_object(program, approximate)
        layout, blas = plan_facts(program, data)
        return {"object": data, "entry": RUN_ENTRY, "layout": layout, "blas": blas,
                "target": target_facts()}

    def blas_library(self) -> str | None:
        """The path of the BLAS plan objects call (``threads.scipy_openblas``), or None."""
        from ..threads import scipy_openblas

        return scipy_openblas()


def prepared(program: Program, approximate: bool) -> LlvmProgram:
    """The loaded program of ``program`` (a step plan's with its update; see the module
    docstring). The loader reads the typed ``Program`` alone: argument layout, sizes,
    roots and step."""
    from ..profiling import active
    from .interface import layout_of, rule_api

    step = program.step
    if step is not None:
        rule_api()  # a rule this backend can lower, before any work
    profile = active()
    key = plan_key(program, approximate, profile)
    with _LOCK:
        found = _PROGRAMS.get(key)
        if found is not None:
            _count("memory_hits")
            return found
        layout = layout_of(program)
        addresses = _addresses(program, approximate, key, profile)
        made = _program(program, approximate, key, layout, addresses, profile)
        _PROGRAMS[key] = made
    if profile:
        _register_profile(program, key, addresses)
    return made


def _register_profile(program: Program, key: str, addresses: dict[str, int]) -> None:
    """Record a profiled plan's counters with ``backends.profiling``."""
    from ...lower.cost import kernel_cost
    from ...lower.partition import kernel_chunks
    from ..profiling import register
    from .program import profile_reader

    costs = [kernel_cost(program.graph, kernel) for kernel in program.kernels]
    titles = [kernel.title for kernel in program.loops]
    register(key, titles, costs, profile_reader(addresses, len(costs)),
             [kernel_chunks(kernel) for kernel in program.loops])


def _render(program: Program, approximate: bool, profile: bool = False) -> Any:
    """``program`` rendered to an LLVM module (and its layout), each kernel call timed
    when ``profile``."""
    from .codegen import render

    return render(program, approximate, profile)


def _program(program: Program, approximate: bool, key: str, layout: Any,
             addresses: dict[str, int], profile: bool = False) -> LlvmProgram:
    from .program import LlvmProgram

    step = program.step
    input_shapes = [a.shape for a in program.inputs]
    head_sizes = [a.size for a in program.parameters + program.constants]
    outs = list(layout.outputs)
    picks = [(outs.index(root.dtype), root.offset) for root in program.roots]

    def source() -> str:
        return str(_render(program, approximate, profile)[0])
    made = LlvmProgram(key, layout, addresses, input_shapes, head_sizes, picks, source)
    if step is not None:
        made.set_step(step.loss, len(step.rule.state_keys), [a.size for a in program.updates],
                      max([t[0] + 1 for t in step.slots], default=0))
    return made


def _count(name: str, n: int = 1) -> None:
    from ..counters import count

    count(name, n)


def _compile(render: Callable[[], Any], key: str, what: str) -> bytes:
    """Render a module (``render()``), compile it and count and log the compile;
    ``what`` says what it is in the log line."""
    from .objects import compile_object

    start = time.perf_counter()
    module = render()
    rendered = time.perf_counter()
    data = compile_object(module)
    done = time.perf_counter()
    milliseconds = round((done - start) * 1000)
    _count("compiled")
    _count("llvm_compile_ms", milliseconds)
    if os.environ.get("TENSORCODE_LOG_COMPILES"):
        print(f"tensorcode: llvm compiled {what} {key} in {milliseconds} ms (IR "
              f"{int((rendered - start) * 1000)} ms, LLVM "
              f"{int((done - rendered) * 1000)} ms)", file=sys.stderr)
    return data


def _addresses(program: Program, approximate: bool, key: str, profile: bool = False
               ) -> dict[str, int]:
    """A plan's entry points (see ``_entry_addresses``; a profiled plan's adds
    ``tc_profile``)."""
    from .interface import ENTRIES, PROFILE_ENTRY, STEP_ENTRIES

    entries = ENTRIES + (PROFILE_ENTRY,) if profile else None
    return _entry_addresses(key, lambda: _compile(
        lambda: _render(program, approximate, profile)[0], key,
        f"plan ({len(program.kernels)} kernels)"), entries, STEP_ENTRIES)


def _entry_addresses(key: str, compile_object: Callable[[], bytes],
                     entries: tuple[str, ...] | None = None,
                     optional: tuple[str, ...] = ()) -> dict[str, int]:
    """The entry points' addresses (a plan's by default, else ``entries`` and those of
    ``optional`` the object defines): the cache
    entry's object when it is valid, else a fresh compile (written to the cache when it
    can be used)."""
    from ..plan_directory import Untrusted, locked, plans_directory, warn_once
    from . import cache
    from .objects import UntrustedObject, load

    def load_entries(data: bytes | bytearray) -> dict[str, int]:
        return load(data) if entries is None else load(data, entries, optional)

    try:
        directory = plans_directory()
        cache.secret()
    except CacheError as error:
        warn_once("untrusted-cache", f"tensorcode: {error}; compiling plans in memory "
                                      "(see docs/compiler.md, 'Trusting a cache directory')")
        _count("memory_compiled")
        return load_entries(compile_object())

    def refused(problem: str, counted: bool = True) -> None:  # one warning per entry
        if counted:
            _count("untrusted_entries")
            _count("corrupt_entries")
        warn_once(key + ":llvm", f"tensorcode: plan cache entry "
                                  f"{cache.entry_path(directory, key)} was not used "
                                  f"({problem}); recompiling it")

    try:
        with locked(directory / f"l_{key}.lock"):
            try:
                data = cache.read(directory, key)
            except ValueError as error:
                data = None
                refused(str(error))
            if data is not None:
                try:
                    addresses = load_entries(data)
                except UntrustedObject as error:
                    refused(str(error))
                else:
                    _count("cache_loaded")
                    return addresses
            compiled = compile_object()
            addresses = load_entries(compiled)
            try:
                cache.write(directory, key, compiled)
            except ValueError as error:  # a directory at the entry's path: not cached
                refused(str(error), counted=False)
            return addresses
    except Untrusted as error:  # the entry's lock: not a regular file of ours
        refused(str(error))
        _count("memory_compiled")
        return load_entries(compile_object())


_UPDATES: dict[tuple[str, str], Callable[..., None]] = {}


def eager_update(rule: Any, dtype: str) -> Callable[..., None]:
    """An optimizer's eager update for ``dtype`` (``update.eager_module``), compiled or
    loaded from the plan cache on first use: ``update(P, G, U, S0.., K, PS, N, GS, steps,
    present, lr)`` as every backend's ``update`` (``P``, ``G`` and the slot tables read;
    ``U``, the states, ``steps`` and ``present`` written)."""
    memo = (rule.key(), dtype)
    found = _UPDATES.get(memo)
    if found is not None:
        return found
    from .interface import EAGER_ENTRY
    from .program import eager_call
    from .update import eager_module

    key = hashlib.sha256(f"llvm-update\n{environment_key()}\n{memo[0]}\n{dtype}"
                         .encode()).hexdigest()[:32]
    with _LOCK:
        found = _UPDATES.get(memo)
        if found is None:
            addresses = _entry_addresses(
                key, lambda: _compile(lambda: eager_module(rule, dtype), key, "update"),
                (EAGER_ENTRY,))
            found = _UPDATES[memo] = eager_call(addresses[EAGER_ENTRY], dtype,
                                                len(rule.state_keys))
    return found


BACKEND = LlvmBackend()

__all__ = ["BACKEND", "LlvmBackend", "prepared", "eager_update", "plan_key", "environment_key"]

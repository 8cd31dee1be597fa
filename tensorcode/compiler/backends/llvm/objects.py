"""Object code: compiling a rendered module, and loading an object into this process.

``compile_object(module)`` optimizes the module with LLVM's pass pipeline at
``OPT_LEVEL`` and emits a relocatable object for this CPU. ``load(data)`` checks the
object's undefined symbols against ``ALLOWED`` (by name: the libm functions, LLVM's
memory builtins and the BLAS routines the generator emits calls to) and refuses any
other (``UntrustedObject``) before the object is added to an MCJIT engine; it returns
the entry points' addresses. A fresh compile and a cached object are loaded the same
way, so every process calls plan code through one path, without Numba.

BLAS is the OpenBLAS SciPy's wheel bundles (``scipy.libs``), loaded from its file: the
library ``scipy.linalg.cython_blas`` calls, which is what Numba's ``np.dot`` ends up in,
so matrix products agree with the Numba backend bit for bit. Only ELF objects (Linux)
are produced and loaded.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

from ....errors import CompileError
from ..threads import BLAS_THREADS, ensure_pool, scipy_openblas, set_blas_threads
from .interface import BLAS_PREFIX, ENTRIES, LIBM, POOL_RUN, STEP_ENTRIES

#: the optimization level plans compile at (measured: see docs/compiler.md)
OPT_LEVEL = 2
#: LLVM's loop unroller stays off: it fully unrolled the small constant-trip loops of a
#: plan (layers of 16 units, a bias's update) and the SLP vectorizer then worked through
#: the copies, which more than doubled W2's compile (385 -> 174 ms) for no measured gain;
#: warm steps W1-W4 and GPT-2's forward and decode stayed within noise of the unrolled
#: code, alternated in one process. The loop vectorizer still interleaves.
LOOP_UNROLLING = False

_BLAS = {f"{BLAS_PREFIX}{kind}{name}_" for kind in "sd" for name in ("gemm", "dot")}
#: libm: what the lowerings call by name (``interface.LIBM``) and what LLVM may turn its
#: intrinsics into
_LIBM = {name + suffix for name in ("exp", "log", "sin", "cos", "pow", "sqrt", "floor",
                                    "fabs", "exp2", "log2", "log10", "expm1", "sincos", "fma")
         for suffix in ("", "f")} | {symbol for pair in LIBM.values() for symbol in pair}
#: every symbol a plan object may leave undefined; any other refuses the object
ALLOWED = frozenset(_BLAS | _LIBM | {"memset", "memcpy", "memmove", POOL_RUN})


class UntrustedObject(Exception):
    """An object that must not be loaded (the text says why)."""


def undefined_symbols(data: bytes | bytearray) -> list[str]:
    """The undefined symbols of a little-endian ELF64 relocatable object;
    ``UntrustedObject`` for anything else."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise UntrustedObject("not a little-endian ELF64 object")
    try:
        (section_offset,) = struct.unpack_from("<Q", data, 0x28)
        entry_size, count = struct.unpack_from("<HH", data, 0x3A)
        if entry_size != 64 or section_offset + count * 64 > len(data):
            raise UntrustedObject("malformed ELF section table")
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * 64)
                    for i in range(count)]
        names = []
        for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
            if kind != 2:  # SHT_SYMTAB
                continue
            if symbol_size != 24 or offset + size > len(data) or link >= count:
                raise UntrustedObject("malformed ELF symbol table")
            strings = sections[link][4]
            for j in range(1, size // 24):
                name, _, _, index, _, _ = struct.unpack_from("<IBBHQQ", data, offset + j * 24)
                if index == 0 and name:  # SHN_UNDEF
                    end = data.index(b"\0", strings + name)
                    names.append(data[strings + name:end].decode("ascii"))
        return names
    except (struct.error, ValueError, UnicodeDecodeError) as error:
        raise UntrustedObject(f"malformed ELF object ({error})") from None


def check_symbols(data: bytes | bytearray) -> None:
    """Refuse an object whose undefined symbols are not all in ``ALLOWED``."""
    refused = sorted(set(undefined_symbols(data)) - ALLOWED)
    if refused:
        raise UntrustedObject(f"the object needs symbols outside the allowlist: "
                              f"{', '.join(refused[:5])}")


# ---------------------------------------------------------------------------------------
# LLVM, started once per process


class _Runtime:
    def __init__(self) -> None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.llvm = llvm
        target = llvm.Target.from_default_triple()
        self.triple = llvm.get_process_triple()
        self.machine = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=OPT_LEVEL, codemodel="jitdefault")
        self.engines: list[Any] = []  # kept alive: their code is called
        self.lock = threading.Lock()
        self.blas_loaded = False
        self.pool_loaded = False

    def load_pool(self) -> None:
        """Start the worker pool (sized by ``threads``) and name its ``tc_pool_run`` to
        the linker, once per process."""
        address = ensure_pool()
        if not self.pool_loaded:
            self.llvm.add_symbol(POOL_RUN, address)
            self.pool_loaded = True

    def load_blas(self) -> None:
        if self.blas_loaded:
            return
        library = scipy_openblas()
        if library is None:
            raise CompileError("the llvm backend calls BLAS from the OpenBLAS SciPy "
                               "bundles, and it was not found; install scipy from its "
                               "wheel, or lower with backend='numba'")
        self.llvm.load_library_permanently(library)
        set_blas_threads(BLAS_THREADS)
        self.blas_loaded = True


_RUNTIME: _Runtime | None = None
_RUNTIME_LOCK = threading.Lock()


def runtime() -> _Runtime:
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = _Runtime()
        return _RUNTIME


def compile_object(module: Any, machine: Any = None) -> bytes:
    """The module optimized at ``OPT_LEVEL`` and emitted as an object for this CPU (by
    ``machine`` when given: the export's position-independent one)."""
    rt = runtime()
    machine = rt.machine if machine is None else machine
    llvm = rt.llvm
    module.triple = rt.triple
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    tuning = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = LOOP_UNROLLING
    builder = llvm.create_pass_builder(machine, tuning)
    manager = builder.getModulePassManager()
    manager.run(parsed, builder)
    return bytes(machine.emit_object(parsed))


def load(data: bytes | bytearray, entries: tuple[str, ...] = ENTRIES,
         optional: tuple[str, ...] = STEP_ENTRIES) -> dict[str, int]:
    """Check ``data``'s symbols, add it to a fresh engine and return the address of each
    of ``entries`` (a plan's ``ENTRIES`` by default), and of ``optional`` (a step plan's
    ``STEP_ENTRIES``) when the object defines them. ``data`` may be the buffer a cache
    entry was read into: LLVM reads it in place, no copy is made."""
    check_symbols(data)
    rt = runtime()
    undefined = undefined_symbols(data)
    if any(s.startswith(BLAS_PREFIX) for s in undefined):
        rt.load_blas()
    if POOL_RUN in undefined:
        rt.load_pool()
    llvm = rt.llvm
    with rt.lock:
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), rt.machine)
        buffer = data if isinstance(data, bytes) else \
            (ctypes.c_char * len(data)).from_buffer(data)
        engine.add_object_file(llvm.ObjectFileRef.from_data(buffer))
        engine.finalize_object()
        addresses = {name: int(engine.get_function_address(name)) for name in entries}
        if not all(addresses.values()):
            raise UntrustedObject("the object does not define the expected entry points")
        for name in optional:
            address = int(engine.get_function_address(name))
            if address:
                addresses[name] = address
        rt.engines.append(engine)
    return addresses


__all__ = ["ALLOWED", "OPT_LEVEL", "UntrustedObject", "check_symbols", "compile_object",
           "load", "runtime", "undefined_symbols"]

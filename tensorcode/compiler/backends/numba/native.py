"""Plan code as a native object file, loaded in a fresh process without importing Numba.

Importing Numba and starting its CPU target costs a fresh process most of its time to a
first step, even when the plan cache is warm. So when the Numba backend compiles a plan it
also builds a C-callable entry over the plan's ``body`` (and a step plan's ``update``):
``native(mode, pointers.., lr) -> status``, which wraps raw pointers as arrays
(``numba.carray``), allocates nothing and catches every exception (status 1). Its machine
code is stored in the plan cache as ``p_<key>.native`` beside a manifest
``p_<key>.native.json`` holding its SHA-256 and the symbol to call.

A later process loads that object with llvmlite alone (an MCJIT engine,
``add_object_file``) and calls it through ``ctypes`` with the arrays' data pointers
(``NativeProgram``); Numba is imported only for the entry points the object lacks
(``batch()``, ``scalars()``, ``run_steps``) or to re-run a call whose native run reported
an error, so the error is Numba's own. Every undefined symbol of the object is resolved
before the object is added, from a fixed list of providers, and an object needing anything
else is refused (``native_refused`` in ``compile_stats()``) and the plan loads through
Numba:

- the process itself: the Python C API and the C library (``memset``, ``libm``);
- Numba's C helper extension ``_helperlib`` (the ``numba_*`` helpers: GIL handling,
  exception records, ``numba_xxgemm`` and friends), loaded from its file without running
  Numba's Python package (``"numba" not in sys.modules`` afterwards);
- ``numba_xxgemm`` for ``float32``/``float64`` rebound to the ``sgemm``/``dgemm`` of the
  OpenBLAS that SciPy's wheel bundles (the library Numba's own helper ends up calling
  through ``scipy.linalg.cython_blas``, so results are the same bits), without importing
  SciPy; when that library is not found, Numba's helper is used as it is;
- ``NRT_Free`` (the C library's ``free``) and ``NRT_MemInfo_call_dtor`` (``abort``): the
  object never allocates (an allocation needs an ``NRT_*`` allocator, which no provider
  offers, so such an object is refused), so no array it sees owns memory to release.

Integrity is the plan cache's: both files regular, owned by the user, writable by no one
else, the object's SHA-256 checked before it is used, files written atomically; the
manifest is read with the strict JSON reader and nothing in it is executed or unpickled.
Only ELF objects (Linux) are produced and loaded; elsewhere plans load through Numba.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import importlib.util
import os
import pathlib
import re
import struct
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .source import body_call
from .step import helpers

if TYPE_CHECKING:  # pragma: no cover
    from ...lower.program import Program

FORMAT = "tensorcode.native/1"
#: the environment variable that turns the native loader off (``0``)
SWITCH = "TENSORCODE_NATIVE_PLANS"
_SYMBOL = re.compile(r"[A-Za-z0-9_.$]{1,4096}\Z")


def enabled() -> bool:
    """Whether plans are built and loaded as native objects (``TENSORCODE_NATIVE_PLANS``
    unset or not ``0``; ELF platforms only)."""
    return os.environ.get(SWITCH, "1") not in ("0", "false", "no") and \
        sys.platform.startswith("linux")


# ---------------------------------------------------------------------------------------
# the pointer list, shared by the generator and the loader


def pointers(program: Program) -> list[tuple[str, str, int, bool]]:
    """The native entry's pointer arguments, in order, each ``(name, dtype, elements,
    read-only)``: parameters, constants, inputs (flat, ``x..``), a step plan's writable
    parameters, state buffers, ``steps`` and ``present``, then the scratch and output
    arenas; ``lr`` follows them. The generator and the loader both read this list."""
    p = program
    found = [(a.name, a.dtype, a.size, True) for a in p.parameters + p.constants]
    found += [(f"x{k}", a.dtype, a.size, True) for k, a in enumerate(p.inputs)]
    if p.step is not None:
        found += [(a.name, a.dtype, a.size, False) for a in p.updates + p.states]
        slots = len(p.step.slots)
        found += [("steps", "float64", slots, False), ("present", "uint8", slots, False)]
    found += [(a.name, a.dtype, a.size, False) for a in p.scratch + p.outputs]
    return found


# ---------------------------------------------------------------------------------------
# generating and building (where Numba is imported)


def wrapper_source(program: Program) -> str:
    """The source of ``native(mode, ..)``: every array a ``carray`` over its pointer with
    its literal size, ``body`` (mode 0), then a step plan's ``update`` (mode 1). Names
    and numbers only, all made here or by the ``Program``."""
    arrays = pointers(program)
    names = [f"a{k}" for k in range(len(arrays))]
    lines = [f"def native(mode, {''.join(n + ', ' for n in names)}lr):"]
    # what the plan's entry points pass as read-only arrays is wrapped read-only too, so
    # ``body`` is called with the argument types ``run`` compiled it for: Numba reuses
    # that compiled body instead of compiling the kernels again
    for pointer, (name, _, size, read_only) in zip(names, arrays):
        array = f"carray({pointer}, ({size},))"
        lines.append(f"    {name} = {f'readonly({array})' if read_only else array}")
    lines.append("    try:")
    lines.append(f"        {body_call(program)}")
    if program.step is not None:
        update = ([a.name for a in program.updates] + [a.name for a in program.outputs]
                  + [a.name for a in program.states])
        lines.append("        if mode == 1:")
        lines.append(f"            {helpers(program)[-1]}({', '.join(update)}, steps, present, "
                     "lr)")
    lines.append("    except Exception:")
    lines.append("        return 1")
    lines.append("    return 0")
    return "\n".join(lines) + "\n"


def _readonly_intrinsic() -> Any:
    """A Numba intrinsic viewing an array as read-only (the same data, the read-only
    array type): a ``carray`` can only be writable."""
    from numba.core.extending import intrinsic
    from numba.core.imputils import impl_ret_borrowed

    @intrinsic
    def readonly(typingctx: Any, array: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return impl_ret_borrowed(context, builder, signature.return_type, args[0])
        return array.copy(readonly=True)(array), codegen

    return readonly


def build_object(module: Any, program: Program) -> tuple[bytes, str]:
    """Compile ``native`` over the loaded plan ``module`` (its ``body`` and ``update``
    already jitted) with ``numba.cfunc`` and emit its machine code as an object file:
    ``(object bytes, symbol to call)``."""
    import llvmlite.binding as llvm
    import numba
    from numba import types

    namespace = dict(module.__dict__)
    namespace["carray"] = numba.carray
    namespace["readonly"] = _readonly_intrinsic()
    source = wrapper_source(program)
    exec(compile(source, "<tensorcode native entry>", "exec", dont_inherit=True), namespace)
    signature = types.int32(types.int32,
                            *[types.CPointer(getattr(types, d))
                              for _, d, _, _ in pointers(program)],
                            types.float64)
    entry = numba.cfunc(signature, nogil=True, error_model="numpy")(namespace["native"])
    machine = _target_machine()
    code = llvm.parse_assembly(entry.inspect_llvm())
    if any(f.name == "numba_xxgemm" and f.is_declaration for f in code.functions):
        # matrix products call SciPy's bundled OpenBLAS directly (see the module doc)
        code.link_in(llvm.parse_assembly(_GEMM_IR.format(prefix=_BLAS_PREFIX)))
        code.get_function("numba_xxgemm").linkage = "internal"
    return bytes(machine.emit_object(code)), str(entry.native_name)


# ---------------------------------------------------------------------------------------
# ELF: which symbols an object needs


def undefined_symbols(data: bytes) -> list[str]:
    """The names of the undefined symbols of a little-endian ELF64 relocatable object
    (what the loader must provide); ``ValueError`` for anything else."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 object")
    (section_offset,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    if entry_size != 64 or section_offset + count * 64 > len(data):
        raise ValueError("malformed ELF section table")
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * 64)
                for i in range(count)]
    names = []
    for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        if symbol_size != 24 or offset + size > len(data) or link >= count:
            raise ValueError("malformed ELF symbol table")
        strings = sections[link][4]
        for j in range(1, size // 24):
            name, _, _, index, _, _ = struct.unpack_from("<IBBHQQ", data, offset + j * 24)
            if index == 0 and name:  # SHN_UNDEF
                end = data.index(b"\0", strings + name)
                names.append(data[strings + name:end].decode("ascii"))
    return names


# ---------------------------------------------------------------------------------------
# the runtime: llvmlite, the symbol providers


_RUNTIME_LOCK = threading.Lock()
_RUNTIME: _Runtime | None = None


def _target_machine() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=3, codemodel="jitdefault")


#: the prefix of the Fortran BLAS symbols of the OpenBLAS SciPy's wheel bundles
_BLAS_PREFIX = "scipy_"
#: ``numba_xxgemm`` (Numba's ``_lapack.c``: the same arguments, the same call) over that
#: library's ``sgemm``/``dgemm``; other kinds return -1, which the plan reports as an error
_GEMM_IR = """
declare void @{prefix}sgemm_(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr)
declare void @{prefix}dgemm_(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr)

define i32 @numba_xxgemm(i8 %kind, i8 %transa, i8 %transb, i64 %m, i64 %n, i64 %k,
                              ptr %alpha, ptr %a, i64 %lda, ptr %b, i64 %ldb, ptr %beta,
                              ptr %c, i64 %ldc) {{
entry:
  %ta = alloca i8
  %tb = alloca i8
  %mm = alloca i32
  %nn = alloca i32
  %kk = alloca i32
  %la = alloca i32
  %lb = alloca i32
  %lc = alloca i32
  store i8 %transa, ptr %ta
  store i8 %transb, ptr %tb
  %m32 = trunc i64 %m to i32
  store i32 %m32, ptr %mm
  %n32 = trunc i64 %n to i32
  store i32 %n32, ptr %nn
  %k32 = trunc i64 %k to i32
  store i32 %k32, ptr %kk
  %la32 = trunc i64 %lda to i32
  store i32 %la32, ptr %la
  %lb32 = trunc i64 %ldb to i32
  store i32 %lb32, ptr %lb
  %lc32 = trunc i64 %ldc to i32
  store i32 %lc32, ptr %lc
  switch i8 %kind, label %other [ i8 115, label %single
                                  i8 100, label %double ]
single:
  call void @{prefix}sgemm_(ptr %ta, ptr %tb, ptr %mm, ptr %nn, ptr %kk, ptr %alpha, ptr %a,
                            ptr %la, ptr %b, ptr %lb, ptr %beta, ptr %c, ptr %lc)
  ret i32 0
double:
  call void @{prefix}dgemm_(ptr %ta, ptr %tb, ptr %mm, ptr %nn, ptr %kk, ptr %alpha, ptr %a,
                            ptr %la, ptr %b, ptr %lb, ptr %beta, ptr %c, ptr %lc)
  ret i32 0
other:
  ret i32 -1
}}
"""


def _scipy_openblas() -> str | None:
    """The OpenBLAS that SciPy's wheel bundles (``scipy.libs/libscipy_openblas*``),
    found without importing SciPy, or None."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return None
    libs = pathlib.Path(next(iter(spec.submodule_search_locations))).parent / "scipy.libs"
    found = sorted(glob.glob(str(libs / "libscipy_openblas-*.so*")))
    return found[0] if len(found) == 1 else None


class _Runtime:
    """llvmlite started once per process, and the symbols objects may use."""

    def __init__(self) -> None:
        import llvmlite.binding as llvm

        self.llvm = llvm
        self.machine = _target_machine()
        self.engines: list[Any] = []  # kept alive: their code is called
        # an engine first: creating one makes the process's own symbols searchable
        self.base = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.machine)
        self.provided: set[str] = set()
        spec = importlib.util.find_spec("numba")
        root = spec.submodule_search_locations if spec is not None else None
        helper_files = sorted(glob.glob(str(pathlib.Path(next(iter(root))) /
                                            "_helperlib*.so"))) if root else []
        if len(helper_files) == 1:
            # the compiled C extension alone: Numba's Python package is not run
            loader_spec = importlib.util.spec_from_file_location("numba._helperlib",
                                                                 helper_files[0])
            if loader_spec is not None and loader_spec.loader is not None:
                helpers = importlib.util.module_from_spec(loader_spec)
                loader_spec.loader.exec_module(helpers)
                for name, address in helpers.c_helpers.items():
                    if isinstance(name, str) and isinstance(address, int):
                        llvm.add_symbol("numba_" + name, address)
                        self.provided.add("numba_" + name)
        libc = ctypes.CDLL(None)
        llvm.add_symbol("NRT_Free", ctypes.cast(libc.free, ctypes.c_void_p).value)
        llvm.add_symbol("NRT_MemInfo_call_dtor",
                        ctypes.cast(libc.abort, ctypes.c_void_p).value)
        self.provided |= {"NRT_Free", "NRT_MemInfo_call_dtor"}
        self.blas: bool | None = None  # SciPy's OpenBLAS loaded (None: not tried)

    def missing(self, symbols: list[str]) -> list[str]:
        """The symbols no provider offers (SciPy's OpenBLAS is loaded when first
        needed)."""
        if self.blas is None and any(s.startswith(_BLAS_PREFIX) for s in symbols):
            openblas = _scipy_openblas()
            self.blas = openblas is not None
            if openblas is not None:
                self.llvm.load_library_permanently(openblas)
        return [s for s in symbols if s not in self.provided
                and not self.llvm.address_of_symbol(s)]

    def load(self, data: bytes, symbol: str) -> int:
        """Add the object to a fresh engine and return the address of ``symbol``."""
        llvm = self.llvm
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.machine)
        engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        engine.finalize_object()
        address = engine.get_function_address(symbol)
        if not address:
            raise ValueError(f"the native object defines no symbol {symbol}")
        self.engines.append(engine)
        return int(address)


def runtime() -> _Runtime:
    """The process's native runtime, started on first use."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = _Runtime()
        return _RUNTIME


# ---------------------------------------------------------------------------------------
# the cached files


def object_path(directory: pathlib.Path, stem: str) -> pathlib.Path:
    return directory / f"{stem}.native"


def manifest_path(directory: pathlib.Path, stem: str) -> pathlib.Path:
    return directory / f"{stem}.native.json"


def store(directory: pathlib.Path, stem: str, data: bytes, symbol: str) -> None:
    """Write the object and its manifest (atomically, ``0600``); the caller holds the
    entry's lock."""
    from ....files import atomic_write_bytes, dumps

    path = object_path(directory, stem)
    atomic_write_bytes(path, data)
    os.chmod(path, 0o600)
    manifest = manifest_path(directory, stem)
    record = {"format": FORMAT, "sha256": hashlib.sha256(data).hexdigest(),
              "symbol": symbol, "size": len(data)}
    atomic_write_bytes(manifest, dumps(record, sort_keys=True))
    os.chmod(manifest, 0o600)


def present(directory: pathlib.Path, stem: str) -> bool:
    """Whether entry ``stem`` has a native object or manifest (usable or not)."""
    return any(os.path.lexists(path) for path in (object_path(directory, stem),
                                                 manifest_path(directory, stem)))


def read(directory: pathlib.Path, stem: str,
         check_owned: Callable[[pathlib.Path], None]) -> tuple[bytes, str] | None:
    """``(object bytes, symbol)`` of entry ``stem`` when both files pass
    ``check_owned``, the manifest is well formed and the object has the recorded size
    and SHA-256; None when the entry has no native object or it cannot be trusted."""
    from ....files import decode

    manifest = manifest_path(directory, stem)
    path = object_path(directory, stem)
    try:
        check_owned(manifest)
        check_owned(path)
        document = decode(manifest.read_bytes())
        data = path.read_bytes()
    except Exception:  # missing, foreign, unreadable or malformed: not used
        return None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return None
    symbol, digest, size = document.get("symbol"), document.get("sha256"), document.get("size")
    if not (isinstance(symbol, str) and _SYMBOL.match(symbol) and isinstance(digest, str)
            and isinstance(size, int) and size == len(data)):
        return None
    if hashlib.sha256(data).hexdigest() != digest:
        return None
    return data, symbol


# ---------------------------------------------------------------------------------------
# the program


_POINTER = ctypes.c_void_p
#: native calls of one plan after which it moves to Numba's entry points (importing Numba
#: then, once): a short run never pays for the import, a long one keeps Numba's lower
#: cost per call
HANDOFF_CALLS = 1000


class NativeProgram:
    """A ``backends.Compiled`` whose ``run`` and ``step()`` call the native
    object; everything else (and a re-run of a call the native code reported failed)
    goes to the Numba module, built on first need by ``module``. After
    ``HANDOFF_CALLS`` native calls the plan's calls go to that module too: checking the
    arguments and calling through ``ctypes`` costs a few microseconds more per call than
    Numba's dispatcher, which matters to a long run of a small plan, not to a start."""

    fuses_updates = True

    def __init__(self, key: str, source: str, program: Program, address: int,
                 numba_module: Callable[[], Any]) -> None:
        self.key = key
        self.source = source
        self.program = p = program
        self.loss = p.step.loss if p.step is not None else None
        self._numba_factory = numba_module
        self._numba: Any = None
        self._lock = threading.Lock()
        prototype = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32,
                                     *([_POINTER] * len(pointers(p))), ctypes.c_double)
        self._call = prototype(address)  # a CFUNCTYPE call releases the GIL
        self._head = [np.dtype(a.dtype) for a in p.parameters + p.constants]
        self._inputs = [(np.dtype(a.dtype), a.shape) for a in p.inputs]
        self._tail = [np.dtype(a.dtype) for a in p.updates + p.states] + [
            np.dtype("float64"), np.dtype("uint8")]
        self._scratch = [(a.size, a.dtype) for a in p.scratch]
        # the output arenas as one block, each at a 64-byte aligned offset
        self._layout: list[tuple[int, np.dtype, int]] = []
        offset = 0
        for a in p.outputs:
            self._layout.append((a.size, np.dtype(a.dtype), offset))
            offset += -(-a.size * np.dtype(a.dtype).itemsize // 64) * 64
        self._block = max(offset, 1)
        self._local = threading.local()
        self._calls = 0
        self._numba_run: Any = None
        self._numba_step: Any = None
        self._no_update = [0] * len(self._tail)
        self.output_dtypes = [a.dtype for a in p.outputs]
        self._loss_arena, self._loss_offset = (
            (self.output_dtypes.index(self.loss[0]), self.loss[1]) if self.loss is not None
            else (0, 0))

    # -- the Numba module, for what the object does not offer ---------------------------
    def numba(self) -> Any:
        """The Numba-compiled module of this plan (imports Numba; from the cache)."""
        with self._lock:
            if self._numba is None:
                self._numba = self._numba_factory()
            return self._numba

    @property
    def module(self) -> Any:
        return self.numba().module

    def batch(self) -> Any:
        return self.numba().batch()

    def scalars(self) -> Any:
        return self.numba().scalars()

    def step(self) -> Any:
        return self.run_step

    def steps(self) -> Any:
        return self.numba().steps()

    # -- calls -------------------------------------------------------------------------
    def _pointers(self, args: tuple, step: bool) -> list[int]:
        """Check ``args`` as Numba's dispatcher and the generated checks would
        (``TypeError`` for a wrong type, dtype or layout, ``ValueError`` naming input
        ``#k`` for a wrong shape) and return their data pointers."""
        head, inputs = self._head, self._inputs
        tail = self._tail if step else []
        if len(args) != len(head) + len(inputs) + len(tail):
            raise TypeError(f"the native plan takes {len(head) + len(inputs) + len(tail)} "
                            f"arrays, got {len(args)}")
        pointers = []
        for k, value in enumerate(args):
            if k < len(head):
                dtype, shape, writable = head[k], None, False
            elif k < len(head) + len(inputs):
                (dtype, shape), writable = inputs[k - len(head)], False
            else:
                dtype, shape, writable = tail[k - len(head) - len(inputs)], None, True
            entry = _ADDRESSES.get(id(value))
            # the same object (not just the same id), and its dtype, shape and layout
            # checked again on every call: a view's strides or shape can be changed in
            # place, and the remembered pointer would then read the wrong elements
            if entry is not None and entry[0] is value and value.dtype is dtype and \
                    value.shape == entry[1] and (shape is None or entry[1] == shape) and \
                    value.flags.c_contiguous and (not writable or value.flags.writeable):
                pointers.append(entry[2])  # seen and checked before, unchanged since
                continue
            if type(value) is not np.ndarray or value.dtype != dtype or \
                    not value.flags.c_contiguous or (writable and not value.flags.writeable):
                raise TypeError(f"no matching definition for argument {k}: expected a "
                                f"C-contiguous {'writable ' if writable else ''}"
                                f"{dtype.name} array")
            if shape is not None and value.shape != shape:
                raise ValueError(f"input #{k - len(head)}: expected shape {list(shape)}")
            pointers.append(_address(value))
        return pointers

    def _buffers(self) -> tuple[list[int], list[np.ndarray], int]:
        """This thread's scratch pointers (scratch never leaves a call, so a thread
        reuses its own), fresh output arenas and the address of their block."""
        local = self._local
        scratch = getattr(local, "scratch", None)
        if scratch is None:
            arrays = [np.empty(n, d) for n, d in self._scratch]
            local.arrays = arrays
            scratch = local.scratch = [_address(a) for a in arrays]
        # fresh every call, so results never alias; from NumPy (not zeroed, huge pages
        # for a large block), aligned to 64 bytes inside a slightly larger one
        block = np.empty(self._block + 64, np.uint8)
        address = block.__array_interface__["data"][0]
        shift = -address % 64
        outputs = [block[shift + offset:shift + offset + n * d.itemsize].view(d)
                   for n, d, offset in self._layout]
        return scratch, outputs, address + shift

    def _output_pointers(self, base: int) -> list[int]:
        return [base + offset for _, _, offset in self._layout]

    def _hand_off(self) -> Any:
        """After ``HANDOFF_CALLS`` native calls: the Numba module, whose compiled
        dispatch costs less per call than this class's checks and ``ctypes``."""
        self._numba_run = numba = self.numba()
        self._numba_step = numba.step() if self.loss is not None else None
        return numba

    def run(self, *args: np.ndarray) -> tuple[np.ndarray, ...]:
        """The plan's ``run``: the output arenas, one per dtype."""
        if self._numba_run is not None:
            return self._numba_run.run(*args)
        self._calls += 1
        if self._calls > HANDOFF_CALLS:
            return self._hand_off().run(*args)
        pointers = self._pointers(args, step=False)
        if self.loss is not None:  # a step plan's object takes the update's buffers too
            pointers += self._no_update
        scratch, outputs, base = self._buffers()
        status = self._call(0, *pointers, *scratch, *self._output_pointers(base), 0.0)
        if status:  # Numba re-runs the call and raises its own error
            return tuple(self.numba().run(*args))
        return tuple(outputs)

    def run_step(self, *args: Any) -> float:
        """A step plan's ``run_step``: the loss; the parameters and state updated."""
        if self._numba_step is not None:
            return float(self._numba_step(*args))
        self._calls += 1
        if self._calls > HANDOFF_CALLS:
            return float(self._hand_off().step()(*args))
        *arrays, lr = args
        pointers = self._pointers(tuple(arrays), step=True)
        scratch, outputs, base = self._buffers()
        status = self._call(1, *pointers, *scratch, *self._output_pointers(base), float(lr))
        if status:  # the body failed before the update wrote anything: Numba re-runs it
            return float(self.numba().step()(*args))
        return float(outputs[self._loss_arena][self._loss_offset])


_ADDRESSES: dict[int, tuple[np.ndarray, tuple[int, ...], int]] = {}


def _address(array: np.ndarray) -> int:
    """``array.ctypes.data`` of a checked array, remembered with its shape for the arrays
    a plan sees again and again (parameter and state buffers, constants, reused inputs):
    asking NumPy for the pointer and the flags costs more than the native call of a small
    plan. An entry holds its array, so the id is not reused while it is remembered (and
    NumPy refuses to resize an array held elsewhere); a remembered array is taken as it
    is only while it is the same object with its dtype object, shape and C-contiguity
    unchanged, checked on every call (``NativeProgram._pointers``). The table is emptied when it
    grows past 256 arrays."""
    entry = _ADDRESSES.get(id(array))
    if entry is None or entry[0] is not array:
        if len(_ADDRESSES) >= 256:
            _ADDRESSES.clear()
        entry = _ADDRESSES[id(array)] = (array, array.shape, array.ctypes.data)
    return entry[2]


__all__ = ["FORMAT", "SWITCH", "pointers", "NativeProgram", "build_object", "enabled",
           "present", "read", "runtime", "store", "undefined_symbols", "wrapper_source"]

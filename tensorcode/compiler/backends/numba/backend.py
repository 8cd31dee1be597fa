"""The Numba backend's ahead-of-time plan cache, and the backend itself.

``NumbaBackend.prepare(program)`` generates the plan's module (``module``),
writes it to ``<cache>/plans/p_<hash>.py`` and compiles its entry points with Numba,
keeping each compiled function in the plan cache (``sealed_cache``: authenticated
files, never Numba's own ``cache=True``), so a second process that lowers the same
network loads machine code instead of compiling. A module already loaded in this
process is reused from memory.

The cache directory is ``TENSORCODE_CACHE_DIR``, or ``tensorcode`` under the user's cache
directory (``XDG_CACHE_HOME`` or ``~/.cache``). The key hashes the lowered IR (types,
attrs, baked scalars, parameter offsets), the TensorCode, Numba, llvmlite and LLVM
versions, the code generator's version, the CPU name and features, and the generated
source. The module is built from the source generated in this process; the file is
written for people and tracebacks, and a corrupt or foreign one is reported once as a
warning and rewritten. Writers take a lock file per entry and replace files atomically,
so processes filling the same entry at once do not corrupt it.

``compile_stats()`` counts, in this process, Numba compilations and cache loads of plan
code, so a test can prove a cache hit in a fresh process without timing anything.
Importing this module imports neither Numba nor llvmlite; compiling does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import stat
import sys
import threading
import types
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np

from ....errors import CacheError
from ....version import __version__
from ...lower.program import Refused, Status, check_inputs, ir_key
from ..calls import PlainCalls
from ..counters import count
from ..plan_directory import Untrusted as _Untrusted
from ..plan_directory import locked as _locked
from ..plan_directory import plans_directory, source_digest
from ..plan_directory import warn_once as _warn_once
from .loops import CODEGEN_VERSION
from .module import generate
from .step import helpers

if TYPE_CHECKING:  # pragma: no cover - kept out of ``import tensorcode``
    from ...lower.program import Argument, EntryPoint, Program
    from ...lower.update import UpdateRule

_MODULES: dict[str, Any] = {}
_MODULE_LOCK = threading.Lock()


# ---------------------------------------------------------------------------------------
# keys


_ENVIRONMENT: str | None = None


def environment_key() -> str:
    """Versions and CPU that compiled code depends on, and the source of the code the
    generated module runs through its intrinsics (``_EMITTED_SOURCES``)."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        import llvmlite
        import llvmlite.binding as llvm


        try:
            cpu = llvm.get_host_cpu_name() + ":" + llvm.get_host_cpu_features().flatten()
        except Exception:
            cpu = llvm.get_host_cpu_name()
        _ENVIRONMENT = json.dumps({
            "tensorcode": __version__, "codegen": CODEGEN_VERSION,
            "numba": _installed_version("numba"), "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info)), "cpu": cpu,
            "numpy": np.__version__, "python": sys.version_info[:2],
            "emitted": source_digest(_EMITTED_SOURCES),
        }, sort_keys=True)
    return _ENVIRONMENT


#: modules whose code a plan's module runs without its text showing it (the intrinsics,
#: and the tiled product's IR they emit): their source keys the cache beside the
#: generator's version
_EMITTED_SOURCES = ("tensorcode.compiler.backends.numba.intrinsics",
                    "tensorcode.compiler.backends.tiles")


def _installed_version(package: str) -> str:
    """The installed version of ``package`` without importing it (importing Numba is
    what a warm start avoids): from the name of its ``.dist-info`` directory beside it,
    else from ``importlib.metadata``."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        site = pathlib.Path(next(iter(spec.submodule_search_locations))).parent
        found = [p.name[len(package) + 1:-len(".dist-info")]
                 for p in site.glob(f"{package}-*.dist-info")]
        if len(found) == 1:
            return found[0]
    import importlib.metadata

    return importlib.metadata.version(package)


# ---------------------------------------------------------------------------------------
# files


def _purge_numba_cache(directory: pathlib.Path, stem: str) -> None:
    """Remove entry ``stem``'s compiled files (earlier versions' Numba files too)."""
    pycache = directory / "__pycache__"
    if pycache.is_dir():
        for f in pycache.glob(f"{stem}.*"):
            with contextlib.suppress(OSError):
                f.unlink()


def _dispatcher_counts(dispatchers: Iterable[Any]) -> tuple[int, int]:
    hits = misses = 0
    for d in dispatchers:
        stats = d.stats
        hits += sum(stats.cache_hits.values())
        misses += sum(stats.cache_misses.values())
    return hits, misses


# ---------------------------------------------------------------------------------------
# compiled modules


#: scratch plus output bytes from which a plan's ``run`` reuses a per-thread scratch arena
#: and takes NumPy's output arenas (``CompiledModule._run_reusing``); below it, ``run``
#: allocates inside the compiled call, where ``malloc``'s free lists make that cheap
REUSE_BYTES = 1 << 18


class _JitOptions(TypedDict):
    """The ``numba.njit`` keywords every entry point of a plan module compiles with."""

    nogil: bool
    error_model: Literal["python", "numpy"]


class CompiledModule(PlainCalls):
    """The loaded, jitted functions of one plan module (a ``backends.Program``): ``run``
    compiled now for the plan's exact argument types, ``batch()`` and ``scalars()`` on
    first use; all three call the one jitted ``body``.

    A call Numba cannot run raises Python's own exceptions: the dispatcher's
    ``TypeError`` (no compiled signature takes the arguments), the generated checks'
    ``ValueError`` (a shape) and ``IndexError`` (an index out of range). ``refusal``
    maps them to a ``Status`` and an argument index by checking the inputs against the
    ``Program`` again (``check_inputs``), never by reading the exception's text; an
    ``IndexError`` is ``Status.RANGE``, its text (the generator's words for the kernel)
    the detail."""

    fuses_updates = True
    refused = (TypeError, ValueError, IndexError)

    def refusal(self, error: BaseException, inputs: Sequence[Any], leading: int | None = None
                ) -> Refused | None:
        if isinstance(error, IndexError):
            return Refused(Status.RANGE, -1, str(error))
        return check_inputs(self.program, inputs, leading)

    def __init__(self, key: str, module: Any, program: Program, source: str = "",
                 directory: pathlib.Path | None = None) -> None:
        import numba

        self.key = key
        self.module = module
        self.program = program
        self.source = source
        #: where the entry points' compiled code is kept (``sealed_cache``); None: memory
        self._directory = directory
        options: _JitOptions = {"nogil": True, "error_model": "numpy"}
        # only the compiled entry points call ``body``: no Python wrapper to build, and
        # no cache entry of its own (each cached entry point holds the code it calls).
        # numba's stubs leave out these two CPU-target options, which njit accepts.
        self.body = numba.njit(no_cpython_wrapper=True,  # type: ignore[call-overload]
                               no_cfunc_wrapper=True, **options)(module.body)
        module.body = self.body
        # a step plan's update helpers (``step``): internal like ``body``
        self._helpers = [self.body]
        for name in (helpers(program) if program.step is not None else ()):
            helper = numba.njit(no_cpython_wrapper=True,  # type: ignore[call-overload]
                                no_cfunc_wrapper=True, **options)(getattr(module, name))
            setattr(module, name, helper)
            self._helpers.append(helper)
        self._entries: dict[str, Any] = {}
        self.run_signature = signature(program.run)
        self._options = options
        self._scratch = [(a.size, np.dtype(a.dtype)) for a in program.scratch]
        self._outputs = [(a.size, np.dtype(a.dtype)) for a in program.outputs]
        self._local = threading.local()
        self.run: Callable[..., Any]
        self._run_lock = threading.Lock()
        self._run_ready = program.step is None
        if self._run_ready:
            self._compile_run()
        else:  # a step plan's calls are its fused entry points: ``run`` waits for a forward
            self.run = self._run_on_first_use
        self._scalars: Any = None
        self._batch: Any = None
        self._batch_lock = threading.Lock()
        self.output_dtypes = [a.dtype for a in program.outputs]

    def _jit(self, name: str, types: tuple | None) -> Any:
        """The module's function ``name`` compiled (or loaded, ``sealed_cache``) for
        ``types``; on first call when None."""
        from .sealed_cache import jit

        return jit(getattr(self.module, name), types, self._options, self._directory,
                   f"p_{self.key}")

    def _compile_run(self) -> None:
        """Compile (or load) ``run`` for the plan's exact argument types: through
        ``run_into`` and this thread's reused scratch when the arenas are large."""
        program, module = self.program, self.module
        before = _dispatcher_counts(self._helpers)
        run = program.run.name
        if program.scratch_bytes + program.output_bytes >= REUSE_BYTES:
            self._run_into = self._jit(program.run_into.name, signature(program.run_into))
            self.run = self._run_reusing
            # run_scalars (all-scalar plans) calls ``run``: compiled if it is ever used
            setattr(module, run, self._jit(run, None))
            self._account([self._run_into], before)
        else:
            self.run = self._jit(run, self.run_signature)
            setattr(module, run, self.run)  # run_scalars calls it
            self._account([self.run], before)

    def _run_on_first_use(self, *args: np.ndarray) -> tuple[np.ndarray, ...]:
        """A step plan's ``run`` (its forward call), compiled when first called: a step
        plan trained through ``run_step``/``run_steps`` never pays for it (with Numba a
        third entry point costs seconds)."""
        self._ensure_run()
        return self.run(*args)

    def _ensure_run(self) -> None:
        if not self._run_ready:
            with self._run_lock:
                if not self._run_ready:
                    self._compile_run()
                    self._run_ready = True

    def _run_reusing(self, *args: np.ndarray) -> tuple[np.ndarray, ...]:
        """``run`` of a plan with large arenas: this thread's scratch, reused from call
        to call (it never leaves a call), and output arenas from NumPy, fresh every call
        so results never alias. A fresh large block from ``malloc`` is fresh pages from
        the kernel, each faulted in and zeroed on first touch, which costs as much as
        the elementwise work of a big plan; NumPy also asks for huge pages."""
        local = self._local
        scratch = getattr(local, "scratch", None)
        if scratch is None:
            scratch = local.scratch = [np.empty(n, d) for n, d in self._scratch]
        outputs = tuple(np.empty(n, d) for n, d in self._outputs)
        self._run_into(*args, *scratch, *outputs)
        return outputs

    def _account(self, dispatchers: list[Any], before: tuple[int, int]) -> None:
        hits, misses = _dispatcher_counts(dispatchers + self._helpers)
        count("cache_loaded", hits - before[0])
        count("compiled", misses - before[1])

    def scalars(self) -> Any:
        """``run_scalars``, compiled on first use (only all-scalar plans have it)."""
        entry = self.program.run_scalars
        if entry is None:
            raise TypeError("only a plan whose every root is a scalar has run_scalars")
        self._ensure_run()  # run_scalars calls it
        with self._batch_lock:
            if self._scalars is None:
                before = _dispatcher_counts(self._helpers + [self.run])
                self._scalars = self._jit(entry.name, signature(entry))
                self._account([self._scalars, self.run], before)
            return self._scalars

    def batch(self) -> Any:
        """``run_batch``, compiled on first use."""
        with self._batch_lock:
            if self._batch is None:
                entry = self.program.run_batch
                before = _dispatcher_counts(self._helpers)
                self._batch = self._jit(entry.name, signature(entry))
                self._account([self._batch], before)
            return self._batch

    def step(self) -> Any:
        """A step plan's ``run_step`` (compiled on first use)."""
        entry = self.program.run_step
        if entry is None:
            raise TypeError("only a step plan has run_step")
        return self._entry(entry)

    def steps(self) -> Any:
        """A step plan's ``run_steps`` (compiled on first use)."""
        entry = self.program.run_steps
        if entry is None:
            raise TypeError("only a step plan has run_steps")
        return self._entry(entry)

    def _entry(self, entry: EntryPoint) -> Any:
        """A step plan's entry point, compiled (or loaded from the cache) on first use
        for the argument types its record gives."""
        with self._batch_lock:
            function = self._entries.get(entry.name)
            if function is None:
                before = _dispatcher_counts(self._helpers)
                function = self._jit(entry.name, signature(entry))
                self._account([function], before)
                self._entries[entry.name] = function
            return function


def signature(entry: EntryPoint) -> tuple:
    """The Numba argument types of ``entry``, from its typed arguments."""
    from numba import types

    def numba_type(argument: Argument) -> Any:
        scalar = getattr(types, argument.dtype)
        if argument.scalar:
            return scalar
        return types.Array(scalar, argument.ndim, "C", readonly=not argument.writable)

    return tuple(numba_type(a) for a in entry.arguments)


def _load_module(source: str, key: str, filename: str) -> Any:
    """A fresh module holding ``source`` (the text generated in this process), compiled
    with ``compile`` and run with ``exec``: Python's import system is not involved, so no
    ``.pyc`` beside the cached file is ever read or written. ``filename`` is what Numba
    sees as the functions' file (the cache entry, beside which its index lives)."""
    name = f"tensorcode_plan_{key}"
    module = types.ModuleType(name)
    module.__file__ = filename
    code = compile(source, filename, "exec", dont_inherit=True)
    # registered so Numba can find the module again when it loads cached code
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def compiled_module(program: Program, approximate: bool = True) -> CompiledModule:
    """The compiled module for ``program`` (a step plan's with its update): from this
    process's memory, the on-disk cache, or compiled now (and cached). When the cache
    directory cannot be trusted or written (``plans_directory``), or the entry's paths
    hold something that is not a file of ours, the plan is compiled in memory, with one
    warning."""
    source = generate(program, approximate=approximate)
    # the key covers the generated code too, so any change to code generation (or to a
    # scheduling constant) is a new entry rather than a mismatch
    text = f"{environment_key()}\napproximate={approximate}\n{ir_key(program)}\n{source}"
    key = hashlib.sha256(text.encode()).hexdigest()[:32]
    with _MODULE_LOCK:
        if key in _MODULES:
            count("memory_hits")
            return _MODULES[key]
        try:
            compiled = _numba_module(source, key, program)
        except (CacheError, OSError, _Untrusted) as error:
            _in_memory(error, key)
            compiled = CompiledModule(
                key, _load_module(source, key, f"<tensorcode plan {key}>"), program, source)
        _MODULES[key] = compiled
        return compiled


def _in_memory(error: Exception, key: str) -> None:
    """Say (once) why a plan or update compiles in memory, and count it."""
    if isinstance(error, _Untrusted):  # this entry's paths only
        _warn_once(key + ":entry", f"tensorcode: plan cache entry {key} cannot be used "
                                   f"({error}); compiling it in memory")
    else:
        reason = str(error) if isinstance(error, CacheError) else \
            f"the plan cache cannot be used: {getattr(error, 'strerror', None) or error}"
        _warn_once("untrusted-cache", f"tensorcode: {reason}; compiling plans in memory "
                                      "(see docs/compiler.md, 'Trusting a cache "
                                      "directory')")
    count("memory_compiled")


def _numba_module(source: str, key: str, program: Program) -> CompiledModule:
    """The entry's module compiled, or its functions loaded, through the on-disk cache
    (raises ``CacheError``, ``OSError`` or ``Untrusted`` when it cannot be used)."""
    from ..secret import secret

    directory = plans_directory()
    secret()  # a CacheError now, not when a later entry point is first compiled
    stem = f"p_{key}"
    with _locked(directory / f"{stem}.lock"):
        _prepare_entry(directory, stem, source, key)
        module = _load_module(source, key, str(directory / f"{stem}.py"))
        return CompiledModule(key, module, program, source, directory / "__pycache__")


def _prepare_entry(directory: pathlib.Path, stem: str, source: str, key: str) -> None:
    """Make entry ``stem``'s source file hold ``source`` (written atomically when missing,
    rewritten when corrupt or foreign, one warning); the caller holds the entry's lock.
    The file is for people and tracebacks: the module is built from ``source`` itself.
    Raises ``Untrusted`` when a directory holds the path (it is not removed)."""
    path = directory / f"{stem}.py"
    data = source.encode("utf-8")
    existing = _read_source(path, len(data))
    if existing == data:
        return
    if existing is not None:
        if stat.S_ISDIR(path.lstat().st_mode):
            raise _Untrusted(f"{path} is a directory")
        count("corrupt_entries")
        _warn_once(key, f"tensorcode: plan cache entry {path} was corrupt or "
                        "foreign; rebuilding it")
        _purge_numba_cache(directory, stem)
        path.unlink()
    from ....files.atomic import atomic_write_bytes  # local: kept out of the import

    atomic_write_bytes(path, data)
    os.chmod(path, 0o600)
    count("sources_written")


def _read_source(path: pathlib.Path, size: int) -> bytes | None:
    """The bytes of the source file at ``path`` when it is a regular file of ours of
    ``size`` bytes, ``b""`` when something else is there, None when nothing is."""
    from ..plan_directory import NO_FOLLOW, check_status

    try:
        descriptor = os.open(path, os.O_RDONLY | NO_FOLLOW)
    except FileNotFoundError:
        return None
    except OSError:
        return b""
    try:
        info = os.fstat(descriptor)
        check_status(path, info, directory=False)
    except (OSError, _Untrusted):
        os.close(descriptor)
        return b""
    with open(descriptor, "rb") as handle:
        return handle.read(size + 1) if info.st_size == size else b""


_FUNCTIONS: dict[str, dict[str, Any]] = {}


def compiled_functions(source: str, entries: dict[str, str]) -> dict[str, Any]:
    """The functions ``entries`` names (name -> signature text) of the generated module
    ``source``, jitted for those signatures: from this process's memory, the plan cache
    (entry ``u_<key>``, kept like a plan's) or compiled now and cached there. For code
    that is not a plan (an optimizer's eager update, ``numba.update``); when the cache
    cannot be used it is compiled in memory, with one warning."""
    text = f"{environment_key()}\n{sorted(entries.items())}\n{source}"
    key = hashlib.sha256(text.encode()).hexdigest()[:32]
    with _MODULE_LOCK:
        if key in _FUNCTIONS:
            count("memory_hits")
            return _FUNCTIONS[key]
        stem = f"u_{key}"
        try:
            from ..secret import secret

            directory = plans_directory()
            secret()
            with _locked(directory / f"{stem}.lock"):
                _prepare_entry(directory, stem, source, key)
                module = _load_module(source, key, str(directory / f"{stem}.py"))
                functions = _jit(module, entries, directory / "__pycache__", stem)
        except (CacheError, OSError, _Untrusted) as error:
            _in_memory(error, key)
            functions = _jit(_load_module(source, key, f"<tensorcode update {key}>"),
                             entries, None, stem)
        _FUNCTIONS[key] = functions
        return functions


def _jit(module: Any, entries: dict[str, str], directory: pathlib.Path | None,
         stem: str) -> dict[str, Any]:
    """``module``'s functions jitted for their signatures, kept in ``directory``
    (``sealed_cache``; in memory when None)."""
    from numba import types

    from .sealed_cache import jit

    functions: dict[str, Any] = {}
    for name, text in entries.items():
        signature = eval(compile(text, "<signature>", "eval"), {"types": types})
        function = jit(getattr(module, name), signature,
                       {"nogil": True, "error_model": "numpy"}, directory, stem)
        hits, misses = _dispatcher_counts([function])
        count("cache_loaded", hits)
        count("compiled", misses)
        functions[name] = function
    return functions


# ---------------------------------------------------------------------------------------
# the backend


class NumbaBackend:
    """The ``Backend`` that generates loops and compiles them with Numba (cached)."""

    name = "numba"
    approximates = True

    def prepare(self, program: Program, approximate: bool) -> CompiledModule:
        """The compiled module for ``program`` (see ``compiled_module``)."""
        return compiled_module(program, approximate)

    def update(self, rule: UpdateRule, dtype: str) -> Callable[..., None]:
        """An optimizer's eager update for ``dtype``, compiled (``numba.update.eager``)."""
        from .update import eager

        return eager(rule, dtype, compiled_functions)


BACKEND = NumbaBackend()

__all__ = ["NumbaBackend", "BACKEND", "CompiledModule", "compiled_module", "compiled_functions",
           "plans_directory", "environment_key", "ir_key"]

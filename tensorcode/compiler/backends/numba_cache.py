"""The Numba backend's ahead-of-time plan cache, and the backend itself.

``NumbaBackend.prepare(schedule)`` generates the plan's module (``numba_module``),
writes it to ``<cache>/plans/p_<hash>.py`` and compiles it with Numba's ``cache=True``,
so a second process that lowers the same network loads machine code instead of
compiling. A module already loaded in this process is reused from memory.

The cache directory is ``TENSORCODE_CACHE_DIR``, or ``tensorcode`` under the user's cache
directory (``XDG_CACHE_HOME`` or ``~/.cache``). The key hashes the lowered IR (types,
attrs, baked scalars, parameter offsets), the TensorCode, Numba, llvmlite and LLVM
versions, the code generator's version, the CPU name and features, and the generated
source. Before importing a cached module the source is regenerated and compared: a
corrupt or foreign file is reported once as a warning and rewritten. Writers take a lock
file per entry and replace files atomically, so processes filling the same entry at once
do not corrupt it.

``compile_stats()`` counts, in this process, Numba compilations and cache loads of plan
code, so a test can prove a cache hit in a fresh process without timing anything.
Importing this module imports neither Numba nor llvmlite; compiling does.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import pathlib
import sys
import threading
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np

from ...errors import TensorCodeError
from .. import ir

if TYPE_CHECKING:  # pragma: no cover - kept out of ``import tensorcode``
    from ..schedule import Schedule
    from ..update import StepSpec

_STATS_LOCK = threading.Lock()
_STATS = {"compiled": 0, "cache_loaded": 0, "sources_written": 0, "corrupt_entries": 0,
          "plans_lowered": 0, "memory_hits": 0}
_MODULES: dict[str, Any] = {}
_MODULE_LOCK = threading.Lock()


def compile_stats() -> dict[str, int]:
    """Counters for this process: ``compiled`` (Numba compilations of plan functions),
    ``cache_loaded`` (plan functions loaded from the on-disk cache), ``sources_written``,
    ``corrupt_entries`` (cache entries found damaged and rebuilt), ``plans_lowered`` and
    ``memory_hits`` (lowerings served by a module already loaded in this process)."""
    with _STATS_LOCK:
        return dict(_STATS)


def count(key: str, n: int = 1) -> None:
    """Add ``n`` to counter ``key`` of ``compile_stats`` (``plans_lowered`` is counted
    by ``Entry.lower``, the rest here)."""
    with _STATS_LOCK:
        _STATS[key] += n
    if n and os.environ.get("TENSORCODE_LOG_COMPILES") and key in ("compiled", "cache_loaded"):
        print(f"tensorcode: {key} {n}", file=sys.stderr)


def cache_dir() -> pathlib.Path:
    """``TENSORCODE_CACHE_DIR``, else ``tensorcode`` under the user's cache directory."""
    env = os.environ.get("TENSORCODE_CACHE_DIR")
    if env:
        return pathlib.Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    root = pathlib.Path(base).expanduser() if base else pathlib.Path.home() / ".cache"
    return root / "tensorcode"


# ---------------------------------------------------------------------------------------
# keys


_ENVIRONMENT: str | None = None


def environment_key() -> str:
    """Versions and CPU that compiled code depends on."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        import llvmlite
        import llvmlite.binding as llvm
        import numba

        from ... import __version__
        from .numba import CODEGEN_VERSION

        try:
            cpu = llvm.get_host_cpu_name() + ":" + llvm.get_host_cpu_features().flatten()
        except Exception:
            cpu = llvm.get_host_cpu_name()
        _ENVIRONMENT = json.dumps({
            "tensorcode": __version__, "codegen": CODEGEN_VERSION,
            "numba": numba.__version__, "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info)), "cpu": cpu,
            "numpy": np.__version__, "python": sys.version_info[:2],
        }, sort_keys=True)
    return _ENVIRONMENT


def ir_key(schedule: Schedule) -> str:
    """The lowered IR as hashed: text form, parameter offsets, input order, and the
    contents of the scalars baked into the code (array constants are arguments)."""
    s = schedule
    lines = [ir.describe(s.graph)]
    lines.append("parameters " + json.dumps(sorted((i, d, o) for i, (d, o) in
                                                   s.sources.parameters.items())))
    lines.append("parameter_dtypes " + json.dumps(s.sources.parameter_dtypes))
    lines.append("inputs " + json.dumps(s.sources.inputs))
    for i, node in enumerate(s.graph.nodes):
        if node.op == "leaf" and node.type.size == 1:
            assert node.value is not None  # a leaf always carries its value
            lines.append(f"scalar %{i} {node.value.reshape(-1)[0].item()!r}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# files


@contextlib.contextmanager
def _locked(path: pathlib.Path):
    """An exclusive lock on ``path`` (a lock file) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not POSIX: atomic renames only
            pass
        try:
            yield
        finally:
            try:
                import fcntl
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            except ImportError:  # pragma: no cover
                pass


_WARNED: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=5)


def _purge_numba_cache(directory: pathlib.Path, stem: str) -> None:
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


class _JitOptions(TypedDict):
    """The ``numba.njit`` keywords every entry point of a plan module compiles with."""

    cache: bool
    nogil: bool
    error_model: Literal["python", "numpy"]


class CompiledModule:
    """The loaded, jitted functions of one plan module (a ``backends.Program``): ``run``
    compiled now for the plan's exact argument types, ``batch()`` and ``scalars()`` on
    first use; all three call the one jitted ``body``."""

    def __init__(self, key: str, module: Any) -> None:
        import numba
        from numba import types

        self.key = key
        self.module = module
        options: _JitOptions = {"cache": True, "nogil": True, "error_model": "numpy"}
        body_options: _JitOptions = {**options, "cache": False}
        # only the compiled entry points call ``body``: no Python wrapper to build, and
        # no cache entry of its own (each cached entry point holds the code it calls).
        # numba's stubs leave out these two CPU-target options, which njit accepts.
        self.body = numba.njit(no_cpython_wrapper=True,  # type: ignore[call-overload]
                               no_cfunc_wrapper=True, **body_options)(module.body)
        module.body = self.body
        # a step plan's update helpers (numba_step): internal like ``body``
        self._helpers = [self.body]
        for name in getattr(module, "HELPERS", ()):
            helper = numba.njit(no_cpython_wrapper=True,  # type: ignore[call-overload]
                                no_cfunc_wrapper=True, **body_options)(getattr(module, name))
            setattr(module, name, helper)
            self._helpers.append(helper)
        self._entries: dict[str, Any] = {}
        scope = {"types": types}
        self.run_signature = eval(compile(module.RUN_SIGNATURE,
                                          "<signature>", "eval"), scope)
        self.batch_signature_text = module.BATCH_SIGNATURE
        self._options = options
        before = _dispatcher_counts(self._helpers)
        self.run = numba.njit(self.run_signature, **options)(module.run)
        module.run = self.run  # run_scalars calls it
        self._account([self.run], before)
        self._scalars = None
        self._batch = None
        self._batch_lock = threading.Lock()
        self.output_dtypes = list(module.OUTPUT_DTYPES)

    def _account(self, dispatchers: list[Any], before: tuple[int, int]) -> None:
        hits, misses = _dispatcher_counts(dispatchers + self._helpers)
        count("cache_loaded", hits - before[0])
        count("compiled", misses - before[1])

    def scalars(self) -> Any:
        """``run_scalars``, compiled on first use (only all-scalar plans have it)."""
        with self._batch_lock:
            if self._scalars is None:
                import numba

                before = _dispatcher_counts(self._helpers + [self.run])
                self._scalars = numba.njit(self.run_signature, **self._options)(
                    self.module.run_scalars)
                self._account([self._scalars, self.run], before)
            return self._scalars

    def batch(self) -> Any:
        """``run_batch``, compiled on first use."""
        with self._batch_lock:
            if self._batch is None:
                import numba
                from numba import types

                sig = eval(compile(self.batch_signature_text, "<signature>", "eval"),
                           {"types": types})
                before = _dispatcher_counts(self._helpers)
                self._batch = numba.njit(sig, **self._options)(self.module.run_batch)
                self._account([self._batch], before)
            return self._batch

    def entry(self, name: str) -> Any:
        """A step plan's entry point ``run_step`` or ``run_steps`` (``numba_step``),
        compiled (or loaded from the cache) on first use for ``<NAME>_SIGNATURE``."""
        with self._batch_lock:
            function = self._entries.get(name)
            if function is None:
                import numba
                from numba import types

                text = getattr(self.module, name.upper().replace("RUN_", "") + "_SIGNATURE")
                sig = eval(compile(text, "<signature>", "eval"), {"types": types})
                before = _dispatcher_counts(self._helpers)
                function = numba.njit(sig, **self._options)(getattr(self.module, name))
                self._account([function], before)
                self._entries[name] = function
            return function


def _load_module(path: pathlib.Path, key: str) -> Any:
    name = f"tensorcode_plan_{key}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # registered so Numba can find the module again when it loads cached code
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def compiled_module(schedule: Schedule, approximate: bool = True,
                    step: StepSpec | None = None) -> CompiledModule:
    """The compiled module for ``schedule`` (with a step plan's update when ``step`` is
    given): from this process's memory, the on-disk cache, or compiled now (and
    cached)."""
    from .numba_module import generate

    source = generate(schedule, approximate=approximate, step=step)
    # the key covers the generated code too, so any change to code generation (or to a
    # scheduling constant) is a new entry rather than a mismatch
    text = f"{environment_key()}\napproximate={approximate}\n{ir_key(schedule)}\n{source}"
    key = hashlib.sha256(text.encode()).hexdigest()[:32]
    with _MODULE_LOCK:
        if key in _MODULES:
            count("memory_hits")
            return _MODULES[key]
        directory = cache_dir() / "plans"
        directory.mkdir(parents=True, exist_ok=True)
        stem = f"p_{key}"
        path = directory / f"{stem}.py"
        with _locked(directory / f"{stem}.lock"):
            existing = None
            if path.exists():
                try:
                    existing = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    existing = ""
            if existing != source:
                if existing is not None:
                    count("corrupt_entries")
                    _warn_once(key, f"tensorcode: plan cache entry {path} was corrupt or "
                                    "foreign; rebuilding it")
                    _purge_numba_cache(directory, stem)
                from ...files.atomic import atomic_write_bytes

                atomic_write_bytes(path, source.encode("utf-8"))
                count("sources_written")
            try:
                compiled = CompiledModule(key, _load_module(path, key))
            except Exception as error:
                if isinstance(error, (TensorCodeError,)):
                    raise
                count("corrupt_entries")
                _warn_once(key + ":numba", f"tensorcode: compiled cache for {path} could not "
                                           f"be loaded ({type(error).__name__}); rebuilding it")
                _purge_numba_cache(directory, stem)
                compiled = CompiledModule(key, _load_module(path, key))
        _MODULES[key] = compiled
        return compiled


# ---------------------------------------------------------------------------------------
# the backend


class NumbaBackend:
    """The ``Backend`` that generates loops and compiles them with Numba (cached)."""

    name = "numba"
    approximates = True

    def prepare(self, schedule: Schedule, approximate: bool,
                step: StepSpec | None = None) -> CompiledModule:
        """The compiled module for ``schedule`` (see ``compiled_module``)."""
        return compiled_module(schedule, approximate, step)


BACKEND = NumbaBackend()

__all__ = ["NumbaBackend", "BACKEND", "CompiledModule", "compiled_module", "compile_stats",
           "count", "cache_dir", "environment_key", "ir_key"]

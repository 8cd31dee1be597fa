"""Compile counters and the plan cache directory, shared by every backend.

``compile_stats()`` counts, in this process, what lowering and the code-generating
backends did (compilations, cache loads, entries rebuilt), so a test can prove a cache
hit in a fresh process without timing anything. ``cache_dir()`` is where every backend
keeps its on-disk plan cache.
"""

from __future__ import annotations

import os
import pathlib
import sys
import threading

_STATS_LOCK = threading.Lock()
_STATS = {"compiled": 0, "cache_loaded": 0, "sources_written": 0, "corrupt_entries": 0,
          "plans_lowered": 0, "memory_hits": 0, "memory_compiled": 0,
          "untrusted_entries": 0, "llvm_compile_ms": 0}


def compile_stats() -> dict[str, int]:
    """Counters for this process: ``compiled`` (Numba compilations of plan functions),
    ``cache_loaded`` (plan functions loaded from the on-disk cache), ``sources_written``,
    ``corrupt_entries`` (cache entries found damaged and rebuilt), ``plans_lowered`` and
    ``memory_hits`` (lowerings served by a module already loaded in this process);
    ``untrusted_entries`` (cache files, an llvm object or a compiled Numba function,
    refused: not a private regular file, too large, without a valid authentication tag,
    or with a refused symbol; recompiled) and ``llvm_compile_ms``
    (milliseconds the llvm backend spent compiling plans; see ``backends/llvm``)."""
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


__all__ = ["compile_stats", "count", "cache_dir"]

"""The one thread knob: how many threads a plan's partitioned loops and BLAS may use.

``set_num_threads(n)`` / ``get_num_threads()`` (``tc.set_num_threads``), or
``TENSORCODE_NUM_THREADS`` read once, at first use; without it ``OMP_NUM_THREADS``, as
PyTorch and ONNX Runtime read it (Ray sets it to each worker's ``num_cpus``); the default
is the number of CPUs this process may run on (``os.sched_getaffinity``, so a
container's or ``taskset``'s limit counts, not the machine's core count).

Setting it sizes the native worker pool (``pool.py``: ``n - 1`` workers beside the
calling thread). The BLAS plans call (SciPy's bundled OpenBLAS) runs one thread per
call, set through its own ``openblas_set_num_threads`` when the knob is set and when the
llvm backend first loads it: a large matrix product is split into blocks on the
pool instead (``lower/partition.py``), one BLAS call per block, so BLAS threads and the
pool's never add up to more than ``n`` runnable threads. OpenBLAS's own threads wait for
each other by spinning; on a machine whose cores other processes keep busy, measured on
a 2-core AMD EPYC with two other busy processes, a small GPT's 2.5 ms forward took
880 ms with two BLAS threads (and the same 2.5 ms with one BLAS thread and the pool's
two). The pool is started lazily, the first time a plan asks for it, so a process that
never runs a partitioned loop starts no threads.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import pathlib
import threading

from ...errors import TensorCodeError

#: the environment variable read once at first use (an integer >= 1)
ENV = "TENSORCODE_NUM_THREADS"
#: read when ``ENV`` is not set (ignored unless a whole number >= 1)
OMP_ENV = "OMP_NUM_THREADS"

#: the threads of one BLAS call a plan makes (see the module doc)
BLAS_THREADS = 1

_LOCK = threading.Lock()
_THREADS: int | None = None
_POOL_SIZED = -1


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _check(n: object, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise TensorCodeError(f"{what} must be a whole number of threads >= 1, got {n!r}")
    return n


def get_num_threads() -> int:
    """The threads plans may use: ``set_num_threads``'s value, else
    ``TENSORCODE_NUM_THREADS``, else ``OMP_NUM_THREADS``, else ``available_cpus()``."""
    global _THREADS
    if _THREADS is None:
        with _LOCK:
            if _THREADS is None:
                text = os.environ.get(ENV, "").strip()
                omp = os.environ.get(OMP_ENV, "").strip()
                if not text:
                    _THREADS = int(omp) if omp.isdigit() and int(omp) >= 1 \
                        else available_cpus()
                elif text.isdigit() and int(text) >= 1:
                    _THREADS = int(text)
                else:
                    raise TensorCodeError(f"{ENV} must be a whole number of threads >= 1, "
                                          f"got {text!r}; unset it to use every CPU "
                                          "this process may run on")
    return _THREADS


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for plans' partitioned loops from now on (BLAS: one, see the
    module doc).

    Plans already lowered keep their partitions (a partition's chunks do not depend on
    the thread count, so results do not change); only how many threads share the chunks
    does. Applies to the whole process."""
    global _THREADS
    n = _check(n, "set_num_threads(n)")
    with _LOCK:
        _THREADS = n
    set_blas_threads(BLAS_THREADS)
    if _POOL_SIZED >= 0:  # the pool was started: resize it now, else at its first use
        ensure_pool()


def ensure_pool() -> int:
    """Size the native pool to ``get_num_threads() - 1`` workers (building it on first
    use, and again in a forked child, which has none of its threads) and return the
    address of its ``tc_pool_run`` for generated code."""
    global _POOL_SIZED
    from . import pool

    n = get_num_threads()
    with _LOCK:
        if n != _POOL_SIZED or pool.workers() != n - 1:
            pool.resize(n - 1)
            _POOL_SIZED = n
    return pool.run_address()


def scipy_openblas() -> str | None:
    """The OpenBLAS that SciPy's wheel bundles (``scipy.libs/libscipy_openblas*``),
    found without importing SciPy, or None. Plans call BLAS from it."""
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return None
    libs = pathlib.Path(next(iter(spec.submodule_search_locations))).parent / "scipy.libs"
    found = sorted(glob.glob(str(libs / "libscipy_openblas*.so*")))
    return found[0] if len(found) == 1 else None


def set_blas_threads(n: int) -> bool:
    """Tell SciPy's OpenBLAS to use ``n`` threads; False when it is not there (then
    the BLAS keeps its own setting, ``OPENBLAS_NUM_THREADS``)."""
    path = scipy_openblas()
    if path is None:
        return False
    library = ctypes.CDLL(path)
    for name in ("scipy_openblas_set_num_threads", "openblas_set_num_threads"):
        setter = getattr(library, name, None)
        if setter is not None:
            setter.argtypes = [ctypes.c_int]
            setter.restype = None
            setter(int(n))
            return True
    return False


def configured_by_environment() -> bool:
    """Whether the environment names a thread count (``ENV`` or ``OMP_ENV``): a server
    that splits the CPUs between its workers leaves such a choice alone."""
    return any(os.environ.get(name, "").strip() for name in (ENV, OMP_ENV))


__all__ = ["BLAS_THREADS", "ENV", "OMP_ENV", "available_cpus", "configured_by_environment",
           "ensure_pool", "get_num_threads", "scipy_openblas", "set_blas_threads",
           "set_num_threads"]

"""How a plan would scale past the cores this machine has, estimated from measured costs.

A machine with 2 cores cannot show a 16-thread run, so the threads suite estimates it
from what it can measure. The plans are lowered inside ``profiling()`` and run at one
thread (``tc.set_num_threads(1)``): each kernel's time ``t`` per call, and the number of
chunks ``c`` its partition runs as (``KernelTime.chunks``: fixed by the cost model,
independent of the thread count; 1 for a kernel that stays on the calling thread). At
``N`` threads a partitioned kernel's chunks are dealt out ``ceil(c / N)`` to the busiest
thread, so

    estimate(N) = outside + sum over kernels of t * ceil(c / N) / c + runs * wake

where ``outside`` is the call's wall time less its kernels' (Python between layered
plans, the optimizer's update: serial), ``runs`` the partitioned kernels per call and
``wake`` one run of the pool measured in the same suite (``pool: wake-up``, at this
machine's thread count). What it leaves out, so it is an upper bound on the speed-up:
memory bandwidth shared between cores (bandwidth-bound kernels stop scaling well before
16 threads), a pool run costing more with more workers, and operands a core reads from
another core's cache.
The measured rows of the same suite at this machine's thread count are its check.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from .harness import Row

#: the thread counts the estimate is printed for
THREADS = (1, 2, 4, 8, 16)


def profile_one_thread(make: Callable[[], Callable[[], Any]], repeat: int
                       ) -> tuple[float, list[tuple[float, int]]]:
    """``make()`` (which lowers the plans it needs on first call of what it returns) run
    at one thread inside ``profiling()``: the wall seconds per call and each kernel's
    (seconds per call, chunks)."""
    import tensorcode as tc
    from tensorcode.compiler.backends.profiling import kernel_times, profiling

    tc.set_num_threads(1)
    with profiling():
        run = make()
        run()
    run()
    kernel_times(reset=True)
    begin = time.perf_counter()
    for _ in range(repeat):
        run()
    wall = (time.perf_counter() - begin) / repeat
    kernels = [(t.seconds / repeat, t.chunks) for t in kernel_times(reset=True) if t.calls]
    return wall, kernels


def estimate(wall: float, kernels: list[tuple[float, int]], wake: float, threads: int
             ) -> float:
    """Seconds per call at ``threads`` threads (see the module doc)."""
    outside = max(wall - sum(t for t, _ in kernels), 0.0)
    runs = sum(1 for _, c in kernels if c > 1)
    parallel = sum(t * math.ceil(c / threads) / c for t, c in kernels)
    return outside + parallel + (runs * wake if threads > 1 else 0.0)


def scaling_rows(suite: str, workload: str, make: Callable[[], Callable[[], Any]],
                 repeat: int, wake: float) -> list[Row]:
    """One row per thread count in ``THREADS`` for ``workload`` (milliseconds per call),
    each estimate's speed-up over the measured one-thread row in its note."""
    wall, kernels = profile_one_thread(make, repeat)
    split = sum(t for t, c in kernels if c > 1)
    rows = [Row(suite, f"{workload}: scaling estimate", "1 thread, measured", wall * 1e3,
                unit="ms",
                note=f"profiled at one thread: kernels {sum(t for t, _ in kernels) * 1e3:.2f}"
                     f" ms, of which partitioned {split * 1e3:.2f} ms in "
                     f"{sum(1 for _, c in kernels if c > 1)} kernels; pool run "
                     f"{wake * 1e6:.1f} us")]
    for threads in THREADS[1:]:
        seconds = estimate(wall, kernels, wake, threads)
        rows.append(Row(suite, f"{workload}: scaling estimate", f"{threads} threads, estimated",
                        seconds * 1e3, unit="ms",
                        note=f"speed-up {wall / seconds:.2f}x over one thread; "
                             "from per-kernel one-thread times and chunk counts "
                             "(benchmarks/threads_scaling.py); an upper bound on the "
                             "speed-up: shared memory bandwidth is not modelled"))
    return rows


__all__ = ["THREADS", "estimate", "profile_one_thread", "scaling_rows"]

"""Per-kernel time of compiled plans: the switch, and what profiled plans measured.

Plans lowered inside ``with profiling():`` on the ``llvm`` backend are compiled with a
counter around each kernel call of their ``body`` (the CPU's cycle counter read before
and after, ``backends/llvm/profile.py``), a separate entry of the plan cache from the
plain plan. Each call of such a plan, through any entry point (``run``, ``bind``,
``batch``, a step), adds to its kernels' counters; ``kernel_times()`` reads them back
as one ``KernelTime`` per kernel of every profiled plan, with the kernel's cost
(``lower/cost.py``), so a caller can state each kernel's rate against the machine's.

Cycles become seconds by the counter's rate, measured once per process against
``time.perf_counter`` over a short busy wait (the counter runs at a constant rate on the
CPUs plans compile for). Profiled code is what the plain plan runs plus two counter
reads and an add per kernel; counters are not synchronized, so a plan called from
several threads at once counts roughly. Other backends ignore the switch.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..lower.cost import KernelCost

_LOCK = threading.Lock()
_ACTIVE = [0]


@contextlib.contextmanager
def profiling() -> Iterator[None]:
    """Plans lowered inside the block on the ``llvm`` backend count their kernels'
    time (see the module doc); plans lowered before are not profiled."""
    with _LOCK:
        _ACTIVE[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE[0] -= 1


def active() -> bool:
    """Whether a plan lowered now is to be profiled."""
    return _ACTIVE[0] > 0


@dataclass(frozen=True)
class KernelTime:
    """Kernel ``index`` of the plan ``plan`` (its cache key): its ``title`` (kind and
    nodes), its ``cost``, how many times the plan ran (``calls``) and the ``seconds`` the
    kernel took over all of them; ``chunks``: how many chunks its partition runs as on
    the worker pool (1: it runs on the calling thread), from which the time at other
    thread counts can be estimated."""

    plan: str
    index: int
    title: str
    cost: KernelCost
    calls: int
    seconds: float
    chunks: int = 1

    @property
    def label(self) -> str:
        return self.cost.label


#: reads a profiled plan's counters: ``reset`` -> (cycles per kernel, calls, now)
Reader = Callable[[bool], tuple[np.ndarray, int, int]]


@dataclass
class _Profiled:
    key: str
    titles: tuple[str, ...]
    costs: tuple[KernelCost, ...]
    read: Reader
    chunks: tuple[int, ...]


_PLANS: dict[str, _Profiled] = {}
_RATE: list[float] = []


def register(key: str, titles: Sequence[str], costs: Sequence[KernelCost],
             read: Reader, chunks: Sequence[int] | None = None) -> None:
    """Record a profiled plan (the llvm backend calls this once it loaded one);
    ``chunks``: each kernel's partition chunks (default: none partitioned)."""
    with _LOCK:
        _PLANS[key] = _Profiled(key, tuple(titles), tuple(costs), read,
                                tuple(chunks) if chunks is not None else (1,) * len(costs))
        if not _RATE:
            _RATE.append(_counter_rate(read))


def _counter_rate(read: Reader) -> float:
    """Counter ticks per second, against ``perf_counter`` over a 20 ms busy wait."""
    start, begin = read(False)[2], time.perf_counter()
    while time.perf_counter() - begin < 0.02:
        pass
    end, finish = read(False)[2], time.perf_counter()
    return (end - start) / (finish - begin)


def kernel_times(reset: bool = False) -> list[KernelTime]:
    """Every kernel of every profiled plan of this process with what it measured so far
    (``reset``: the counters start again from zero after reading)."""
    with _LOCK:
        plans = list(_PLANS.values())
        rate = _RATE[0] if _RATE else 1.0
    found = []
    for plan in plans:
        cycles, calls, _ = plan.read(reset)
        for k, (title, cost) in enumerate(zip(plan.titles, plan.costs)):
            found.append(KernelTime(plan.key, k, title, cost, calls, float(cycles[k]) / rate,
                                    plan.chunks[k]))
    return found


def reset() -> None:
    """Zero every profiled plan's counters."""
    kernel_times(reset=True)


__all__ = ["profiling", "active", "KernelTime", "kernel_times", "reset", "register"]

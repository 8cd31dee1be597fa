"""Backends: ``numba`` (generated loops compiled by Numba/LLVM) and ``reference`` (the
NumPy interpreter, the oracle every other backend is tested against).

This package is the one home of backend names: ``BACKENDS`` lists them, ``DEFAULT_BACKEND``
is what every API lowers to when none is named, and ``check_backend`` is the one check
(raising ``BackendError``, which names the valid choices). Operations, optimizers,
algorithm executors, distillation and the commands all validate through it, so adding a
backend is one line here plus its implementation.

``get(name)`` returns the ``Backend`` implementation ``Entry.lower`` hands a schedule to.
Importing this package imports neither Numba nor any backend module: a backend is
loaded when first asked for, so ``import tensorcode`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import BackendError

if TYPE_CHECKING:  # pragma: no cover
    from ..lower.schedule import Schedule

#: every backend name, in the order errors list them
BACKENDS: tuple[str, ...] = ("numba", "llvm", "reference")
#: the backend operations, optimizers, executors and commands use when none is named
DEFAULT_BACKEND = "numba"


def check_backend(name: Any, what: str = "backend") -> str:
    """``name`` if it is a backend, else ``BackendError`` naming the valid choices.

    ``what`` is the caller's word for the setting (``"executor"`` for the algorithm and
    distillation APIs), so the message names the keyword the caller passed."""
    if not isinstance(name, str) or name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}: {what} must be one of "
                           f"{list(BACKENDS)}")
    return name


class Program(Protocol):
    """What a backend that generates code hands the plan: the compiled entry points.

    ``run(*parameter_buffers, *constants, *inputs)`` returns one flat output arena per
    dtype; ``batch()`` and ``scalars()`` the batched and all-scalar variants (built on
    first use); ``entry(name)`` a step plan's ``run_step`` or ``run_steps`` (on first
    use); ``key`` names the program (the plan cache key); ``module`` is the loaded
    generated module and ``source`` its text (what ``plan.source()`` returns)."""

    key: str
    run: Any
    module: Any
    source: str

    def batch(self) -> Any: ...

    def scalars(self) -> Any: ...

    def entry(self, name: str) -> Any: ...


class Backend(Protocol):
    """A way to run a schedule.

    ``prepare(schedule, approximate)`` does the backend's ahead-of-time work and returns
    the ``Program`` the plan calls, or None when the backend interprets the optimized
    graph at call time (``reference``). ``approximates`` says whether ``approximate``
    means anything to it (only generated float32 code approximates)."""

    name: str
    approximates: bool

    def prepare(self, schedule: Schedule, approximate: bool) -> Program | None: ...


_MODULES = {"numba": "numba.backend", "llvm": "llvm", "reference": "reference.interpreter"}


def get(name: str) -> Backend:
    """The ``Backend`` called ``name`` (its module imported now, not before)."""
    module = importlib.import_module(f"{__name__}.{_MODULES[check_backend(name)]}")
    backend: Backend = module.BACKEND
    return backend


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "check_backend", "Backend", "Program", "get"]

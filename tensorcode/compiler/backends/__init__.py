"""Backends: ``llvm`` (the default: the schedule rendered to LLVM IR with llvmlite, loaded
as native code without Numba), ``numba`` (generated loops compiled by Numba) and
``reference`` (the NumPy interpreter, the oracle every other backend is tested against).

This package is the one home of backend names: ``BACKENDS`` lists them, ``DEFAULT_BACKEND``
is what every API lowers to when none is named, and ``check_backend`` is the one check
(raising ``BackendError``, which names the valid choices). Operations, optimizers,
algorithm executors, distillation and the commands all validate through it, so adding a
backend is one line here plus its implementation.

``get(name)`` returns the ``Backend`` implementation ``Entry.lower`` hands a ``Program``
to (``lower/program.py``); ``counters`` holds the compile counters and the cache
directory every backend shares.
Importing this package imports neither Numba nor any backend module: a backend is
loaded when first asked for, so ``import tensorcode`` stays light.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from ...errors import BackendError

if TYPE_CHECKING:  # pragma: no cover
    from ..lower.program import Program, Refused

#: the backends' names: the only place the literal names are written
NUMBA = "numba"
LLVM = "llvm"
REFERENCE = "reference"
#: every backend name, in the order errors list them
BACKENDS: tuple[str, ...] = (NUMBA, LLVM, REFERENCE)
#: the backend operations, optimizers, executors and commands use when none is named
DEFAULT_BACKEND = LLVM


def check_backend(name: Any, what: str = "backend") -> str:
    """``name`` if it is a backend, else ``BackendError`` naming the valid choices.

    ``what`` is the caller's word for the setting (``"executor"`` for the algorithm and
    distillation APIs), so the message names the keyword the caller passed."""
    if not isinstance(name, str) or name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}: {what} must be one of "
                           f"{list(BACKENDS)}")
    return name


class Compiled(Protocol):
    """What a backend hands the plan for a ``Program``: every call the plan makes.

    ``run(*parameter_buffers, *constants, *inputs)`` returns one flat output arena per
    dtype; ``batch()`` and ``scalars()`` the batched and all-scalar variants (built on
    first use); ``step()`` and ``steps()`` a step plan's ``run_step`` and ``run_steps``
    when ``fuses_updates`` (else the plan applies the optimizer's own update).
    ``bind(*head)`` and ``bind_scalars(*head)`` are ``run`` and ``scalars()`` with the
    parameter and constant buffers fixed, and ``bind_step(head, tail)`` is ``run_step``
    with the fixed buffers around the inputs, as ``call(inputs, lr) -> loss``
    (``calls.PlainCalls`` is their plain form; a backend may check the fixed buffers
    once instead). ``key`` names the compiled program (the plan cache key, empty when
    nothing was compiled) and ``source`` is the generated text (``plan.source()``).

    A call that cannot run raises one of ``refused``; ``refusal(error, inputs,
    leading)`` gives its ``Status`` and argument index as a ``lower.program.Refused``
    (``None`` when ``error`` is no refusal), and the plan raises the documented error
    from those two numbers alone. ``leading`` is a batch's leading axis extent (0: read
    it from the inputs) or ``None`` for a single call."""

    key: str
    run: Any
    fuses_updates: bool
    refused: tuple[type[BaseException], ...]

    @property
    def source(self) -> str: ...

    def batch(self) -> Any: ...

    def scalars(self) -> Any: ...

    def step(self) -> Any: ...

    def steps(self) -> Any: ...

    def bind(self, *head: Any) -> Callable[..., Any]: ...

    def bind_scalars(self, *head: Any) -> Callable[..., Any]: ...

    def bind_step(self, head: Sequence[Any], tail: Sequence[Any]
                  ) -> Callable[[Sequence[Any], float], Any]: ...

    def refusal(self, error: BaseException, inputs: Sequence[Any],
                leading: int | None = None) -> Refused | None: ...


class Backend(Protocol):
    """A way to run a ``Program`` (``lower/program.py``).

    ``prepare(program, approximate)`` does the backend's ahead-of-time work and returns
    the ``Compiled`` entry points the plan calls. ``approximates`` says whether
    ``approximate`` means anything to it (only generated float32 code approximates).
    ``update(rule, dtype)`` is an optimizer's eager update (``lower/update.py``):
    ``update(P, G, U, S.., K, PS, N, GS, steps, present, lr)``, the same calling
    convention on every backend; ``opt.step`` runs it on the optimizer's own backend
    (``DEFAULT_BACKEND``, ``llvm``, unless it names another)."""

    name: str
    approximates: bool

    def prepare(self, program: Program, approximate: bool) -> Compiled: ...

    def update(self, rule: Any, dtype: str) -> Callable[..., None]: ...


class Interpreter(Backend, Protocol):
    """The reference backend, which also evaluates a graph directly: ``evaluate(graph,
    values, roots)`` (what ``Network.forward`` runs) and ``prepared(graph, roots)`` (the
    walk done once for a graph run many times)."""

    def evaluate(self, graph: Any, values: Any, roots: Any) -> Any: ...

    def prepared(self, graph: Any, roots: Any) -> Any: ...


_MODULES = {NUMBA: "numba.backend", LLVM: "llvm", REFERENCE: "reference.backend"}


def get(name: str) -> Backend:
    """The ``Backend`` called ``name`` (its module imported now, not before)."""
    module = importlib.import_module(f"{__name__}.{_MODULES[check_backend(name)]}")
    backend: Backend = module.BACKEND
    return backend


def interpreter() -> Interpreter:
    """The reference backend, as the graph interpreter it also is."""
    return cast("Interpreter", get(REFERENCE))


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "NUMBA", "LLVM", "REFERENCE", "check_backend", "Backend",
           "Compiled", "Interpreter", "get", "interpreter"]

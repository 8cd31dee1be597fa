"""The one place distillation talks to the subset compiler and algorithm artifacts.

Replies are parsed by the subset grammar and compiled into the IR; nothing an author
writes is ever executed as Python. Running a program over many cases uses the batch
path and falls back to one call per case only when the batch fails, so a runtime failure
is charged to the case that caused it.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from .. import algorithm as algorithms
from ..algorithm import Algorithm
from ..compiler.backends import REFERENCE
from ..compiler.backends import get as get_backend
from ..compiler.subset import parse_reply as parse
from ..errors import CompileError, LoweringError
from .cases import COVERED, Case, Contract


def parse_reply(text: str) -> tuple[str, dict[str, Any]]:
    """``(source, parameters)`` from an author's reply (``CompileError`` if none)."""
    source, parameters = parse(text)
    return source, dict(parameters or {})


def compile_program(source: str, parameters: Mapping[str, Any] | None, inputs: Contract,
                    outputs: Contract, executor: str) -> tuple[Any, bool]:
    """Compile ``source`` to an Algorithm with the teacher's outputs plus ``covered``.

    Returns ``(algorithm, abstains)``. A program that returns exactly the teacher's
    outputs without ``covered`` still compiles: it claims every case and its report says
    ``abstains: False``. Any other rejection re-raises the first ``CompileError``, the
    one about the full contract, because that is the message the author can act on.
    """
    full = {**outputs, COVERED: ()}
    try:
        return algorithms.compile(source, inputs=inputs, outputs=full,
                                  parameters=parameters or None, executor=executor), True
    except LoweringError:
        raise  # the program is fine; a backend failed (reported as such, never retried)
    except CompileError as first:
        try:
            program = algorithms.compile(source, inputs=inputs, outputs=outputs,
                                         parameters=parameters or None, executor=executor)
        except LoweringError:
            raise
        except CompileError:
            raise first from None
        return program, False


def check_executor(executor: str) -> None:
    """Load a compiled executor's backend up front (``backends.get``: llvmlite or Numba):
    a broken installation fails here, at the caller, instead of being fed back to the
    author as a compile error of every attempt."""
    if executor != REFERENCE:
        get_backend(executor)


def load_algorithm(path: Any, executor: str) -> Any:
    """A saved algorithm artifact, loaded for ``executor``."""
    return Algorithm.load(path, executor=executor)


#: the case runner of the ``distill``/``repair`` call in progress (None: this process)
_RUNNER: contextvars.ContextVar[Any] = contextvars.ContextVar("distill_runner", default=None)
_F = TypeVar("_F", bound=Callable[..., Any])


def accepts_runner(function: _F) -> _F:
    """Honour ``function``'s keyword ``runner``: an object whose ``run_cases(program,
    cases)`` scores programs during the call (``tensorcode.distributed.RayExecutor``
    shards the cases across workers); ``None`` runs them in this process. Every scoring
    inside the call goes through ``run_cases``, so the seam is this one place."""
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        runner = kwargs.get("runner")
        if runner is not None and not callable(getattr(runner, "run_cases", None)):
            raise TypeError(f"runner must have a run_cases(program, cases) method, got "
                            f"{type(runner).__name__}")
        token = _RUNNER.set(runner)
        try:
            return function(*args, **kwargs)
        finally:
            _RUNNER.reset(token)
    return call  # type: ignore[return-value]


def run_cases(program: Any, cases: Sequence[Case]) -> list[dict[str, Any] | Exception]:
    """The program's outputs for each case, or the exception it raised on that case,
    through the call's ``runner`` when one was given."""
    runner = _RUNNER.get()
    if runner is not None:
        return list(runner.run_cases(program, cases))
    return run_cases_here(program, cases)


def run_cases_here(program: Any, cases: Sequence[Case]) -> list[dict[str, Any] | Exception]:
    """``run_cases`` in this process."""
    if not cases:
        return []
    names = list(cases[0])
    try:
        stacked = {name: np.stack([case[name] for case in cases]) for name in names}
        batch = program.batch(stacked)
        results: list[dict[str, Any] | Exception] = []
        for i in range(len(cases)):
            results.append({name: np.asarray(value)[i] for name, value in batch.items()})
        return results
    except Exception:  # charge the failure to the cases that cause it, one by one
        pass
    results = []
    for case in cases:
        try:
            results.append(dict(program(dict(case))))
        except Exception as error:  # a runtime failure is a verdict, not a crash
            results.append(error)
    return results


def parameters_of(program: Any) -> dict[str, np.ndarray]:
    """The program's declared parameters as float64 arrays, in declaration order."""
    return {name: np.array(value, dtype=np.float64)
            for name, value in dict(program.parameters).items()}


def parameters_to_json(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Parameter values as JSON-safe floats and nested lists."""
    out = {}
    for name, value in parameters.items():
        array = np.asarray(value, dtype=np.float64)
        out[name] = array.tolist() if array.shape else float(array)
    return out

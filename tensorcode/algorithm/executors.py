"""Executors: how an algorithm's network is run, behind one small interface.

``reference`` evaluates the IR node by node with the NumPy interpreter (the oracle);
``compiled`` lowers the network's output entry once into a plan
(``network.entry(outputs).lower()``) and calls it. The compiled executor never falls
back to the reference path: when plans cannot be built it raises, so a reported
"compiled" result is always a compiled one.

Feeds arrive validated (float64, exact shapes, C-contiguous) keyed by input name;
results are keyed by output name.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..compiler.subset import CompiledProgram
from ..errors import CompileError, TensorCodeError
from ..runtime.parameters import Parameters

EXECUTORS = ("compiled", "reference")


class Executor:
    """Runs one program: ``run`` for one case, ``run_batch`` over a leading case axis."""

    name = "abstract"

    def __init__(self, program: CompiledProgram) -> None:
        self.program = program
        self.network = program.network
        self.input_items = list(program.inputs.items())
        self.output_items = list(program.outputs.items())

    def run(self, parameters: Parameters, feeds: Mapping[str, np.ndarray]
            ) -> dict[str, np.ndarray]:
        raise NotImplementedError  # pragma: no cover - abstract

    def run_batch(self, parameters: Parameters, feeds: Mapping[str, np.ndarray], n: int
                  ) -> dict[str, np.ndarray]:
        raise NotImplementedError  # pragma: no cover - abstract


class ReferenceExecutor(Executor):
    """The NumPy interpreter, one case at a time (a batch is a loop over cases)."""

    name = "reference"

    def run(self, parameters: Parameters, feeds: Mapping[str, np.ndarray]
            ) -> dict[str, np.ndarray]:
        run = self.network.forward(parameters, {symbol: feeds[name]
                                                for name, symbol in self.input_items})
        return {name: np.array(run.of(symbol)) for name, symbol in self.output_items}

    def run_batch(self, parameters: Parameters, feeds: Mapping[str, np.ndarray], n: int
                  ) -> dict[str, np.ndarray]:
        results = {name: np.empty((n,) + symbol.shape, dtype=np.float64)
                   for name, symbol in self.output_items}
        for case in range(n):
            one = self.run(parameters, {name: feeds[name][case] for name, _ in self.input_items})
            for name, value in one.items():
                results[name][case] = value
        return results


def _plan_module() -> Any:
    try:
        from ..compiler import plan  # noqa: F401  (lazy: plans import numba)
    except ImportError as exc:
        raise CompileError(
            "the compiled executor needs compiled plans (tensorcode.compiler.plan), which "
            f"this installation cannot provide ({exc}); pass executor='reference' to run "
            "with the NumPy interpreter instead") from None
    return plan


class CompiledExecutor(Executor):
    """A plan lowered once for the output entry, reused for every call and every
    parameter table of the same network."""

    name = "compiled"

    def __init__(self, program: CompiledProgram) -> None:
        super().__init__(program)
        _plan_module()
        roots = [symbol for _, symbol in self.output_items]
        try:
            self.plan = self.network.entry(roots).lower()
        except TensorCodeError:
            raise
        except Exception as exc:  # a backend failure is reported, never hidden
            raise CompileError(f"lowering the program into a compiled plan failed "
                               f"({type(exc).__name__}: {exc}); executor='reference' runs "
                               "it with the NumPy interpreter") from exc
        self._feed_symbols = [(name, symbol) for name, symbol in self.input_items]

    def run(self, parameters: Parameters, feeds: Mapping[str, np.ndarray]
            ) -> dict[str, np.ndarray]:
        run = self.plan.forward(parameters, {symbol: feeds[name]
                                             for name, symbol in self._feed_symbols})
        return {name: np.array(run.of(symbol)) for name, symbol in self.output_items}

    def run_batch(self, parameters: Parameters, feeds: Mapping[str, np.ndarray], n: int
                  ) -> dict[str, np.ndarray]:
        run = self.plan.forward_batch(parameters, {symbol: feeds[name]
                                                   for name, symbol in self._feed_symbols})
        return {name: np.array(run.of(symbol)) for name, symbol in self.output_items}


def make_executor(name: str, program: CompiledProgram) -> Executor:
    """The executor called ``name`` for ``program`` (``CompileError`` when it cannot
    be built, ``TensorCodeError`` for an unknown name)."""
    if name == "compiled":
        return CompiledExecutor(program)
    if name == "reference":
        return ReferenceExecutor(program)
    raise TensorCodeError(f"executor must be one of {list(EXECUTORS)}, got {name!r}")


__all__ = ["EXECUTORS", "Executor", "ReferenceExecutor", "CompiledExecutor", "make_executor"]

"""Executors: how an algorithm's network is run, behind one small interface.

An executor is named by its backend (``compiler.backends.BACKENDS``): ``reference``
evaluates the IR node by node with the NumPy interpreter (the oracle); ``llvm`` (the
default) and ``numba`` lower the network's output entry once into a compiled plan
(``network.entry(outputs).lower(backend)``) and call it. A compiled executor never falls
back to the reference path: when plans cannot be built it raises, so a result reported
for ``llvm`` or ``numba`` always came from compiled code.

Feeds arrive validated (float64, exact shapes, C-contiguous) keyed by input name;
results are keyed by output name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..compiler.backends import BACKENDS, DEFAULT_BACKEND, REFERENCE, check_backend, interpreter
from ..compiler.plans.tables import Parameters
from ..compiler.subset import CompiledProgram
from ..errors import FeedError, LoweringError, TensorCodeError

#: the executor names: the backend names, one word per backend
EXECUTORS = BACKENDS


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

    def bind(self, parameters: Parameters) -> Callable[[Mapping[str, np.ndarray]],
                                                       dict[str, np.ndarray]]:
        """A one-case callable with ``parameters`` fixed (the single-call path)."""
        return functools.partial(self.run, parameters)

    def run_batch(self, parameters: Parameters, feeds: Mapping[str, np.ndarray], n: int
                  ) -> dict[str, np.ndarray]:
        raise NotImplementedError  # pragma: no cover - abstract

    def scalar_call(self, parameters: Parameters
                    ) -> tuple[Callable[[np.ndarray], tuple[float, ...]], tuple[str, ...]] | None:
        """``(run, output names)`` for a program of one input whose outputs are all
        scalars: ``run(array)`` returns the outputs as Python floats in that order, with
        no dict and no NumPy scalar made; ``None`` where the executor has no such path."""
        return None


def _fresh(value: np.ndarray) -> Any:
    """A caller-owned result: a ``numpy.float64`` for a scalar, else a writable copy."""
    array = np.asarray(value)
    return array[()] if array.ndim == 0 else np.array(array)


class ReferenceExecutor(Executor):
    """The NumPy interpreter, one case at a time (a batch is a loop over cases).

    The graph is resolved once (the interpreter's ``prepared`` walk for the output
    roots) and a
    bound table's payloads are gathered once per ``bind``, so a call runs only the
    ops: the interpreter is the oracle distillation scores every attempt with."""

    name = REFERENCE

    def __init__(self, program: CompiledProgram) -> None:
        super().__init__(program)
        self._prepared = interpreter().prepared(self.network.graph,
                                            [symbol.index for _, symbol in self.output_items])
        self._output_names = tuple(name for name, _ in self.output_items)
        self._feeds = tuple((name, symbol.index, symbol.shape, np.dtype(symbol.dtype))
                            for name, symbol in self.input_items)

    def bind(self, parameters: Parameters) -> Callable[[Mapping[str, np.ndarray]],
                                                       dict[str, np.ndarray]]:
        """One interpreted call per case with the table's payloads gathered once; feeds
        of the wrong shape or dtype raise ``FeedError`` (the caller converts first)."""
        self.network.check_parameters(parameters)
        fixed = {slot.node: payload
                 for slot, payload in zip(self.network.layout.slots, parameters.payloads())}
        prepared, names, inputs = self._prepared, self._output_names, self._feeds

        def call(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            sources = dict(fixed)
            for name, index, shape, dtype in inputs:
                value = feeds[name]
                if value.shape != shape or value.dtype != dtype:
                    raise FeedError(f"input {name!r}: expected {dtype} of shape "
                                    f"{list(shape)}, got {value.dtype} of shape "
                                    f"{list(value.shape)}")
                sources[index] = value
            return {name: _fresh(value) for name, value in zip(names, prepared(sources))}
        return call

    def run(self, parameters: Parameters, feeds: Mapping[str, np.ndarray]
            ) -> dict[str, np.ndarray]:
        return self.bind(parameters)(feeds)

    def run_batch(self, parameters: Parameters, feeds: Mapping[str, np.ndarray], n: int
                  ) -> dict[str, np.ndarray]:
        results = {name: np.empty((n,) + symbol.shape, dtype=np.float64)
                   for name, symbol in self.output_items}
        call = self.bind(parameters)  # the table's payloads gathered once for the batch
        for case in range(n):
            one = call({name: feeds[name][case] for name, _ in self.input_items})
            for name, value in one.items():
                results[name][case] = value
        return results


class CompiledExecutor(Executor):
    """A plan lowered once for the output entry, reused for every call and every
    parameter table of the same network."""

    def __init__(self, program: CompiledProgram, backend: str = DEFAULT_BACKEND) -> None:
        super().__init__(program)
        self.name = backend
        roots = [symbol for _, symbol in self.output_items]
        try:
            self.plan = self.network.entry(roots).lower(backend)
        except TensorCodeError:
            raise
        except Exception as exc:  # a backend failure is reported, never hidden
            raise LoweringError(f"lowering the program into a compiled plan failed "
                               f"({type(exc).__name__}: {exc}); executor='reference' runs "
                               "it with the NumPy interpreter") from exc
        # the plan refuses feeds for inputs it does not read (an output needing none)
        self._feed_symbols = [(name, symbol) for name, symbol in self.input_items
                              if self.plan.reads(symbol)]
        # the plan reads only the inputs its roots reach, in its own order
        plan_inputs = [symbol.index for symbol in self.plan.inputs()]
        by_index = {symbol.index: name for name, symbol in self.input_items}
        self._call_order = tuple(by_index[i] for i in plan_inputs)
        self._output_names = tuple(name for name, _ in self.output_items)

    def bind(self, parameters: Parameters) -> Callable[[Mapping[str, np.ndarray]],
                                                       dict[str, np.ndarray]]:
        """One compiled call per case with the table bound. Results are views of the
        buffer that call allocated (no two calls share one); scalar outputs are read
        out as ``numpy.float64``."""
        bound = self.plan.bind(parameters)  # the plan's public low-overhead path
        fast = self._flat_call(bound)
        if fast is not None:
            return fast
        names = self._output_names
        order = self._call_order

        def call(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            values = bound(*[feeds[n] for n in order])
            return {name: (value[()] if value.ndim == 0 else value)
                    for name, value in zip(names, values)}
        return call

    def _flat_call(self, bound: Any) -> Callable | None:
        """The bound plan's ``flat`` form, reading roots straight out of its output
        buffer (or its ``scalars`` form when every output is a scalar): the same
        compiled code as calling ``bound``, minus building a view per root. ``None`` when
        the program's shape (several inputs) does not fit that path."""
        run, slices = bound.flat
        if len(slices) != len(self._output_names) or len(self._call_order) != 1:
            return None
        (only,) = self._call_order
        picks = [(name, k, a, b, shape)
                 for name, (k, a, b, shape) in zip(self._output_names, slices)]
        if all(shape == () for _, _, _, _, shape in picks):
            return _scalar_reader(bound.scalars, only, [name for name, *_ in picks])

        def call_general(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            outs = run(feeds[only])
            return {name: (outs[k][a] if shape == () else outs[k][a:b].reshape(shape))
                    for name, k, a, b, shape in picks}
        return call_general

    def scalar_call(self, parameters: Parameters
                    ) -> tuple[Callable[[np.ndarray], tuple[float, ...]], tuple[str, ...]] | None:
        bound = self.plan.bind(parameters)
        _, slices = bound.flat
        if len(self._call_order) != 1 or len(slices) != len(self._output_names):
            return None
        run = bound.scalars
        return None if run is None else (run, self._output_names)

    def run(self, parameters: Parameters, feeds: Mapping[str, np.ndarray]
            ) -> dict[str, np.ndarray]:
        run = self.plan.forward(parameters, {symbol: feeds[name]
                                             for name, symbol in self._feed_symbols})
        return {name: _fresh(run.of(symbol)) for name, symbol in self.output_items}

    def run_batch(self, parameters: Parameters, feeds: Mapping[str, np.ndarray], n: int
                  ) -> dict[str, np.ndarray]:
        if not self._feed_symbols:
            # outputs that read no input are the same for every case; the plan has no
            # input to count the cases by, so it runs once and each case gets a copy
            one = self.run(parameters, {})
            return {name: np.repeat(value[np.newaxis], n, axis=0)
                    for name, value in one.items()}
        run = self.plan.forward_batch(parameters, {symbol: feeds[name]
                                                   for name, symbol in self._feed_symbols})
        # run_batch allocates its output buffer per call, so its views are the caller's
        return {name: run.of(symbol) for name, symbol in self.output_items}


def _scalar_reader(run: Callable, only: str, names: list[str]) -> Callable:
    """A single-call function for programs whose outputs are all scalars: the plan's
    ``bound.scalars`` returns the numbers themselves, each handed back as
    ``numpy.float64`` (the subset's one dtype). Literal dicts for the common one to
    three outputs: a comprehension costs more than the call."""
    f64 = np.float64
    if len(names) == 1:
        (n0,) = names

        def one(feeds):
            (v0,) = run(feeds[only])
            return {n0: f64(v0)}
        return one
    if len(names) == 2:
        n0, n1 = names

        def two(feeds):
            v0, v1 = run(feeds[only])
            return {n0: f64(v0), n1: f64(v1)}
        return two
    if len(names) == 3:
        n0, n1, n2 = names

        def three(feeds):
            v0, v1, v2 = run(feeds[only])
            return {n0: f64(v0), n1: f64(v1), n2: f64(v2)}
        return three

    def many(feeds):
        return {name: f64(v) for name, v in zip(names, run(feeds[only]))}
    return many


def make_executor(name: str, program: CompiledProgram) -> Executor:
    """The executor called ``name`` for ``program`` (``CompileError`` when it cannot
    be built, ``BackendError`` for an unknown name)."""
    if check_backend(name, "executor") == REFERENCE:
        return ReferenceExecutor(program)
    return CompiledExecutor(program, name)


__all__ = ["EXECUTORS", "Executor", "ReferenceExecutor", "CompiledExecutor", "make_executor"]

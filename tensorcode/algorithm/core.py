"""``Algorithm``: a compiled author program with its parameters and an executor.

An algorithm is immutable: its network (the IR), its input and output contracts and its
parameter values. ``with_parameters`` makes a new algorithm over the same network (and
the same executor, so a compiled plan is reused, not lowered again). Every value is
float64 (see ``tensorcode.compiler.subset``); results are fresh writable arrays.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..compiler.backends import DEFAULT_BACKEND, check_backend
from ..compiler.core.verify import verify
from ..compiler.plans.tables import Parameters
from ..compiler.subset import DTYPE, CompiledProgram, compile_program, normalize_parameters
from ..errors import ArtifactError, CompileError, FeedError, TensorCodeError
from ..files import atomic_write_bytes
from . import algorithm_file
from .executors import Executor, make_executor

#: the one float64 dtype object NumPy hands out (a non-native byte order is another)
_FLOAT64 = np.dtype(np.float64)


class Algorithm:
    """A compiled program: call it on one case, ``batch`` it over many, save it."""

    def __init__(self, program: CompiledProgram, parameters: Mapping[str, np.ndarray],
                 executor: str | Executor = DEFAULT_BACKEND) -> None:
        self._program = program
        network = program.network
        by_node = {symbol.index: name for name, symbol in program.parameters.items()}
        payloads = [parameters[by_node[slot.node]] for slot in network.layout.slots]
        self._table = Parameters.from_payloads(network.layout, payloads)
        self._parameters = {name: self._table.of(symbol)
                            for name, symbol in program.parameters.items()}
        if isinstance(executor, Executor):
            if executor.program is not program:
                raise TensorCodeError("an executor serves the program it was built for")
            self._executor = executor
        else:
            self._executor = make_executor(executor, program)
        self._call = self._executor.bind(self._table)
        self._input_shapes = {n: s.shape for n, s in program.inputs.items()}
        self._input_count = len(self._input_shapes)
        self._output_shapes = {n: s.shape for n, s in program.outputs.items()}

    # -- description ----------------------------------------------------------------------
    @property
    def plan(self) -> Any:
        """The compiled plan this algorithm runs (``None`` on the reference executor)."""
        return getattr(self._executor, "plan", None)

    @property
    def inputs(self) -> dict[str, tuple[int, ...]]:
        """The input contract: name -> shape of one case."""
        return dict(self._input_shapes)

    @property
    def outputs(self) -> dict[str, tuple[int, ...]]:
        """The output contract: name -> shape of one case."""
        return dict(self._output_shapes)

    @property
    def parameters(self) -> dict[str, np.ndarray]:
        """The named parameters (read-only float64 arrays), in declaration order."""
        return dict(self._parameters)

    @property
    def executor(self) -> str:
        return self._executor.name

    @property
    def source_sha256(self) -> str:
        return self._program.source_sha256

    @property
    def program(self) -> CompiledProgram:
        """The network and its named symbols (for gradient fits and inspection)."""
        return self._program

    @property
    def network(self) -> Any:
        return self._program.network

    def parameter_table(self) -> Parameters:
        """The parameters as the network's ``Parameters`` table."""
        return self._table

    def describe(self) -> str:
        """The IR's textual form."""
        return self._program.network.describe()

    def __repr__(self) -> str:
        return (f"Algorithm(inputs={self._input_shapes}, outputs={self._output_shapes}, "
                f"parameters={list(self._parameters)}, executor={self.executor!r})")

    # -- running ----------------------------------------------------------------------------
    def _feeds(self, inputs: Any, batch: bool) -> tuple[dict[str, np.ndarray], int]:
        if not isinstance(inputs, Mapping):
            raise FeedError(f"inputs must be a mapping from input names to arrays, got "
                            f"{type(inputs).__name__}")
        if len(inputs) != len(self._input_shapes) or any(
                name not in self._input_shapes for name in inputs):
            missing = [n for n in self._input_shapes if n not in inputs]
            extra = [n for n in inputs if n not in self._input_shapes]
            raise FeedError(f"inputs must be exactly {list(self._input_shapes)}"
                            + (f"; missing {missing}" if missing else "")
                            + (f"; unknown {extra}" if extra else ""))
        feeds: dict[str, np.ndarray] = {}
        count = -1
        for name, shape in self._input_shapes.items():
            value = inputs[name]
            if not (isinstance(value, np.ndarray) and value.dtype == np.float64
                    and value.flags.c_contiguous):
                try:
                    value = np.ascontiguousarray(value, dtype=np.float64)
                except (TypeError, ValueError) as exc:
                    raise FeedError(f"input {name!r}: cannot read it as float64 numbers "
                                    f"({exc})") from None
            if batch:
                if value.ndim != len(shape) + 1 or value.shape[1:] != shape:
                    raise FeedError(f"input {name!r}: a batch needs shape [N, "
                                    f"{', '.join(map(str, shape))}] (N cases of "
                                    f"{list(shape)}), got {list(value.shape)}")
                if count not in (-1, value.shape[0]):
                    raise FeedError(f"input {name!r} has {value.shape[0]} cases but an "
                                    f"earlier input has {count}; every input needs the "
                                    "same number of cases")
                count = value.shape[0]
            elif value.shape != shape:
                raise FeedError(f"input {name!r}: expected shape {list(shape)}, got "
                                f"{list(value.shape)}")
            feeds[name] = value
        return feeds, count

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The outputs for one case: ``{name: array of the output's shape}``."""
        # Fast path: a plain dict with as many entries as inputs goes straight to the
        # executor, whose compiled code checks dtype, layout and shape itself; anything
        # it refuses is validated below, which raises the explanatory FeedError.
        # Only float64 arrays take it: a list or an integer array would be refused by the
        # compiled dispatch only after a costly type search, so it is converted first (once).
        if type(inputs) is dict and len(inputs) == self._input_count:
            fast: Mapping[str, Any] | None = inputs
            for value in inputs.values():
                if type(value) is not np.ndarray or value.dtype is not _FLOAT64:
                    try:
                        fast = {name: np.asarray(inputs[name], dtype=np.float64)
                                for name in self._input_shapes}
                    except (KeyError, TypeError, ValueError, OverflowError):
                        fast = None  # validated below, which says what is wrong
                    break
            if fast is not None:
                try:
                    return self._call(fast)
                except (KeyError, TypeError, ValueError, FeedError):
                    pass
        feeds, _ = self._feeds(inputs, batch=False)
        return self._call(feeds)

    def validated_call(self) -> Any:
        """The compiled call for one case, without ``__call__``'s checks:
        ``call(feeds) -> outputs`` where ``feeds`` is a dict of exactly the input names,
        each a C-contiguous float64 array of its declared shape (what
        ``distill.inputs.check_case`` returns). For callers such as ``Router`` that check
        every request against the contract themselves: those checks cost as much as a
        small compiled call."""
        return self._call

    def validated_scalars(self) -> tuple[Any, tuple[str, ...]] | None:
        """``(run, output names)`` when the program reads one input and every output is a
        scalar, on an executor with that path: ``run(array)`` takes the validated input
        array (as ``validated_call``'s feeds) and returns the outputs as Python floats in
        the order of the names; else ``None``. The cheapest call there is, for ``Router``."""
        return self._executor.scalar_call(self._table)

    def batch(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The outputs for N cases: each input has a leading axis of N cases and each
        output comes back as ``[N, *shape]``."""
        feeds, count = self._feeds(inputs, batch=True)
        if count == 0:
            return {n: np.empty((0,) + s, dtype=np.float64)
                    for n, s in self._output_shapes.items()}
        return self._executor.run_batch(self._table, feeds, count)

    # -- parameters ---------------------------------------------------------------------------
    def with_parameters(self, mapping: Mapping[str, Any] | None = None, **named: Any
                        ) -> Algorithm:
        """A new algorithm over the same network with some parameters replaced (names
        and shapes must match); this algorithm is unchanged."""
        updates = dict(mapping or {})
        updates.update(named)
        unknown = [n for n in updates if n not in self._parameters]
        if unknown:
            raise TensorCodeError(f"{unknown} are not parameters of this algorithm; it has "
                                  f"{list(self._parameters)}")
        try:
            values = normalize_parameters(updates)
        except CompileError as exc:
            raise TensorCodeError(str(exc)) from None
        for name, value in values.items():
            if value.shape != self._parameters[name].shape:
                raise TensorCodeError(f"parameter {name!r} has shape "
                                      f"{list(self._parameters[name].shape)}, the "
                                      f"replacement has {list(value.shape)}")
        merged = {**self._parameters, **values}
        return Algorithm(self._program, merged, self._executor)

    # -- files --------------------------------------------------------------------------------
    def to_document(self) -> dict:
        """The artifact as a JSON-ready dict."""
        return algorithm_file.to_document(self._program, self._parameters)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the artifact atomically as JSON; returns the path."""
        path = Path(path)
        atomic_write_bytes(path, algorithm_file.dumps(self.to_document()))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, executor: str = DEFAULT_BACKEND) -> Algorithm:
        """Read and validate an artifact (``ArtifactError`` on any problem). The source
        text is never read: the artifact holds only its hash."""
        check_backend(executor, "executor")
        path = Path(path)
        try:
            with open(path, "rb") as handle:
                data = handle.read(algorithm_file.MAX_ARTIFACT_BYTES + 1)
        except OSError as exc:
            raise ArtifactError(f"cannot read the file: {exc.strerror or exc}", path) from None
        program, parameters = algorithm_file.loads(data, path)
        return cls(program, parameters, executor)

    @classmethod
    def from_document(cls, document: Mapping[str, Any], executor: str = DEFAULT_BACKEND
                      ) -> Algorithm:
        """An algorithm from an artifact document already in memory (validated)."""
        program, parameters = algorithm_file.from_document(document)
        return cls(program, parameters, executor)


def compile(source: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any],
            parameters: Mapping[str, Any] | None = None, executor: str = DEFAULT_BACKEND
            ) -> Algorithm:
    """Compile an author program against its contracts into an ``Algorithm``.

    ``inputs`` and ``outputs`` map names to per-case shapes (``{"features": (12,)}``);
    ``parameters`` are the json block's values (``{"threshold": 0.5}``), taken by the
    function as extra arguments. Rejections are ``CompileError`` with line, column, the
    offending line and an instruction. The IR is pruned to what the outputs need and
    rebuilt through the artifact reader, so a compiled algorithm and its saved-and-loaded
    copy are the same IR.
    """
    check_backend(executor, "executor")
    compiled = compile_program(source, inputs, outputs, parameters)
    values = {name: compiled.network.graph.nodes[symbol.index].value
              for name, symbol in compiled.parameters.items()}
    program, values = algorithm_file.from_document(algorithm_file.to_document(compiled, values))
    verify(program.network.graph)
    return Algorithm(program, values, executor)


__all__ = ["Algorithm", "compile", "DTYPE"]

"""Dense building blocks as operations: ``LinearOperation``, ``MlpOperation`` and
``EmbeddingOperation``.

Each wraps the tape-level module of ``tc.nn`` (so the layer is defined once) and adds
what an operation needs: an owned table, a configuration, and call-path conversion of
arrays. Batched inputs are padded to power-of-two row counts on the call path, so a last
partial batch reuses a plan instead of compiling a new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import nn
from ..compiler.plans.tape import Tape
from ..compiler.trace.draws import check_probability
from ..compiler.trace.expr import Expr
from ..errors import ShapeError
from ..nn import init as initializers
from .base import Operation, as_float_array, check_last_axis


def positive_int(name: str, value: Any) -> int:
    """``value`` as an int when it is a positive integer (bools refused), else
    ``ValueError`` naming ``name``: the check every operation's sizes share."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def checked_seed(value: Any) -> int:
    """``value`` as an int when it is a usable seed (a non-negative integer)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"seed must be a non-negative int, got {value!r}")
    return int(value)


class LinearOperation(Operation):
    """``x @ weights + bias`` for ``x`` of shape ``[..., n_in]``; Xavier-initialized
    weights ``[n_in, n_out]`` from ``seed`` and a zero bias."""

    #: stable identifiers in experience and tool files (fingerprints), kept from the
    #: package's former name ``tensorcode.ops`` so files written before still load
    qualified_name = "tensorcode.ops.Linear"
    pads_rows = True

    def __init__(self, n_in: int, n_out: int, seed: int = 0, backend: str | None = None
                 ) -> None:
        self.n_in, self.n_out = positive_int("n_in", n_in), positive_int("n_out", n_out)
        self.seed = checked_seed(seed)
        self._initialize(backend)

    def configuration(self) -> dict:
        return {"n_in": self.n_in, "n_out": self.n_out, "dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> nn.Linear:
        init = initializers.xavier(self.seed) if fresh else initializers.zeros()
        return nn.Linear(tape, self.n_in, self.n_out, init=init)

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        (x,) = one_argument(self, args)
        array = as_float_array("LinearOperation", x)
        check_last_axis(f"LinearOperation({self.n_in}, {self.n_out})", array, self.n_in)
        return [array]

    def express(self, built: nn.Linear, inputs: Sequence[Expr]) -> Expr:
        return built(inputs[0])


class MlpOperation(Operation):
    """Linear layers of ``sizes`` with ``activation`` between them (``tc.nn.Mlp``)."""

    qualified_name = "tensorcode.ops.Mlp"
    pads_rows = True

    def __init__(self, sizes: Sequence[int], activation: str = "tanh", seed: int = 0,
                 backend: str | None = None, dropout: float = 0.0) -> None:
        self.dropout = check_probability("dropout p", dropout, upper_open=True)
        sizes = [positive_int("sizes[*]", s) for s in sizes]
        if len(sizes) < 2:
            raise ShapeError(f"MlpOperation: sizes needs an input and an output size, got {sizes}")
        if activation not in nn.ACTIVATIONS:
            raise ValueError(f"MlpOperation: unknown activation {activation!r}; use one of "
                             f"{sorted(nn.ACTIVATIONS)}")
        self.sizes, self.activation, self.seed = sizes, activation, checked_seed(seed)
        self._initialize(backend)

    def configuration(self) -> dict:
        config: dict[str, Any] = {"sizes": list(self.sizes), "activation": self.activation,
                                  "dtype": "float32"}
        if self.dropout:  # absent at 0, so fingerprints without dropout stay as they were
            config["dropout"] = self.dropout
        return config

    def build(self, tape: Tape, fresh: bool = False) -> nn.Mlp:
        init = initializers.xavier(self.seed) if fresh else initializers.zeros()
        return nn.Mlp(tape, self.sizes, activation=self.activation, init=init,
                      dropout=self.dropout)

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        (x,) = one_argument(self, args)
        array = as_float_array("MlpOperation", x)
        check_last_axis(f"MlpOperation({self.sizes})", array, self.sizes[0])
        return [array]

    def express(self, built: nn.Mlp, inputs: Sequence[Expr]) -> Expr:
        return built.train(self.training)(inputs[0])


class EmbeddingOperation(Operation):
    """Rows of an ``[n, dim]`` table looked up by integer indices (normal(0, 1) init)."""

    qualified_name = "tensorcode.ops.Embedding"
    pads_rows = True
    min_pad_rank = 1

    def __init__(self, n: int, dim: int, seed: int = 0, backend: str | None = None) -> None:
        self.n, self.dim = positive_int("n", n), positive_int("dim", dim)
        self.seed = checked_seed(seed)
        self._initialize(backend)

    def configuration(self) -> dict:
        return {"n": self.n, "dim": self.dim, "dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> nn.Embedding:
        init = initializers.normal(self.seed, 1.0) if fresh else initializers.zeros()
        return nn.Embedding(tape, self.n, self.dim, init=init)

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        (indices,) = one_argument(self, args)
        array = np.asarray(indices)
        if array.dtype.kind not in "iu":
            raise TypeError(f"EmbeddingOperation: indices must be integers, got {array.dtype}")
        if array.size and (array.min() < 0 or array.max() >= self.n):
            raise IndexError(f"EmbeddingOperation({self.n}, {self.dim}): indices must lie in "
                             f"[0, {self.n}), got range [{array.min()}, {array.max()}]")
        return [np.ascontiguousarray(array, dtype=np.int64)]

    def express(self, built: nn.Embedding, inputs: Sequence[Expr]) -> Expr:
        return built(inputs[0])


def one_argument(op: Operation, args: Sequence[Any]) -> tuple[Any]:
    """The single input of a one-input operation call, or ``TypeError`` naming it."""
    if len(args) != 1:
        raise TypeError(f"{type(op).__name__} takes one input, got {len(args)}")
    return (args[0],)


__all__ = ["LinearOperation", "MlpOperation", "EmbeddingOperation"]

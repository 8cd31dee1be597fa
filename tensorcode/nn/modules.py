"""Modules: parameter-owning building blocks recorded on a tape.

A module records its parameters on the tape when it is constructed and records its
computation each time it is called on an ``Expr``, so one module can express a training
batch and a grid-shaped twin over the same parameter symbols.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import gelu, layer_norm
from ..compiler.trace.draws import check_probability, dropout
from ..compiler.trace.expr import Expr
from ..errors import ShapeError
from . import init as initializers


class Module:
    """Base class: parameters and children in visit order, with structured paths.

    ``name`` prefixes the paths of the module's parameters (``enc.weights``). Left out,
    the paths stay unique within the tape, as PyTorch's ``named_parameters()`` are
    within a model: the first unnamed module on a tape that holds no parameters yet is
    the root and keeps bare paths (``weights``, ``0.bias``); a later one is named after
    its kind and the first free number (``linear1``, ``mlp2``), so ``tc.checkpoint``
    can save a model built without names."""

    def __init__(self, tape: Tape, name: str | None = None) -> None:
        self.tape = tape
        if name is None and tape is not None:
            name = _default_name(tape, type(self).__name__.lower())
        self.name = name
        self._parameters: dict[str, Expr] = {}
        self._children: dict[str, Module] = {}
        self.training = True

    def train(self, mode: bool = True) -> Module:
        """Set the training mode of this module and its children (``Dropout`` reads
        it: identity in eval mode); returns self."""
        self.training = bool(mode)
        for child in self._children.values():
            child.train(mode)
        return self

    def eval(self) -> Module:
        """``train(False)``."""
        return self.train(False)

    def _path(self, local: str) -> str:
        return f"{self.name}.{local}" if self.name else local

    def _parameter(self, local: str, initial: Any) -> Expr:
        symbol = self.tape.parameter(initial, name=self._path(local))
        self._parameters[local] = symbol
        return symbol

    def _child(self, local: str, module: Module) -> Module:
        self._children[local] = module
        return module

    def named_parameters(self) -> list[tuple[str, Expr]]:
        """``(path, symbol)`` in visit order; paths are relative to this module."""
        result = list(self._parameters.items())
        for local, child in self._children.items():
            result += [(f"{local}.{path}", symbol) for path, symbol in child.named_parameters()]
        return result

    def parameters(self) -> list[Expr]:
        """The parameter symbols in recording order."""
        return [symbol for _, symbol in self.named_parameters()]

    def __iter__(self) -> Iterator[Expr]:
        return iter(self.parameters())

    def __call__(self, x: Expr) -> Expr:  # pragma: no cover - abstract
        raise NotImplementedError


def _default_name(tape: Tape, kind: str) -> str | None:
    """None for the root module of ``tape`` (nothing recorded yet), else ``<kind><n>``
    with the smallest ``n >= 1`` that no parameter path on ``tape`` starts with."""
    names = [node.name for node in tape.nodes() if node.op == "parameter" and node.name]
    if not tape.parameters():
        return None
    n = 1
    while any(x == f"{kind}{n}" or x.startswith(f"{kind}{n}.") for x in names):
        n += 1
    return f"{kind}{n}"


class Linear(Module):
    """``x @ weights + bias`` with ``weights`` of shape ``[n_in, n_out]``; the weights come
    from ``init`` (default ``xavier(0)``) and the bias starts at zero."""

    def __init__(self, tape: Tape, n_in: int, n_out: int,
                 init: Callable[..., Any] | None = None, bias: bool = True,
                 dtype: Any = "float32", name: str | None = None,
                 weight_name: str = "weights") -> None:
        super().__init__(tape, name)
        init = init or initializers.xavier(0)
        self.n_in, self.n_out = int(n_in), int(n_out)
        # ``weight_name`` lets a model announce a foreign layout's path (GPT-2's "weight")
        self.weights = self._parameter(weight_name, init((self.n_in, self.n_out), dtype))
        self.bias = (self._parameter("bias", initializers.zeros()((self.n_out,), dtype))
                     if bias else None)

    def __call__(self, x: Expr) -> Expr:
        if not x.shape or x.shape[-1] != self.n_in:
            raise ShapeError(f"Linear({self.n_in}, {self.n_out}): input last axis must be "
                             f"{self.n_in}, got shape {list(x.shape)}")
        lead = x.shape[:-1]
        if len(lead) > 1:  # every leading axis as rows of one product: one BLAS call
            # forward and one for the weights' gradient, not one per batch entry
            rows = 1
            for n in lead:
                rows *= n
            return self(x.reshape(rows, self.n_in)).reshape(*lead, self.n_out)
        y = x @ self.weights
        if self.bias is None:
            return y
        with y.builder.broadcasting("numpy"):  # the bias row is added to every row
            return y + self.bias


ACTIVATIONS: dict[str, Callable[[Expr], Expr]] = {
    "tanh": lambda x: x.tanh(),
    "relu": lambda x: x.relu(),
    "sigmoid": lambda x: x.sigmoid(),
    "gelu": gelu,
    "identity": lambda x: x,
}


class Mlp(Module):
    """Linear layers of ``sizes`` with ``activation`` between them (not after the last).
    Layer k's parameters are ``k.weights`` and ``k.bias``; all draw from one ``init``."""

    def __init__(self, tape: Tape, sizes: Sequence[int], activation: str = "tanh",
                 init: Callable[..., Any] | None = None, dtype: Any = "float32",
                 name: str | None = None, dropout: float = 0.0) -> None:
        super().__init__(tape, name)
        if len(sizes) < 2:
            raise ShapeError(f"Mlp: sizes needs at least an input and an output size, got "
                             f"{list(sizes)}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"Mlp: unknown activation {activation!r}; use one of "
                             f"{sorted(ACTIVATIONS)}")
        init = init or initializers.xavier(0)
        self.sizes = [int(s) for s in sizes]
        self.activation = activation
        self.layers = [self._child(str(k), Linear(tape, a, b, init=init, dtype=dtype,
                                                  name=self._path(str(k))))
                       for k, (a, b) in enumerate(zip(self.sizes, self.sizes[1:]))]
        # dropout after each hidden activation (a module without parameters)
        self.dropout = Dropout(dropout)
        self._children["dropout"] = self.dropout

    def __call__(self, x: Expr) -> Expr:
        act = ACTIVATIONS[self.activation]
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k < len(self.layers) - 1:
                x = self.dropout(act(x))
        return x


class Embedding(Module):
    """A ``[n, dim]`` table looked up by integer indices (``weights`` rows)."""

    def __init__(self, tape: Tape, n: int, dim: int, init: Callable[..., Any] | None = None,
                 dtype: Any = "float32", name: str | None = None,
                 weight_name: str = "weights") -> None:
        super().__init__(tape, name)
        init = init or initializers.normal(0, 1.0)
        self.n, self.dim = int(n), int(dim)
        self.weights = self._parameter(weight_name, init((self.n, self.dim), dtype))

    def __call__(self, indices: Expr) -> Expr:
        return self.weights.take(indices, axis=0)


class LayerNorm(Module):
    """Layer normalization over the last axis with a learned ``gain`` and ``bias``
    (``tc.layer_norm`` is the parameterless form). ``gain_name`` is the gain's path
    (GPT-2's checkpoints call it ``weight``)."""

    def __init__(self, tape: Tape, dim: int, eps: float = 1e-5, dtype: Any = "float32",
                 name: str | None = None, gain_name: str = "gain") -> None:
        super().__init__(tape, name)
        self.dim, self.eps = int(dim), float(eps)
        self.gain = self._parameter(gain_name, initializers.ones()((self.dim,), dtype))
        self.bias = self._parameter("bias", initializers.zeros()((self.dim,), dtype))

    def __call__(self, x: Expr) -> Expr:
        if not x.shape or x.shape[-1] != self.dim:
            raise ShapeError(f"LayerNorm({self.dim}): input last axis must be {self.dim}, got "
                             f"shape {list(x.shape)}")
        with x.builder.broadcasting("numpy"):  # gain and bias apply to every row
            return layer_norm(x, self.eps) * self.gain + self.bias


class Dropout(Module):
    """Zeroes each element with probability ``p`` in [0, 1) and scales the rest by
    ``1 / (1 - p)`` while training; the identity (drawing nothing) in eval mode or when
    ``p == 0``. Draws from the input's ``tape.random_key()``, so a plan holding it takes
    a generator. It owns no parameters and needs no tape to build."""

    def __init__(self, p: float = 0.5, name: str | None = None) -> None:
        super().__init__(None, name)  # type: ignore[arg-type]
        self.p = check_probability("dropout p", p, upper_open=True)

    def __call__(self, x: Expr) -> Expr:
        return dropout(x, self.p, training=self.training)


__all__ = ["Module", "Linear", "Mlp", "Embedding", "LayerNorm", "Dropout", "ACTIVATIONS"]

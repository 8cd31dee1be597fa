"""The intermediate representation: a typed SSA graph and its textual form.

A ``Graph`` is a tuple of ``Node`` in topological order; a node's id is its index and
its inputs are ids of earlier nodes. Every node carries a static ``Type`` (shape and
dtype) fixed at record time. Source nodes are ``parameter`` (with its initial),
``input`` (with its default feed) and ``leaf`` (a constant); every other node is a pure
op from the registry in ``core/registry.py``. There are no in-place ops and no aliasing, so every
pass is a function from one graph to another.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dtypes import DTYPES, FLOAT_DTYPES, NAME_OF_NUMPY, canonical_dtype

SOURCE_OPS = frozenset({"parameter", "input", "leaf"})


@dataclass(frozen=True)
class Type:
    """A static tensor type: a shape tuple and a canonical dtype name."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    def __str__(self) -> str:
        return f"{DTYPES[self.dtype]}[{','.join(str(d) for d in self.shape)}]"

    @staticmethod
    def of(array: np.ndarray) -> Type:
        name = NAME_OF_NUMPY.get(array.dtype)
        return Type(array.shape, name if name is not None else array.dtype.name)


def freeze_attrs(attrs: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    """Attrs as a sorted tuple of (key, value) with lists turned into tuples, so
    nodes hash and compare by value (common subexpression elimination relies on it)."""
    def freeze(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return tuple(freeze(v) for v in value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        return value
    return tuple(sorted((str(k), freeze(v)) for k, v in (attrs or {}).items()))


@dataclass(frozen=True, eq=False)
class Node:
    """One SSA value: ``op`` applied to earlier nodes ``inputs`` with ``attrs``.

    ``value`` holds the recorded initial (parameter), default feed (input) or constant
    (leaf); ``name`` is the optional display name of a parameter or input. ``origin``,
    for a parameter or input of an entry's graph, is the id of the network node it
    stands for: every pass carries a source node over as it is, so the origin travels
    through optimization as data (it is no part of the node's text or key).
    """

    op: str
    inputs: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    type: Type
    value: np.ndarray | None = None
    name: str | None = None
    origin: int | None = None

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def attr_dict(self) -> dict[str, Any]:
        return dict(self.attrs)

    def key(self) -> tuple:
        """A value-identity key for pure ops (CSE); source nodes key by their content."""
        if self.op == "leaf":
            assert self.value is not None
            return ("leaf", self.type, self.value.tobytes())
        return (self.op, self.inputs, self.attrs, self.type)


@dataclass(frozen=True)
class Graph:
    """An SSA graph: ``nodes`` in topological order; ``outputs`` are the ids a
    consumer asked for (the roots of an entry; empty for a whole network)."""

    nodes: tuple[Node, ...]
    outputs: tuple[int, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.nodes)

    def __getitem__(self, index: int) -> Node:
        return self.nodes[index]

    def ids(self, op: str) -> list[int]:
        return [i for i, node in enumerate(self.nodes) if node.op == op]

    def users(self) -> list[list[int]]:
        result: list[list[int]] = [[] for _ in self.nodes]
        for i, node in enumerate(self.nodes):
            for j in node.inputs:
                result[j].append(i)
        return result


def _format_value(value: np.ndarray) -> str:
    if value.size <= 8:
        flat = value.reshape(-1).tolist()
        text = ", ".join(repr(v) for v in flat)
        return text if value.ndim == 0 else f"dense<[{text}]>"
    digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]
    return f"dense<sha256:{digest}>"


def _format_attr(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "[" + ",".join(_format_attr(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def format_node(index: int, node: Node) -> str:
    """One line of the textual form, e.g. ``%4 = matmul %2, %0 : f32[48,16]``."""
    parts = [f"%{index} = {node.op}"]
    if node.op in ("parameter", "input"):
        if node.name is not None:
            parts.append(f'"{node.name}"')
    elif node.op == "leaf":
        assert node.value is not None
        parts.append(_format_value(node.value))
    if node.inputs:
        parts.append(", ".join(f"%{i}" for i in node.inputs))
    if node.attrs:
        parts.append("{" + ", ".join(f"{k}={_format_attr(v)}" for k, v in node.attrs) + "}")
    return " ".join(parts) + f" : {node.type}"


def describe(graph: Graph) -> str:
    """The stable MLIR-like textual form of a graph, one node per line."""
    lines = [format_node(i, node) for i, node in enumerate(graph.nodes)]
    if graph.outputs:
        lines.append("return " + ", ".join(f"%{i}" for i in graph.outputs))
    return "\n".join(lines)


def closure(graph: Graph, roots: Iterable[int]) -> list[int]:
    """The ids that ``roots`` depend on (themselves included), in graph order."""
    needed = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i in needed:
            continue
        needed.add(i)
        stack.extend(graph.nodes[i].inputs)
    return sorted(needed)


def number_literal(value: Any, dtype: str) -> str:
    """The Python source text of a checked number of ``dtype``, for generated code: a
    float as ``float.fromhex('...')`` (exact, whatever ``repr`` rounds to), NaN and the
    infinities as NumPy names, an integer as ``repr(int(...))``. Only numbers reach
    generated source, never text a node carried."""
    if dtype in ("float16", "float32", "float64"):
        v = float(value)
        if math.isnan(v):
            return "np.nan"
        if math.isinf(v):
            return "np.inf" if v > 0 else "-np.inf"
        return f"float.fromhex({v.hex()!r})"
    return repr(int(value))

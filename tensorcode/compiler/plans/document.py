"""The IR as a JSON document, and a validated graph replayed onto a tape.

Plans and algorithm artifacts both store a graph as ``{"nodes": [...], "outputs": ...}``
with one entry per node: ``op``, ``shape``, ``dtype``, ``inputs`` (ids of earlier nodes)
and ``attrs`` for an operation, ``name`` for a named source. The two artifacts differ only
in where source values live (a tensor file, or inline JSON) and in how strict they are
about extra fields, so ``to_document`` takes a hook for the extra fields and
``from_document`` a hook for the source values plus a ``Rules`` record; the node loop,
the field-path messages and the type checks are written once.

``from_document`` checks every node against the op registry's own type rule before
anything is built, so a loaded graph is well typed by construction; ``replay`` then
records it onto a ``Tape`` (plans rebuilding a network, algorithm artifacts, the fit of
a distilled program).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import TensorCodeError
from ...files.fields import Fields, at, is_int
from ..core import ir
from ..core import registry as primitives
from ..core.ir import DTYPES, Type
from ..core.verify import verify

if TYPE_CHECKING:  # pragma: no cover
    from ..trace.expr import Expr
    from ..trace.tape import Recorder

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SOURCE_FIELDS = {"input": {"name"}, "parameter": {"name"}, "leaf": {"value"}}


@dataclass(frozen=True)
class Rules:
    """What one kind of artifact lets its graph hold.

    ``strict`` documents have exactly each node kind's fields (a source has no
    ``inputs``/``attrs``); lenient ones need ``inputs`` and ``attrs`` on every node and
    ignore extra fields. ``None`` means no bound."""

    dtypes: frozenset[str] = frozenset(DTYPES)
    min_dim: int = 0
    max_rank: int | None = None
    max_elements: int | None = None
    max_total_elements: int | None = None
    min_nodes: int = 0
    max_nodes: int | None = None
    max_inputs: int | None = None
    strict: bool = False
    max_attr_depth: int | None = None
    max_attr_list: int | None = None
    max_attr_text: int | None = None


#: a hook giving a source node's ``(value, name)``: ``(index, op, spec, type, field)``
SourceValue = Callable[[int, str, dict, Type, str], "tuple[np.ndarray, str | None]"]


# ---------------------------------------------------------------------------------------
# writing


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def to_document(graph: ir.Graph, keep: Iterable[int] | None = None,
                outputs: Sequence[int] | Mapping[str, int] | None = None,
                extra: Callable[[int, ir.Node], dict] | None = None) -> dict:
    """``{"nodes": [...], "outputs": ...}`` for the nodes ``keep`` (all by default,
    renumbered in order) and ``outputs`` (the graph's by default; a mapping keeps its
    names). ``extra(index, node)`` adds fields to a node's entry (source values, origins).
    """
    order = list(range(len(graph.nodes))) if keep is None else sorted(keep)
    renumber = {old: new for new, old in enumerate(order)}
    nodes = []
    for old in order:
        node = graph.nodes[old]
        entry: dict[str, Any] = {"op": node.op, "shape": list(node.type.shape),
                                 "dtype": node.type.dtype}
        if node.op in ir.SOURCE_OPS:
            if node.name is not None:
                entry["name"] = node.name
        else:
            entry["inputs"] = [renumber[i] for i in node.inputs]
            entry["attrs"] = {k: _plain(v) for k, v in node.attrs}
        if extra is not None:
            entry.update(extra(old, node))
        nodes.append(entry)
    roots: Any = graph.outputs if outputs is None else outputs
    if isinstance(roots, Mapping):
        encoded: Any = {name: renumber[i] for name, i in roots.items()}
    else:
        encoded = [renumber[i] for i in roots]
    return {"nodes": nodes, "outputs": encoded}


# ---------------------------------------------------------------------------------------
# reading


def read_shape(fields: Fields, value: Any, field: str, rules: Rules) -> tuple[int, ...]:
    """A shape under ``rules`` (rank, smallest dimension, element count)."""
    rank = rules.max_rank
    if not isinstance(value, list) or (rank is not None and len(value) > rank) or not all(
            is_int(d) and d >= rules.min_dim for d in value):
        bound = "" if rank is None else f"at most {rank} "
        kind = "positive" if rules.min_dim > 0 else "non-negative"
        raise fields.fail(field, f"expected a shape (a list of {bound}{kind} integers), "
                          f"found {value!r:.80}")
    shape = tuple(value)
    if rules.max_elements is not None and math.prod(shape) > rules.max_elements:
        raise fields.fail(field, f"shape {list(shape)} exceeds {rules.max_elements} elements")
    return shape


def _attr(fields: Fields, value: Any, field: str, rules: Rules, depth: int = 0) -> Any:
    if rules.max_attr_depth is not None and depth > rules.max_attr_depth:
        raise fields.fail(field, "attribute nests too deeply")
    if isinstance(value, list):
        if rules.max_attr_list is not None and len(value) > rules.max_attr_list:
            raise fields.fail(field, "attribute list is too long")
        return tuple(_attr(fields, v, field, rules, depth + 1) for v in value)
    if value is None or isinstance(value, (bool, int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise fields.fail(field, "attribute must be finite")
        return value
    if isinstance(value, str) and (rules.max_attr_text is None or
                                   len(value) <= rules.max_attr_text):
        return value
    raise fields.fail(field, f"unsupported attribute value {value!r:.80}")


def _holds_float(value: Any) -> bool:
    if isinstance(value, tuple):
        return any(_holds_float(v) for v in value)
    return isinstance(value, float)


def _check_keys(fields: Fields, spec: dict, op: str, field: str, rules: Rules) -> None:
    if rules.strict:
        allowed = {"op", "shape", "dtype"} | _SOURCE_FIELDS.get(op, {"inputs", "attrs"})
        if set(spec) != allowed:
            raise fields.fail(field, f"a {op!r} node has exactly the fields "
                              f"{sorted(allowed)}, found {sorted(spec)}")
    else:
        fields.keys(spec, field, {"op", "inputs", "shape", "dtype", "attrs"}, exact=False)


def _operation(fields: Fields, spec: dict, op: str, index: int, nodes: list[ir.Node],
               t: Type, field: str, rules: Rules) -> ir.Node:
    operands = spec["inputs"]
    if not isinstance(operands, list) or not all(
            is_int(j) and 0 <= j < index for j in operands) or (
            rules.max_inputs is not None and len(operands) > rules.max_inputs):
        raise fields.fail(at(field, "inputs"), "expected ids of earlier nodes")
    raw = fields.object(spec["attrs"], at(field, "attrs"))
    attrs = {}
    for key, value in raw.items():
        if rules.strict and (not _IDENTIFIER.match(key) or len(key) > 200):
            raise fields.expected(at(field, "attrs"), "an identifier", key)
        attrs[key] = _attr(fields, value, at(field, "attrs", key), rules)
    allowed = primitives.REGISTRY[op].float_attrs
    for key, value in attrs.items():
        if key not in allowed and _holds_float(value):
            raise fields.fail(at(field, "attrs", key), f"the {op} op's {key!r} attribute "
                              f"takes integers, found {value!r:.80}")
    frozen = ir.freeze_attrs(attrs)
    try:
        out = primitives.REGISTRY[op].infer([nodes[j].type for j in operands], dict(frozen))
    except TensorCodeError as exc:
        raise fields.fail(field, f"the {op} node does not type-check: {exc}") from None
    except Exception as exc:  # a rule fed malformed attrs; the file is at fault
        raise fields.fail(field, f"the {op} node has malformed attrs or operands "
                          f"({type(exc).__name__}: {exc})") from None
    if out.shape != t.shape:
        raise fields.fail(at(field, "shape"), f"the {op} node's rule gives shape "
                          f"{list(out.shape)}, the file says {list(t.shape)}")
    if out.dtype != t.dtype:
        raise fields.fail(at(field, "dtype"), f"the {op} node's rule gives dtype "
                          f"{out.dtype}, the file says {t.dtype}")
    return ir.Node(op, tuple(operands), frozen, out)


def _outputs(fields: Fields, value: Any, field: str, count: int) -> tuple[int, ...]:
    if isinstance(value, dict):
        items = [(at(field, str(name)), node_id) for name, node_id in value.items()]
    elif isinstance(value, list):
        items = [(at(field, k), node_id) for k, node_id in enumerate(value)]
    else:
        raise fields.expected(field, "a list or an object of node ids", value)
    for where, node_id in items:
        if not is_int(node_id) or not 0 <= node_id < count:
            raise fields.fail(where, "expected the id of a node")
    return tuple(node_id for _, node_id in items)


def from_document(document: Any, fields: Fields, where: str, source: SourceValue,
                  rules: Rules = Rules()) -> ir.Graph:
    """The graph in ``document`` (the value at field ``where``), every node checked
    against ``rules`` and the op registry's type rules; a source node's value and name
    come from ``source``. Raises ``ArtifactError`` naming the file and the field."""
    document = fields.object(document, where)
    node_docs = fields.get(document, "nodes", at(where, "nodes"))
    if not isinstance(node_docs, list) or len(node_docs) < rules.min_nodes or (
            rules.max_nodes is not None and len(node_docs) > rules.max_nodes):
        upper = "any number of" if rules.max_nodes is None else f"{rules.max_nodes}"
        raise fields.fail(at(where, "nodes"), f"expected a list of {rules.min_nodes} to "
                          f"{upper} nodes")
    outputs_doc = fields.get(document, "outputs", at(where, "outputs"))
    nodes: list[ir.Node] = []
    total = 0
    for index, spec in enumerate(node_docs):
        field = at(where, "nodes", index)
        spec = fields.object(spec, field)
        op = spec.get("op")
        if not isinstance(op, str):
            raise fields.fail(at(field, "op"), "expected an op name")
        _check_keys(fields, spec, op, field, rules)
        if op not in ir.SOURCE_OPS and op not in primitives.REGISTRY:
            raise fields.fail(at(field, "op"), f"unknown op {op!r:.60}; this TensorCode "
                              f"knows {primitives.primitive_names()}")
        shape = read_shape(fields, spec["shape"], at(field, "shape"), rules)
        dtype = spec["dtype"]
        if not isinstance(dtype, str) or dtype not in rules.dtypes:
            raise fields.expected(at(field, "dtype"), f"one of {sorted(rules.dtypes)}", dtype)
        total += math.prod(shape)
        if rules.max_total_elements is not None and total > rules.max_total_elements:
            raise fields.fail(field, "the IR's tensors are too large in total")
        t = Type(shape, dtype)
        if op in ir.SOURCE_OPS:
            if not rules.strict and spec["inputs"] != []:
                raise fields.fail(at(field, "inputs"), f"a {op} takes no inputs")
            value, name = source(index, op, spec, t, field)
            nodes.append(ir.Node(op, (), (), t, value, name))
        else:
            nodes.append(_operation(fields, spec, op, index, nodes, t, field, rules))
    outputs = _outputs(fields, outputs_doc, at(where, "outputs"), len(nodes))
    graph = ir.Graph(tuple(nodes), outputs)
    try:
        verify(graph)
    except TensorCodeError as error:
        raise fields.fail(where, str(error)) from None
    return graph


# ---------------------------------------------------------------------------------------
# replaying


def replay(graph: ir.Graph, tape: Recorder, given: Mapping[int, Expr] | None = None
           ) -> list[Expr]:
    """Record ``graph``'s nodes onto ``tape`` in order and return one expression per
    node; node ids in ``given`` take that expression instead of being recorded (a
    parameter bound to a slot that already exists, for instance)."""
    given = given or {}
    exprs: list[Expr] = []
    for i, node in enumerate(graph.nodes):
        if i in given:
            exprs.append(given[i])
        elif node.op == "parameter":
            exprs.append(tape.parameter(node.value, name=node.name, dtype=node.type.dtype))
        elif node.op == "input":
            exprs.append(tape.input(node.value, name=node.name, dtype=node.type.dtype))
        elif node.op == "leaf":
            exprs.append(tape.leaf(node.value, dtype=node.type.dtype))
        else:
            exprs.append(tape.apply(node.op, [exprs[j] for j in node.inputs], node.attr_dict))
    return exprs


__all__ = ["Rules", "SourceValue", "to_document", "from_document", "read_shape", "replay"]

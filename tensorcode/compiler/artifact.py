"""Saved plans: a validated, portable artifact (no pickle, no code).

A plan directory holds ``plan.json`` (format, versions, the lowered IR as JSON, the
parameter layout, inputs, roots, and a digest of the IR) and ``values.safetensors``
(every parameter initial, input default and leaf constant, keyed ``node.<id>``, and
the layout's initials, keyed ``slot.<k>``; all stored flat, shapes come from the JSON).
``load_plan`` validates every field before building anything and raises
``ArtifactError`` naming the file and the field; then it rebuilds a network from the IR
(or checks the one given) and lowers it again, which hits the plan cache when warm.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from typing import Any, TYPE_CHECKING

import numpy as np

from ..errors import ArtifactError, TensorCodeError
from . import ir, primitives
from .backends import BACKENDS
from .ir import DTYPES, Type

if TYPE_CHECKING:  # pragma: no cover
    from ..runtime.network import Network
    from .plan import Plan

FORMAT = "tensorcode.plan/1"
PLAN_FILE = "plan.json"
VALUES_FILE = "values.safetensors"


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _graph_digest(graph: ir.Graph) -> str:
    return hashlib.sha256(ir.describe(graph).encode()).hexdigest()


def save_plan(plan: "Plan", directory: pathlib.Path) -> pathlib.Path:
    from safetensors.numpy import save_file

    from .. import __version__

    directory.mkdir(parents=True, exist_ok=True)
    graph = plan.graph
    network = plan.network
    nodes, values = [], {}
    for i, node in enumerate(graph.nodes):
        entry: dict[str, Any] = {"op": node.op, "inputs": list(node.inputs),
                                 "attrs": {k: _jsonable(v) for k, v in node.attrs},
                                 "shape": list(node.type.shape), "dtype": node.type.dtype}
        if node.name is not None:
            entry["name"] = node.name
        if node.op in ir.SOURCE_OPS:
            values[f"node.{i}"] = np.ascontiguousarray(node.value).reshape(-1)
        if node.op in ("parameter", "input"):
            entry["origin"] = plan._origins[i]
        nodes.append(entry)
    slots = []
    for k, slot in enumerate(network.layout.slots):
        slots.append({"node": slot.node, "name": slot.name, "shape": list(slot.shape),
                      "dtype": slot.dtype, "offset": slot.offset})
        values[f"slot.{k}"] = np.ascontiguousarray(
            network.graph.nodes[slot.node].value).reshape(-1)
    document = {
        "format": FORMAT,
        "tensorcode": __version__,
        "backend": plan.backend,
        "graph": {"nodes": nodes, "outputs": list(graph.outputs)},
        "roots": list(plan.roots),
        "layout": slots,
        "digest": _graph_digest(graph),
    }
    text = json.dumps(document, indent=1, sort_keys=True)
    (directory / PLAN_FILE).write_text(text + "\n", encoding="utf-8")
    save_file(values, str(directory / VALUES_FILE), metadata={"format": FORMAT})
    return directory


# ---------------------------------------------------------------------------------------
# loading


class _Reader:
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def fail(self, field: str, message: str) -> ArtifactError:
        return ArtifactError(message, path=self.path, field=field)

    def get(self, obj: Any, key: str, kind: type | tuple, field: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise self.fail(field, "is missing")
        value = obj[key]
        if isinstance(value, bool) and kind is not bool and bool not in (
                kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(field, f"must be {getattr(kind, '__name__', kind)}, got a bool")
        if not isinstance(value, kind):
            raise self.fail(field, f"must be {getattr(kind, '__name__', kind)}, got "
                                   f"{type(value).__name__}")
        return value

    def int_list(self, obj: Any, key: str, field: str) -> list[int]:
        value = self.get(obj, key, list, field)
        for k, v in enumerate(value):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise self.fail(f"{field}[{k}]", "must be a non-negative int")
        return value


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def load_plan(directory: pathlib.Path, network: "Network | None", backend: str | None
              ) -> "Plan":
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    plan_path = directory / PLAN_FILE
    values_path = directory / VALUES_FILE
    r = _Reader(plan_path)
    if not plan_path.is_file():
        raise ArtifactError("no such file; save a plan with plan.save(directory)",
                            path=plan_path)
    try:
        document = json.loads(plan_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArtifactError(f"is not valid JSON ({error})", path=plan_path) from None
    if not isinstance(document, dict):
        raise r.fail("(document)", "must be a JSON object")
    fmt = r.get(document, "format", str, "format")
    if fmt != FORMAT:
        raise r.fail("format", f"is {fmt!r}; this TensorCode reads {FORMAT!r}")
    saved_backend = r.get(document, "backend", str, "backend")
    if saved_backend not in BACKENDS:
        raise r.fail("backend", f"unknown backend {saved_backend!r}")
    graph_doc = r.get(document, "graph", dict, "graph")
    node_docs = r.get(graph_doc, "nodes", list, "graph.nodes")
    outputs = r.int_list(graph_doc, "outputs", "graph.outputs")
    roots = r.int_list(document, "roots", "roots")
    digest = r.get(document, "digest", str, "digest")
    layout_docs = r.get(document, "layout", list, "layout")
    if len(roots) != len(outputs):
        raise r.fail("roots", f"has {len(roots)} entries but graph.outputs has {len(outputs)}")

    if not values_path.is_file():
        raise ArtifactError("no such file; a plan directory needs its values", path=values_path)
    try:
        values = load_file(str(values_path))
    except (SafetensorError, OSError, ValueError) as error:
        raise ArtifactError(f"cannot be read as safetensors ({error})", path=values_path,
                            field="(file)") from None

    def value_of(key: str, t: Type, field: str) -> np.ndarray:
        if key not in values:
            raise ArtifactError("is missing", path=values_path, field=key)
        array = values[key]  # stored flat (safetensors has no 0-d tensors)
        if array.ndim != 1 or array.dtype.name != t.dtype or array.size != t.size:
            raise ArtifactError(f"has {array.dtype.name}{list(array.shape)} but {field} says "
                                f"{t} (stored flat)", path=values_path, field=key)
        array = array.reshape(t.shape)
        array = np.array(array, copy=True, order="C")
        array.flags.writeable = False
        return array

    nodes: list[ir.Node] = []
    origins: dict[int, int] = {}
    for i, nd in enumerate(node_docs):
        field = f"graph.nodes[{i}]"
        op = r.get(nd, "op", str, f"{field}.op")
        if op not in ir.SOURCE_OPS and op not in primitives.REGISTRY:
            raise r.fail(f"{field}.op", f"unknown op {op!r}")
        inputs = r.int_list(nd, "inputs", f"{field}.inputs")
        shape = r.int_list(nd, "shape", f"{field}.shape")
        dtype = r.get(nd, "dtype", str, f"{field}.dtype")
        if dtype not in DTYPES:
            raise r.fail(f"{field}.dtype", f"unsupported dtype {dtype!r}")
        attrs = r.get(nd, "attrs", dict, f"{field}.attrs")
        name = nd.get("name")
        if name is not None and not isinstance(name, str):
            raise r.fail(f"{field}.name", "must be a string")
        t = Type(tuple(shape), dtype)
        value = None
        if op in ir.SOURCE_OPS:
            value = value_of(f"node.{i}", t, field)
        if op in ("parameter", "input"):
            origins[i] = r.get(nd, "origin", int, f"{field}.origin")
        nodes.append(ir.Node(op, tuple(inputs), tuple(sorted((k, _freeze(v)) for k, v in
                                                             attrs.items())), t, value, name))
    graph = ir.Graph(tuple(nodes), tuple(outputs))
    try:
        ir.verify(graph)
    except TensorCodeError as error:
        raise r.fail("graph", str(error)) from None
    if _graph_digest(graph) != digest:
        raise r.fail("digest", "does not match the graph; the file was changed or damaged")
    slots = []
    offsets: dict[str, int] = {}
    for k, sd in enumerate(layout_docs):
        field = f"layout[{k}]"
        node_id = r.get(sd, "node", int, f"{field}.node")
        shape = tuple(r.int_list(sd, "shape", f"{field}.shape"))
        dtype = r.get(sd, "dtype", str, f"{field}.dtype")
        if dtype not in DTYPES:
            raise r.fail(f"{field}.dtype", f"unsupported dtype {dtype!r}")
        offset = r.get(sd, "offset", int, f"{field}.offset")
        if offset != offsets.get(dtype, 0):
            raise r.fail(f"{field}.offset", f"is {offset}; the layout packs slots in order, "
                                            f"so it must be {offsets.get(dtype, 0)}")
        offsets[dtype] = offset + int(np.prod(shape, dtype=np.int64))
        sname = sd.get("name")
        if sname is not None and not isinstance(sname, str):
            raise r.fail(f"{field}.name", "must be a string")
        slots.append((node_id, sname, shape, dtype,
                      value_of(f"slot.{k}", Type(shape, dtype), field)))
    slot_nodes = {s[0] for s in slots}
    for i, origin in origins.items():
        if nodes[i].op == "parameter" and origin not in slot_nodes:
            raise r.fail(f"graph.nodes[{i}].origin", f"parameter origin %{origin} is not in "
                                                     "the layout")

    if network is None:
        network, root_ids = _rebuild(graph, slots, origins, roots)
    else:
        _check_network(r, network, graph, slots, origins, roots)
        root_ids = roots
    plan = network.entry([network.symbol(i) for i in root_ids]).lower(backend or saved_backend)
    if _graph_digest(plan.graph) != digest:
        raise r.fail("digest", "the network lowers to a different program than the one saved; "
                               "load the plan with the network it was saved from")
    return plan


def _check_network(r: _Reader, network: "Network", graph: ir.Graph, slots: list,
                   origins: dict[int, int], roots: list[int]) -> None:
    layout = network.layout.slots
    if len(layout) != len(slots):
        raise r.fail("layout", f"has {len(slots)} slots but the network has {len(layout)}")
    for k, (saved, slot) in enumerate(zip(slots, layout)):
        node_id, name, shape, dtype, _ = saved
        if (node_id, name, tuple(shape), dtype) != (slot.node, slot.name, slot.shape, slot.dtype):
            raise r.fail(f"layout[{k}]", f"does not match the network's slot {slot.label} "
                                         f"({slot.dtype}{list(slot.shape)})")
    for i, origin in origins.items():
        if not 0 <= origin < len(network.graph.nodes) or \
                network.graph.nodes[origin].op != graph.nodes[i].op or \
                network.graph.nodes[origin].type != graph.nodes[i].type:
            raise r.fail(f"graph.nodes[{i}].origin", "does not name a matching node of the "
                                                     "network")
    for k, root in enumerate(roots):
        if not 0 <= root < len(network.graph.nodes):
            raise r.fail(f"roots[{k}]", "is not a node of the network")


def _rebuild(graph: ir.Graph, slots: list, origins: dict[int, int], roots: list[int]
             ) -> tuple["Network", list[int]]:
    """A network whose parameters are the saved layout (in order) followed by the
    lowered graph's nodes; returns it and the root node ids in it."""
    from .tape import Tape

    tape = Tape()
    by_origin: dict[int, Any] = {}
    for node_id, name, shape, dtype, initial in slots:
        by_origin[node_id] = tape.parameter(initial, name=name, dtype=dtype)
    exprs: list[Any] = []
    for i, node in enumerate(graph.nodes):
        if node.op == "parameter":
            exprs.append(by_origin[origins[i]])
        elif node.op == "input":
            exprs.append(tape.input(node.value, name=node.name, dtype=node.type.dtype))
        elif node.op == "leaf":
            exprs.append(tape.leaf(node.value, dtype=node.type.dtype))
        else:
            exprs.append(tape.apply(node.op, [exprs[j] for j in node.inputs], node.attr_dict))
    network = tape.into_network()
    return network, [exprs[o].index for o in graph.outputs]


__all__ = ["save_plan", "load_plan", "FORMAT"]

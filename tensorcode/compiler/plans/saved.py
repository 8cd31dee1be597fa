"""Saved plans: a validated, portable artifact (no pickle, no code).

A plan directory holds ``plan.json`` (format, versions, the lowered IR as JSON, the
parameter layout, inputs, roots, and a digest of the IR) and ``values.safetensors``
(every parameter initial, input default and leaf constant, keyed ``node.<id>``, and
the layout's initials, keyed ``slot.<k>``; all stored flat, shapes come from the JSON).
``load_plan`` validates every field before building anything and raises
``ArtifactError`` naming the file and the field; then it rebuilds a network from the IR
(or checks the one given) and lowers it again, which hits the plan cache when warm.
The graph goes through the compiler's one document codec (``document``), the JSON through
the strict reader and the tensors through ``tensorfile``; ``save_plan`` builds the
directory beside the target and renames it into place, so a crash leaves the old plan.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ...errors import ArtifactError, DTypeError, ShapeError
from ...files import (
    Fields,
    atomic_write_text,
    check_header,
    load_tensors,
    read_json,
    replace_directory,
    save_tensors,
)
from ...version import __version__
from ..backends import BACKENDS
from ..core import ir
from ..core.ir import DTYPES, Type
from .document import Rules, from_document, read_shape, replay, to_document
from .network import Network
from .tape import Tape

FORMAT = "tensorcode.plan/1"
PLAN_FILE = "plan.json"
VALUES_FILE = "values.safetensors"
#: the longest name a plan's node or slot may carry (names are data: they appear in
#: messages, never in generated code)
MAX_NAME = 1000


class SavablePlan(Protocol):
    """What ``save_plan`` reads of a ``Plan`` (``plan.py`` sits above this module: a
    ``Plan`` saves and loads through it)."""

    @property
    def graph(self) -> ir.Graph: ...
    @property
    def network(self) -> Network: ...
    @property
    def backend(self) -> str: ...
    @property
    def roots(self) -> Sequence[int]: ...
    @property
    def origins(self) -> dict[int, int]: ...


def _graph_digest(graph: ir.Graph) -> str:
    return hashlib.sha256(ir.describe(graph).encode()).hexdigest()


def save_plan(plan: SavablePlan, directory: pathlib.Path) -> pathlib.Path:
    """Write the plan directory atomically: both files are built in a temp directory
    beside ``directory`` and renamed into place, so a reader finds the old plan or the
    new one (``replace_directory``)."""

    graph = plan.graph
    network = plan.network
    origins = plan.origins
    values: dict[str, np.ndarray] = {}

    def extra(i: int, node: ir.Node) -> dict:
        if node.op not in ir.SOURCE_OPS:
            return {}
        values[f"node.{i}"] = np.ascontiguousarray(node.value).reshape(-1)
        fields: dict[str, Any] = {"inputs": [], "attrs": {}}
        if node.op in ("parameter", "input"):
            fields["origin"] = origins[i]
        return fields

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
        "graph": to_document(graph, extra=extra),
        "roots": list(plan.roots),
        "layout": slots,
        "digest": _graph_digest(graph),
    }
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"

    def fill(temp: pathlib.Path) -> None:
        save_tensors(temp / VALUES_FILE, values, metadata={"format": FORMAT})
        atomic_write_text(temp / PLAN_FILE, text)

    # plan.json is listed last: where the directory holds other files too, the files are
    # replaced one by one and plan.json is the commit record
    return replace_directory(directory, fill, owned=(VALUES_FILE, PLAN_FILE))


# ---------------------------------------------------------------------------------------
# loading

#: a saved plan's graph may ask for this many times the bytes of its sources (held in
#: its values file), every node's value counted at once (the most a backend may hold),
GRAPH_MULTIPLE = 256
#: and at least this much (intermediates may be far larger than inputs: attention scores)
GRAPH_FLOOR_BYTES = 64 << 20

#: a plan's graph: any dtype the IR knows, sizes may be 0, fields beyond the known ones
#: are ignored (older and newer writers add them)
_RULES = Rules(max_rank=32, max_elements=2 ** 40)


def _bytes(nodes: Any) -> int:
    return sum(node.type.size * np.dtype(node.type.dtype).itemsize for node in nodes)


def _check_graph_fits(r: Fields, graph: ir.Graph, max_graph_bytes: int | None) -> None:
    """Refuse, before anything is built, a graph asking for more than ``max_graph_bytes``
    or, by default, more than ``GRAPH_MULTIPLE`` times its sources (at least
    ``GRAPH_FLOOR_BYTES``), or more than this machine's memory: ``broadcast_to`` may
    name any size, so a crafted file is an ``ArtifactError`` here, never gigabytes
    allocated (or a ``MemoryError``) in a later call."""
    need, sources = _bytes(graph.nodes), _bytes(n for n in graph.nodes if n.op in ir.SOURCE_OPS)
    if max_graph_bytes is not None and (isinstance(max_graph_bytes, bool) or not isinstance(
            max_graph_bytes, int) or max_graph_bytes <= 0):
        raise TypeError(f"max_graph_bytes must be a positive int, got {max_graph_bytes!r}")
    limit = max_graph_bytes or max(GRAPH_FLOOR_BYTES, GRAPH_MULTIPLE * sources)
    if need > limit:
        how = ("max_graph_bytes" if max_graph_bytes else f"{GRAPH_MULTIPLE} times the "
               f"{sources} bytes of its parameters, inputs and constants, and at least "
               f"{GRAPH_FLOOR_BYTES}")
        raise r.fail("graph", f"its values need up to {need} bytes, more than the limit of "
                              f"{limit} ({how}); pass a larger max_graph_bytes to Plan.load "
                              "if you trust the file")
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - no sysconf
        return
    if memory > 0 and need > memory:
        raise r.fail("graph", f"its values need up to {need} bytes, more than this "
                              f"machine's {memory} bytes of memory")


def load_plan(directory: pathlib.Path, network: Network | None, backend: str | None,
              max_graph_bytes: int | None = None) -> Any:
    """The ``Plan`` saved in ``directory``, lowered again on ``network`` (or on a network
    rebuilt from the artifact); see ``Plan.load``."""
    plan_path = directory / PLAN_FILE
    values_path = directory / VALUES_FILE
    r = Fields(plan_path)
    if not plan_path.is_file():
        raise ArtifactError("no such file; save a plan with plan.save(directory)",
                            path=plan_path)
    document = r.object(read_json(plan_path, what="plan"), "(document)")
    check_header(document, FORMAT, None, plan_path)
    saved_backend = r.string(r.get(document, "backend"), "backend")
    if saved_backend not in BACKENDS:
        raise r.fail("backend", f"unknown backend {saved_backend!r}")
    graph_doc = r.object(r.get(document, "graph"), "graph")
    outputs = r.integers(r.get(graph_doc, "outputs", "graph.outputs"), "graph.outputs")
    roots = r.integers(r.get(document, "roots"), "roots")
    digest = r.string(r.get(document, "digest"), "digest")
    layout_docs = r.list(r.get(document, "layout"), "layout")
    if len(roots) != len(outputs):
        raise r.fail("roots", f"has {len(roots)} entries but graph.outputs has {len(outputs)}")

    if not values_path.is_file():
        raise ArtifactError("no such file; a plan directory needs its values", path=values_path)
    values, _ = load_tensors(values_path)

    def value_of(key: str, t: Type, field: str) -> np.ndarray:
        if key not in values:
            raise ArtifactError("is missing", path=values_path, field=key)
        array = values[key]  # stored flat (safetensors has no 0-d tensors)
        if array.ndim != 1 or array.dtype.name != t.dtype or array.size != t.size:
            raise ArtifactError(f"has {array.dtype.name}{list(array.shape)} but {field} says "
                                f"{t} (stored flat)", path=values_path, field=key)
        array = np.array(array.reshape(t.shape), copy=True, order="C")
        array.flags.writeable = False
        return array

    origins: dict[int, int] = {}

    def source(i: int, op: str, spec: dict, t: Type, field: str) -> tuple[np.ndarray, Any]:
        name = spec.get("name")
        if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME):
            raise r.fail(f"{field}.name", f"must be a string of at most {MAX_NAME} "
                                          "characters")
        value = value_of(f"node.{i}", t, field)
        if op in ("parameter", "input"):
            origins[i] = r.integer(r.get(spec, "origin", f"{field}.origin"), f"{field}.origin")
        return value, name

    graph = from_document(graph_doc, r, "graph", source, _RULES)
    if _graph_digest(graph) != digest:
        raise r.fail("digest", "does not match the graph; the file was changed or damaged")
    nodes = graph.nodes
    _check_graph_fits(r, graph, max_graph_bytes)
    slots = []
    offsets: dict[str, int] = {}
    for k, sd in enumerate(layout_docs):
        field = f"layout[{k}]"
        sd = r.object(sd, field)
        node_id = r.integer(r.get(sd, "node", f"{field}.node"), f"{field}.node")
        shape = read_shape(r, r.get(sd, "shape", f"{field}.shape"), f"{field}.shape", _RULES)
        dtype = r.string(r.get(sd, "dtype", f"{field}.dtype"), f"{field}.dtype")
        if dtype not in DTYPES:
            raise r.fail(f"{field}.dtype", f"unsupported dtype {dtype!r}")
        offset = r.integer(r.get(sd, "offset", f"{field}.offset"), f"{field}.offset")
        if offset != offsets.get(dtype, 0):
            raise r.fail(f"{field}.offset", f"is {offset}; the layout packs slots in order, "
                                            f"so it must be {offsets.get(dtype, 0)}")
        offsets[dtype] = offset + int(np.prod(shape, dtype=np.int64))
        sname = sd.get("name")
        if sname is not None and (not isinstance(sname, str) or len(sname) > MAX_NAME):
            raise r.fail(f"{field}.name", f"must be a string of at most {MAX_NAME} "
                                          "characters")
        slots.append((node_id, sname, shape, dtype,
                      value_of(f"slot.{k}", Type(shape, dtype), field)))
    slot_nodes = {s[0] for s in slots}
    for i, origin in origins.items():
        if nodes[i].op == "parameter" and origin not in slot_nodes:
            raise r.fail(f"graph.nodes[{i}].origin", f"parameter origin %{origin} is not in "
                                                     "the layout")

    if network is None:
        try:
            network, root_ids = _rebuild(graph, slots, origins, roots)
        except (ShapeError, DTypeError) as error:  # a slot the graph's type rules refuse
            raise r.fail("layout", "does not fit the graph (a slot's shape or dtype "
                         f"differs from its parameter's): {error}") from None
    else:
        _check_network(r, network, graph, slots, origins, roots)
        root_ids = roots
    plan = network.entry([network.symbol(i) for i in root_ids]).lower(backend or saved_backend)
    if _graph_digest(plan.graph) != digest:
        raise r.fail("digest", "the network lowers to a different program than the one saved; "
                               "load the plan with the network it was saved from")
    return plan


def _check_network(r: Fields, network: Network, graph: ir.Graph, slots: list,
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
             ) -> tuple[Network, list[int]]:
    """A network whose parameters are the saved layout (in order) followed by the
    lowered graph's nodes; returns it and the root node ids in it."""
    tape = Tape()
    by_origin: dict[int, Any] = {}
    for node_id, name, _shape, dtype, initial in slots:
        by_origin[node_id] = tape.parameter(initial, name=name, dtype=dtype)
    given = {i: by_origin[origins[i]] for i, node in enumerate(graph.nodes)
             if node.op == "parameter"}
    exprs = replay(graph, tape, given)
    network = tape.into_network()
    return network, [exprs[o].index for o in graph.outputs]


__all__ = ["save_plan", "load_plan", "FORMAT", "GRAPH_MULTIPLE", "GRAPH_FLOOR_BYTES"]

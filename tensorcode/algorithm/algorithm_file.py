"""The algorithm artifact: a compiled program's IR, contracts and parameters as JSON.

The same code builds every algorithm's network, freshly compiled or loaded: the compiler's
network is written to the JSON document (pruned to what the outputs need) and the
network is rebuilt from that document by replaying each node as a ``Tape`` call. So a
loaded artifact and a freshly compiled one are the same IR by construction, and every
node of a loaded file passes the op registry's own type rules before anything runs.

Loading validates every field, refuses unknown ops, versions and fields with
``ArtifactError`` (naming the file and the field), and never reads, evaluates or
imports anything the file names: the source text is not in the artifact, only its hash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import files
from ..compiler.core import ir
from ..compiler.core.ir import Type
from ..compiler.plans import document as codec
from ..compiler.plans.tape import Tape
from ..compiler.subset import (
    DTYPE,
    MAX_NODES,
    MAX_PARAMETER_ELEMENTS,
    MAX_TENSOR_ELEMENTS,
    CompiledProgram,
)
from ..compiler.trace.expr import Expr
from ..errors import ArtifactError, TensorCodeError

FORMAT = "tensorcode.algorithm"
VERSION = 1
FIELDS = ("format", "version", "dtype", "inputs", "outputs", "parameters", "ir",
          "source_sha256")
#: a file larger than this is refused before it is parsed
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
MAX_RANK = 8
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_LIMITS = files.JsonLimits(max_bytes=MAX_ARTIFACT_BYTES)


# ---------------------------------------------------------------------------------------
# writing


def _values_json(array: np.ndarray) -> Any:
    return array.tolist() if array.ndim else float(array)


def to_document(program: CompiledProgram, parameters: Mapping[str, np.ndarray]) -> dict:
    """The artifact document of ``program`` with the given parameter values.

    Only what the outputs need is kept, plus every declared input and parameter (so the
    contracts survive even when a program ignores one).
    """
    graph = program.network.graph
    roots = [s.index for s in program.outputs.values()]
    keep = set(ir.closure(graph, roots))
    keep |= {s.index for s in program.inputs.values()}
    keep |= {s.index for s in program.parameters.values()}

    def leaf_value(_: int, node: ir.Node) -> dict:
        if node.op != "leaf":
            return {}
        assert node.value is not None  # a leaf always carries its value
        return {"value": _values_json(node.value)}

    return {
        "format": FORMAT,
        "version": VERSION,
        "dtype": DTYPE,
        "inputs": {n: list(s.shape) for n, s in program.inputs.items()},
        "outputs": {n: list(s.shape) for n, s in program.outputs.items()},
        "parameters": {n: _values_json(np.asarray(parameters[n])) for n in program.parameters},
        "ir": codec.to_document(graph, keep,
                                {n: s.index for n, s in program.outputs.items()}, leaf_value),
        "source_sha256": program.source_sha256,
    }


def dumps(document: dict) -> bytes:
    """The document as UTF-8 JSON (finite numbers only; floats round-trip exactly)."""
    return files.dumps(document)


# ---------------------------------------------------------------------------------------
# reading

#: an algorithm's graph: float64 only, positive sizes, bounded in every dimension, and
#: exactly each node kind's fields
RULES = codec.Rules(dtypes=frozenset({DTYPE}), min_dim=1, max_rank=MAX_RANK,
                    max_elements=MAX_TENSOR_ELEMENTS,
                    max_total_elements=16 * MAX_TENSOR_ELEMENTS, min_nodes=1,
                    max_nodes=MAX_NODES, max_inputs=64, strict=True, max_attr_depth=3,
                    max_attr_list=MAX_RANK * 4, max_attr_text=64)


def _name(read: files.Fields, value: Any, field: str) -> str:
    return read.string(value, field, _IDENTIFIER, 200, what="an identifier")


def _contract(read: files.Fields, value: Any, field: str) -> dict[str, tuple[int, ...]]:
    value = read.object(value, field)
    if not value:
        raise read.fail(field, "expected at least one entry")
    return {_name(read, k, f"{field}.{k}"): codec.read_shape(read, v, f"{field}.{k}", RULES)
            for k, v in value.items()}


def _array(read: files.Fields, value: Any, shape: tuple[int, ...], field: str) -> np.ndarray:
    def check(item: Any, depth: int) -> None:
        if isinstance(item, list):
            if depth >= len(shape) or len(item) != shape[depth]:
                raise read.fail(field, f"values do not have shape {list(shape)}")
            for sub in item:
                check(sub, depth + 1)
        elif isinstance(item, bool) or not isinstance(item, (int, float)):
            raise read.fail(field, f"expected numbers, found {type(item).__name__}")
        elif depth != len(shape):
            raise read.fail(field, f"values do not have shape {list(shape)}")
    check(value, 0)
    array = np.array(value, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise read.fail(field, "values must be finite")
    return array


def from_document(document: Any, path: Any = None) -> tuple[CompiledProgram, dict[str, np.ndarray]]:
    """Validate ``document`` and rebuild its network: ``(program, parameters)``."""
    read = files.Fields(path)
    document = read.object(document, "(document)")
    unknown = sorted(set(document) - set(FIELDS))
    if unknown:
        raise read.fail(unknown[0], f"unknown field; an algorithm artifact has exactly "
                        f"{list(FIELDS)}")
    for field in FIELDS:
        if field not in document:
            raise read.fail(field, "missing")
    files.check_header(document, FORMAT, VERSION, path)
    if document["dtype"] != DTYPE:
        raise read.fail("dtype", f"expected {DTYPE!r}, found {document['dtype']!r:.40}")
    digest = document["source_sha256"]
    if not isinstance(digest, str) or not _SHA256.match(digest):
        raise read.fail("source_sha256", "expected 64 lowercase hex digits")
    inputs = _contract(read, document["inputs"], "inputs")
    outputs = _contract(read, document["outputs"], "outputs")
    raw_parameters = read.object(document["parameters"], "parameters")
    graph_doc = read.object(document["ir"], "ir")
    if set(graph_doc) != {"nodes", "outputs"}:
        raise read.fail("ir", "expected exactly the fields 'nodes' and 'outputs'")

    parameters: dict[str, np.ndarray] = {}
    seen_inputs: set[str] = set()

    def source(index: int, op: str, spec: dict, t: Type, field: str
               ) -> tuple[np.ndarray, str | None]:
        shape = t.shape
        if op == "leaf":
            return _array(read, spec["value"], shape, f"{field}.value"), None
        name = _name(read, spec["name"], f"{field}.name")
        if op == "input":
            if name not in inputs or name in seen_inputs:
                raise read.fail(f"{field}.name", f"input {name!r} is not in the input "
                                "contract or appears twice")
            if shape != inputs[name]:
                raise read.fail(f"{field}.shape", f"input {name!r} has shape {list(shape)} "
                                f"but the contract says {list(inputs[name])}")
            seen_inputs.add(name)
            return np.zeros(shape, dtype=DTYPE), name
        if name not in raw_parameters or name in parameters:
            raise read.fail(f"{field}.name", f"parameter {name!r} has no entry in "
                            "'parameters' or appears twice")
        value = _array(read, raw_parameters[name], shape, f"parameters.{name}")
        if value.size + sum(p.size for p in parameters.values()) > MAX_PARAMETER_ELEMENTS:
            raise read.fail("parameters", "too many parameter values")
        value.flags.writeable = False
        parameters[name] = value
        return value, name

    graph = codec.from_document(graph_doc, read, "ir", source, RULES)
    missing_inputs = [n for n in inputs if n not in seen_inputs]
    if missing_inputs:
        raise read.fail("ir.nodes", f"no input node for {missing_inputs}")
    extra_parameters = sorted(set(raw_parameters) - set(parameters))
    if extra_parameters:
        raise read.fail("parameters", f"{extra_parameters} have no parameter node in the IR")
    roots = graph_doc["outputs"]
    if not isinstance(roots, dict) or list(roots) != list(outputs):
        raise read.fail("ir.outputs", f"names {list(roots)} do not match the output contract "
                        f"{list(outputs)}")
    for name, node_id in roots.items():
        if graph.nodes[node_id].type.shape != outputs[name]:
            raise read.fail(f"ir.outputs.{name}", f"node %{node_id} has shape "
                            f"{list(graph.nodes[node_id].type.shape)} but the contract says "
                            f"{list(outputs[name])}")
    tape = Tape()
    exprs = codec.replay(graph, tape)
    symbols: dict[str, dict[str, Expr]] = {"input": {}, "parameter": {}}
    for node, expr in zip(graph.nodes, exprs):
        if node.op in symbols:
            assert node.name is not None  # ``source`` above names every input and parameter
            symbols[node.op][node.name] = expr
    output_symbols = {name: exprs[node_id] for name, node_id in roots.items()}
    try:
        network = tape.into_network()  # verifies the whole graph once more
    except TensorCodeError as exc:
        raise read.fail("ir", str(exc)) from None
    program = CompiledProgram(network, symbols["input"], symbols["parameter"], output_symbols,
                              digest)
    return program, parameters


def loads(data: bytes, path: Any = None) -> tuple[CompiledProgram, dict[str, np.ndarray]]:
    """Parse and validate artifact bytes (``ArtifactError`` on any problem)."""
    if len(data) > MAX_ARTIFACT_BYTES:
        raise ArtifactError(f"the file is larger than {MAX_ARTIFACT_BYTES} bytes", path)
    return from_document(files.parse_json(data, path, _LIMITS), path)


__all__ = ["FORMAT", "VERSION", "FIELDS", "to_document", "from_document", "dumps", "loads"]

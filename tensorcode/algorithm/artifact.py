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

import json
import math
import re
from typing import Any, Mapping

import numpy as np

from ..compiler import ir, primitives
from ..compiler.subset import (DTYPE, MAX_NODES, MAX_PARAMETER_ELEMENTS, MAX_TENSOR_ELEMENTS,
                               CompiledProgram)
from ..compiler.tape import Expr, Tape
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


# ---------------------------------------------------------------------------------------
# writing


def _attr_json(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_attr_json(v) for v in value]
    return value


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
    order = sorted(keep)
    renumber = {old: new for new, old in enumerate(order)}
    nodes = []
    for old in order:
        node = graph.nodes[old]
        spec: dict[str, Any] = {"op": node.op, "shape": list(node.type.shape),
                                "dtype": node.type.dtype}
        if node.op in ("input", "parameter"):
            spec["name"] = node.name
        elif node.op == "leaf":
            spec["value"] = _values_json(node.value)
        else:
            spec["inputs"] = [renumber[i] for i in node.inputs]
            spec["attrs"] = {k: _attr_json(v) for k, v in node.attrs}
        nodes.append(spec)
    return {
        "format": FORMAT,
        "version": VERSION,
        "dtype": DTYPE,
        "inputs": {n: list(s.shape) for n, s in program.inputs.items()},
        "outputs": {n: list(s.shape) for n, s in program.outputs.items()},
        "parameters": {n: _values_json(np.asarray(parameters[n])) for n in program.parameters},
        "ir": {"nodes": nodes,
               "outputs": {n: renumber[s.index] for n, s in program.outputs.items()}},
        "source_sha256": program.source_sha256,
    }


def dumps(document: dict) -> bytes:
    """The document as UTF-8 JSON (finite numbers only; floats round-trip exactly)."""
    return (json.dumps(document, indent=1, allow_nan=False) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------------------
# reading


class _Reader:
    """Validation helpers that name the file and the field in every complaint."""

    def __init__(self, path: Any) -> None:
        self.path = path

    def fail(self, field: str, message: str) -> ArtifactError:
        return ArtifactError(message, self.path, field)

    def mapping(self, value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, f"expected an object, found {type(value).__name__}")
        return value

    def shape(self, value: Any, field: str) -> tuple[int, ...]:
        if not isinstance(value, list) or len(value) > MAX_RANK or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 < d for d in value):
            raise self.fail(field, f"expected a shape (a list of at most {MAX_RANK} "
                            f"positive integers), found {value!r:.80}")
        shape = tuple(value)
        if math.prod(shape) > MAX_TENSOR_ELEMENTS:
            raise self.fail(field, f"shape {list(shape)} exceeds {MAX_TENSOR_ELEMENTS} "
                            "elements")
        return shape

    def name(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or not _IDENTIFIER.match(value) or len(value) > 200:
            raise self.fail(field, f"expected an identifier, found {value!r:.80}")
        return value

    def contract(self, value: Any, field: str) -> dict[str, tuple[int, ...]]:
        value = self.mapping(value, field)
        if not value:
            raise self.fail(field, "expected at least one entry")
        return {self.name(k, f"{field}.{k}"): self.shape(v, f"{field}.{k}")
                for k, v in value.items()}

    def array(self, value: Any, shape: tuple[int, ...], field: str) -> np.ndarray:
        def check(item: Any, depth: int) -> None:
            if isinstance(item, list):
                if depth >= len(shape) or len(item) != shape[depth]:
                    raise self.fail(field, f"values do not have shape {list(shape)}")
                for sub in item:
                    check(sub, depth + 1)
            elif isinstance(item, bool) or not isinstance(item, (int, float)):
                raise self.fail(field, f"expected numbers, found {type(item).__name__}")
            elif depth != len(shape):
                raise self.fail(field, f"values do not have shape {list(shape)}")
        check(value, 0)
        array = np.array(value, dtype=np.float64)
        if array.shape != shape:  # pragma: no cover - check() already ensures it
            raise self.fail(field, f"values have shape {list(array.shape)}, expected "
                            f"{list(shape)}")
        if not np.all(np.isfinite(array)):
            raise self.fail(field, "values must be finite")
        return array

    def attr(self, value: Any, field: str, depth: int = 0) -> Any:
        if depth > 3:
            raise self.fail(field, "attribute nests too deeply")
        if isinstance(value, list):
            if len(value) > MAX_RANK * 4:
                raise self.fail(field, "attribute list is too long")
            return tuple(self.attr(v, field, depth + 1) for v in value)
        if value is None or isinstance(value, (bool, int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise self.fail(field, "attribute must be finite")
            return value
        if isinstance(value, str) and len(value) <= 64:
            return value
        raise self.fail(field, f"unsupported attribute value {value!r:.80}")


def from_document(document: Any, path: Any = None) -> tuple[CompiledProgram, dict[str, np.ndarray]]:
    """Validate ``document`` and rebuild its network: ``(program, parameters)``."""
    read = _Reader(path)
    document = read.mapping(document, "(document)")
    unknown = sorted(set(document) - set(FIELDS))
    if unknown:
        raise read.fail(unknown[0], f"unknown field; an algorithm artifact has exactly "
                        f"{list(FIELDS)}")
    for field in FIELDS:
        if field not in document:
            raise read.fail(field, "missing")
    if document["format"] != FORMAT:
        raise read.fail("format", f"expected {FORMAT!r}, found {document['format']!r:.80}")
    version = document["version"]
    if not isinstance(version, int) or isinstance(version, bool) or version != VERSION:
        raise read.fail("version", f"version {version!r:.40} is not supported; this "
                        f"TensorCode reads version {VERSION}")
    if document["dtype"] != DTYPE:
        raise read.fail("dtype", f"expected {DTYPE!r}, found {document['dtype']!r:.40}")
    digest = document["source_sha256"]
    if not isinstance(digest, str) or not _SHA256.match(digest):
        raise read.fail("source_sha256", "expected 64 lowercase hex digits")
    inputs = read.contract(document["inputs"], "inputs")
    outputs = read.contract(document["outputs"], "outputs")
    raw_parameters = read.mapping(document["parameters"], "parameters")
    graph = read.mapping(document["ir"], "ir")
    if set(graph) != {"nodes", "outputs"}:
        raise read.fail("ir", "expected exactly the fields 'nodes' and 'outputs'")
    nodes = graph["nodes"]
    if not isinstance(nodes, list) or not nodes or len(nodes) > MAX_NODES:
        raise read.fail("ir.nodes", f"expected a list of 1 to {MAX_NODES} nodes")

    tape = Tape()
    exprs: list[Expr] = []
    input_symbols: dict[str, Expr] = {}
    parameter_symbols: dict[str, Expr] = {}
    parameters: dict[str, np.ndarray] = {}
    total_elements = 0
    for index, spec in enumerate(nodes):
        field = f"ir.nodes[{index}]"
        spec = read.mapping(spec, field)
        op = spec.get("op")
        if not isinstance(op, str):
            raise read.fail(f"{field}.op", "expected an op name")
        allowed = {"input": {"op", "shape", "dtype", "name"},
                   "parameter": {"op", "shape", "dtype", "name"},
                   "leaf": {"op", "shape", "dtype", "value"}}.get(
                       op, {"op", "shape", "dtype", "inputs", "attrs"})
        if set(spec) != allowed:
            raise read.fail(field, f"a {op!r} node has exactly the fields {sorted(allowed)}, "
                            f"found {sorted(spec)}")
        if op not in ir.SOURCE_OPS and op not in primitives.REGISTRY:
            raise read.fail(f"{field}.op", f"unknown op {op!r:.60}; this TensorCode knows "
                            f"{primitives.primitive_names()}")
        shape = read.shape(spec["shape"], f"{field}.shape")
        if spec["dtype"] != DTYPE:
            raise read.fail(f"{field}.dtype", f"expected {DTYPE!r}, found {spec['dtype']!r:.40}")
        total_elements += math.prod(shape)
        if total_elements > 16 * MAX_TENSOR_ELEMENTS:
            raise read.fail(field, "the IR's tensors are too large in total")
        if op == "input":
            name = read.name(spec["name"], f"{field}.name")
            if name not in inputs or name in input_symbols:
                raise read.fail(f"{field}.name", f"input {name!r} is not in the input "
                                "contract or appears twice")
            if shape != inputs[name]:
                raise read.fail(f"{field}.shape", f"input {name!r} has shape {list(shape)} "
                                f"but the contract says {list(inputs[name])}")
            expr = tape.input(np.zeros(shape, dtype=DTYPE), name=name)
            input_symbols[name] = expr
        elif op == "parameter":
            name = read.name(spec["name"], f"{field}.name")
            if name not in raw_parameters or name in parameter_symbols:
                raise read.fail(f"{field}.name", f"parameter {name!r} has no entry in "
                                "'parameters' or appears twice")
            value = read.array(raw_parameters[name], shape, f"parameters.{name}")
            if value.size + sum(p.size for p in parameters.values()) > MAX_PARAMETER_ELEMENTS:
                raise read.fail("parameters", "too many parameter values")
            expr = tape.parameter(value, name=name)
            parameter_symbols[name] = expr
            value.flags.writeable = False
            parameters[name] = value
        elif op == "leaf":
            expr = tape.leaf(read.array(spec["value"], shape, f"{field}.value"), DTYPE)
        else:
            operands = spec["inputs"]
            if not isinstance(operands, list) or not all(
                    isinstance(j, int) and not isinstance(j, bool) and 0 <= j < index
                    for j in operands) or len(operands) > 64:
                raise read.fail(f"{field}.inputs", "expected ids of earlier nodes")
            attrs = read.mapping(spec["attrs"], f"{field}.attrs")
            attrs = {read.name(k, f"{field}.attrs"): read.attr(v, f"{field}.attrs.{k}")
                     for k, v in attrs.items()}
            try:
                expr = tape.apply(op, [exprs[j] for j in operands], attrs)
            except TensorCodeError as exc:
                raise read.fail(field, f"the {op} node does not type-check: {exc}") from None
            except Exception as exc:  # a rule fed malformed attrs; the file is at fault
                raise read.fail(field, f"the {op} node has malformed attrs or operands "
                                f"({type(exc).__name__}: {exc})") from None
            if expr.shape != shape:
                raise read.fail(f"{field}.shape", f"the {op} node's rule gives shape "
                                f"{list(expr.shape)}, the file says {list(shape)}")
        if expr.dtype != DTYPE:
            raise read.fail(field, f"node has dtype {expr.dtype}, expected {DTYPE}")
        exprs.append(expr)
    missing_inputs = [n for n in inputs if n not in input_symbols]
    if missing_inputs:
        raise read.fail("ir.nodes", f"no input node for {missing_inputs}")
    extra_parameters = sorted(set(raw_parameters) - set(parameter_symbols))
    if extra_parameters:
        raise read.fail("parameters", f"{extra_parameters} have no parameter node in the IR")
    roots = read.mapping(graph["outputs"], "ir.outputs")
    if list(roots) != list(outputs):
        raise read.fail("ir.outputs", f"names {list(roots)} do not match the output contract "
                        f"{list(outputs)}")
    output_symbols: dict[str, Expr] = {}
    for name, node_id in roots.items():
        if not isinstance(node_id, int) or isinstance(node_id, bool) or not (
                0 <= node_id < len(exprs)):
            raise read.fail(f"ir.outputs.{name}", "expected the id of a node")
        if exprs[node_id].shape != outputs[name]:
            raise read.fail(f"ir.outputs.{name}", f"node %{node_id} has shape "
                            f"{list(exprs[node_id].shape)} but the contract says "
                            f"{list(outputs[name])}")
        output_symbols[name] = exprs[node_id]
    try:
        network = tape.into_network()  # verifies the whole graph once more
    except TensorCodeError as exc:
        raise read.fail("ir", str(exc)) from None
    program = CompiledProgram(network, input_symbols, parameter_symbols, output_symbols, digest)
    return program, parameters


def loads(data: bytes, path: Any = None) -> tuple[CompiledProgram, dict[str, np.ndarray]]:
    """Parse and validate artifact bytes (``ArtifactError`` on any problem)."""
    if len(data) > MAX_ARTIFACT_BYTES:
        raise ArtifactError(f"the file is larger than {MAX_ARTIFACT_BYTES} bytes", path)
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ArtifactError(f"not valid JSON: {exc}", path) from None
    return from_document(document, path)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


__all__ = ["FORMAT", "VERSION", "FIELDS", "to_document", "from_document", "dumps", "loads"]

"""Algorithm artifacts: JSON round trips, and every tampered field refused with an
ArtifactError that names the file and the field, without evaluating anything."""

from __future__ import annotations

import copy
import hashlib
import json
import os

import numpy as np
import pytest
from router_programs import (
    INPUTS,
    OUTPUTS,
    SCORES,
    SCORES_PARAMETERS,
    all_feature_vectors,
    scores_numpy,
)

import tensorcode.algorithm as algorithms
from tensorcode.algorithm import Algorithm
from tensorcode.algorithm.algorithm_file import FIELDS, FORMAT, VERSION
from tensorcode.errors import ArtifactError, BackendError

MARKER = "# distinctive-comment-never-in-the-artifact"
SOURCE = SCORES.replace("def route(features, w, threshold):",
                        f"def route(features, w, threshold):\n    {MARKER}")


@pytest.fixture(scope="module")
def router():
    return algorithms.compile(SOURCE, INPUTS, OUTPUTS, SCORES_PARAMETERS, executor="reference")


@pytest.fixture(scope="module")
def document(router):
    return router.to_document()


def test_round_trip_is_the_same_ir_and_the_same_answers(router, tmp_path):
    path = router.save(tmp_path / "router.json")
    assert os.listdir(tmp_path) == ["router.json"]  # written atomically, nothing left over
    loaded = Algorithm.load(path, executor="reference")
    assert loaded.describe() == router.describe()
    assert loaded.inputs == router.inputs and loaded.outputs == router.outputs
    for name, value in router.parameters.items():
        np.testing.assert_array_equal(loaded.parameters[name], value)
    cases = all_feature_vectors()[::17]
    a, b = router.batch({"features": cases}), loaded.batch({"features": cases})
    for name in OUTPUTS:
        np.testing.assert_array_equal(a[name], b[name])
    assert algorithms.compare(loaded, router, [{"features": c} for c in cases]).ok
    loaded.save(path)  # overwriting an artifact is atomic too
    assert Algorithm.load(path, executor="reference").describe() == router.describe()
    assert algorithms.load(path, executor="reference").source_sha256 == router.source_sha256


def test_artifact_fields_and_no_source_text(router, tmp_path):
    path = router.save(tmp_path / "a.json")
    text = path.read_text()
    document = json.loads(text)
    assert tuple(document) == FIELDS
    assert document["format"] == FORMAT and document["version"] == VERSION
    assert document["inputs"] == {"features": [12]}
    assert document["outputs"] == {"route": [], "covered": []}
    assert document["parameters"]["threshold"] == 1.0
    assert document["source_sha256"] == hashlib.sha256(SOURCE.encode()).hexdigest()
    assert MARKER not in text and "def route" not in text
    ops = {node["op"] for node in document["ir"]["nodes"]}
    assert {"input", "parameter", "matmul", "where"} <= ops


def test_parameters_saved_are_the_current_ones(router, tmp_path):
    tuned = router.with_parameters(threshold=2.5)
    loaded = Algorithm.load(tuned.save(tmp_path / "t.json"), executor="reference")
    assert float(loaded.parameters["threshold"]) == 2.5
    row = all_feature_vectors()[1234]
    assert loaded({"features": row})["covered"] == scores_numpy(row, threshold=2.5)["covered"]


def _node(document, op):
    return next(i for i, n in enumerate(document["ir"]["nodes"]) if n["op"] == op)


def tamper(document, edit):
    changed = copy.deepcopy(document)
    edit(changed)
    return changed


TAMPERS = {
    "unknown op": (lambda d: d["ir"]["nodes"][_node(d, "matmul")].update(op="__import__"),
                   "unknown op"),
    "future version": (lambda d: d.update(version=2), "version"),
    "version as text": (lambda d: d.update(version="1"), "version"),
    "other format": (lambda d: d.update(format="tensorcode.plan"), "format"),
    "missing field": (lambda d: d.pop("ir"), "ir"),
    "extra field": (lambda d: d.update(source="def route(): pass"), "unknown field"),
    "bad dtype": (lambda d: d.update(dtype="float32"), "dtype"),
    "bad hash": (lambda d: d.update(source_sha256="abc"), "source_sha256"),
    "input shape": (lambda d: d["inputs"].update(features=[11]), "shape"),
    "negative shape": (lambda d: d["outputs"].update(route=[-1]), "shape"),
    "huge shape": (lambda d: d["inputs"].update(features=[10 ** 9]), "elements"),
    "output missing": (lambda d: d["ir"]["outputs"].pop("covered"), "ir.outputs"),
    "output wrong node": (lambda d: d["ir"]["outputs"].update(route=0), "shape"),
    "output bad id": (lambda d: d["ir"]["outputs"].update(route=10 ** 6), "ir.outputs.route"),
    "parameter missing": (lambda d: d["parameters"].pop("w"), "parameter 'w'"),
    "parameter extra": (lambda d: d["parameters"].update(extra=1.0), "no parameter node"),
    "parameter shape": (lambda d: d["parameters"].update(w=[[1.0]]), "shape"),
    "parameter text": (lambda d: d["parameters"].update(threshold="1"), "numbers"),
    "parameter bool": (lambda d: d["parameters"].update(threshold=True), "numbers"),
    "forward reference": (lambda d: d["ir"]["nodes"][_node(d, "matmul")].update(
        inputs=[0, 10 ** 4]), "earlier nodes"),
    "self reference": (lambda d: d["ir"]["nodes"][_node(d, "matmul")].update(
        inputs=[_node(d, "matmul"), 0]), "earlier nodes"),
    "type mismatch": (lambda d: d["ir"]["nodes"][_node(d, "matmul")].update(shape=[4]),
                      "rule gives shape"),
    "bad attrs": (lambda d: d["ir"]["nodes"][_node(d, "max")].update(attrs={"axis": "x"}),
                  "ir.nodes"),
    "attrs object": (lambda d: d["ir"]["nodes"][_node(d, "max")].update(
        attrs={"axis": {"__class__": "os.system"}}), "unsupported attribute"),
    "missing attrs": (lambda d: d["ir"]["nodes"][_node(d, "max")].update(attrs={}),
                      "ir.nodes"),
    "extra node key": (lambda d: d["ir"]["nodes"][0].update(code="print(1)"), "exactly the fields"),
    "leaf value shape": (lambda d: d["ir"]["nodes"][_node(d, "leaf")].update(value=[1, 2]),
                         "shape"),
    "leaf nan": (lambda d: d["ir"]["nodes"][_node(d, "leaf")].update(value=1e400), "finite"),
    "input renamed": (lambda d: d["ir"]["nodes"][0].update(name="other"), "input contract"),
    "duplicate input": (lambda d: d["ir"]["nodes"].insert(1, dict(d["ir"]["nodes"][0])),
                        "appears twice"),
    "no nodes": (lambda d: d["ir"].update(nodes=[]), "ir.nodes"),
    "ir extra key": (lambda d: d["ir"].update(source="x"), "ir"),
    "contract not object": (lambda d: d.update(inputs=[["features", [12]]]), "inputs"),
    "node dtype": (lambda d: d["ir"]["nodes"][0].update(dtype="int64"), "dtype"),
}


@pytest.mark.parametrize("name", list(TAMPERS))
def test_tampered_artifacts_are_refused(document, tmp_path, name):
    edit, fragment = TAMPERS[name]
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(tamper(document, edit)))
    with pytest.raises(ArtifactError) as info:
        Algorithm.load(path, executor="reference")
    assert fragment in str(info.value), str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("content,fragment", [
    (b"", "not valid JSON"),
    (b"{\"format\": ", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b"[]", "expected an object"),
    (b"{\"format\": NaN}", "not valid JSON"),
    (b"[" * 200000, "not valid JSON"),
])
def test_unreadable_files_are_refused(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ArtifactError, match=fragment):
        Algorithm.load(path, executor="reference")


def test_missing_file_and_bad_executor(tmp_path):
    with pytest.raises(ArtifactError, match="cannot read"):
        Algorithm.load(tmp_path / "absent.json", executor="reference")
    with pytest.raises(BackendError,
                       match=r"executor must be one of \['numba', 'llvm', 'reference'\]"):
        Algorithm.load(tmp_path / "absent.json", executor="compiled")


def test_loading_depends_only_on_the_artifact_not_on_source(document, tmp_path):
    """A different (valid) source hash loads: the loader never looks for the source."""
    changed = tamper(document, lambda d: d.update(source_sha256="0" * 64))
    path = tmp_path / "other.json"
    path.write_text(json.dumps(changed))
    loaded = Algorithm.load(path, executor="reference")
    assert loaded.source_sha256 == "0" * 64

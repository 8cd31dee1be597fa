"""The patch file: save/load round trips for every form, atomic writes, and validation
that names the file and the field and never runs anything the file names."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tensorcode.errors import ArtifactError
from tensorcode.weights import LowRank, Patch, Projection, build, diff, tensor_sha256


def _patch_of_every_form() -> tuple[dict, Patch]:
    rng = np.random.default_rng(0)
    base = {"w": rng.normal(size=(4, 6)).astype(np.float32),
            "v": rng.normal(size=(5, 3)),
            "h": rng.normal(size=(8,)).astype(np.float16),
            "d": rng.normal(size=(3,)).astype(np.float32),
            "n": np.arange(6, dtype=np.int64), "m": np.array([True, False, True])}
    edited_h = base["h"].copy()
    edited_h[2] = np.inf
    edited_d = base["d"] * 2
    edited_n = base["n"].copy()
    edited_n[1] = -2**62
    patch = build(base, {"w": LowRank(rng.normal(size=(4, 2)), rng.normal(size=(2, 6))),
                         "v": Projection(rng.normal(size=3), 0.5, axis=1, span=(1, 4)),
                         "h": edited_h, "d": edited_d, "n": edited_n,
                         "m": np.array([False, False, True])},
                  rationale="all four forms", evidence=[{"source": "forward:3", "n": 2}],
                  author={"model": "recorded", "temperature": 0})
    return base, patch


def test_save_load_round_trip_every_form(tmp_path):
    base, patch = _patch_of_every_form()
    kinds = {change.form.kind for change in patch.changes.values()}
    assert kinds == {"lowrank", "projection", "sparse", "dense"}
    path = tmp_path / "fix.patch.json"
    patch.save(path)
    loaded = Patch.load(path)
    assert loaded.rationale == "all four forms"
    assert loaded.evidence == [{"source": "forward:3", "n": 2}]
    assert loaded.author == {"model": "recorded", "temperature": 0}
    expected = patch.apply(base)
    result = loaded.apply(base)
    for name in base:
        assert tensor_sha256(result[name]) == tensor_sha256(expected[name]), name
    assert loaded.summary() == patch.summary()
    document = json.loads(path.read_text())
    assert document["format"] == "tensorcode.patch" and document["version"] == 1
    assert document["tensors"]["h"]["form"] == "sparse"
    assert document["tensors"]["h"]["values"] == ["inf"]


def test_float32_values_are_written_short_and_read_back_exactly(tmp_path):
    base = {"x": np.zeros(3, dtype=np.float32)}
    edited = {"x": np.array([0.1, 1 / 3, 1e-45], dtype=np.float32)}
    path = tmp_path / "p.json"
    diff(base, edited).save(path)
    assert "0.1," in path.read_text() and "0.33333334" in path.read_text()
    assert tensor_sha256(Patch.load(path).apply(base)["x"]) == tensor_sha256(edited["x"])


def test_edits_text_is_kept(tmp_path):
    base = {"w": np.zeros((2, 2), dtype=np.float32)}
    patch = Patch.from_edits(base, "w[0, 1] = 3  # why\n")
    patch.save(tmp_path / "p.json")
    assert Patch.load(tmp_path / "p.json").edits == "w[0, 1] = 3  # why\n"


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    base, patch = _patch_of_every_form()
    path = tmp_path / "p.json"
    path.write_text("old contents")

    def broken_replace(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        patch.save(path)
    monkeypatch.undo()
    assert path.read_text() == "old contents"
    assert os.listdir(tmp_path) == ["p.json"]
    patch.save(path)
    assert os.listdir(tmp_path) == ["p.json"]


def _saved(tmp_path) -> tuple[dict, dict]:
    base = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    patch = Patch.from_edits(base, "w[0, 1] = 9\n", rationale="r")
    path = tmp_path / "p.json"
    patch.save(path)
    return base, json.loads(path.read_text())


def _write(tmp_path, document) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return str(path)


@pytest.mark.parametrize("mutate, field, words", [
    (lambda d: d.update(format="something.else"), "format", "not a tensorcode.patch file"),
    (lambda d: d.update(version=2), "version", "upgrade TensorCode"),
    (lambda d: d.update(version=True), "version", "expected an integer version"),
    (lambda d: d.update(extra=1), "(top level)", "unexpected fields ['extra']"),
    (lambda d: d.pop("rationale"), "(top level)", "missing fields ['rationale']"),
    (lambda d: d.update(hash="md5"), "hash", "expected"),
    (lambda d: d.update(tensors=[]), "tensors", "expected a JSON object"),
    (lambda d: d.update(rationale=5), "rationale", "must be text"),
    (lambda d: d.update(evidence={"a": 1}), "evidence", "list of records"),
    (lambda d: d.update(author=[1]), "author", "author must be"),
    (lambda d: d.update(edits=3), "edits", "null or text"),
    (lambda d: d["tensors"]["w"].update(form="pickle"), "tensors.w.form", "expected one of"),
    (lambda d: d["tensors"]["w"].update(dtype="object"), "tensors.w.dtype", "expected one of"),
    (lambda d: d["tensors"]["w"].update(shape=[2, -3]), "tensors.w.shape[1]", "integer in 0"),
    (lambda d: d["tensors"]["w"].update(shape="2x3"), "tensors.w.shape", "list of sizes"),
    (lambda d: d["tensors"]["w"].update(base_sha256="abc"), "tensors.w.base_sha256", "64"),
    (lambda d: d["tensors"]["w"].update(changed=99), "tensors.w.changed", "0..6"),
    (lambda d: d["tensors"]["w"].update(indices=[7]), "tensors.w.indices[0]", "0..5"),
    (lambda d: d["tensors"]["w"].update(indices=[1, 2]), "tensors.w.values", "expected 2"),
    (lambda d: d["tensors"]["w"].update(values=["x"]), "tensors.w.values[0]", "a number"),
    (lambda d: d["tensors"]["w"].update(values=[True]), "tensors.w.values[0]", "a number"),
    (lambda d: d["tensors"]["w"].pop("values"), "tensors.w", "missing fields ['values']"),
    (lambda d: d["tensors"]["w"].update(a=[[1.0]]), "tensors.w", "unexpected fields ['a']"),
])
def test_load_names_file_and_field(tmp_path, mutate, field, words):
    _, document = _saved(tmp_path)
    mutate(document)
    path = _write(tmp_path, document)
    with pytest.raises(ArtifactError) as caught:
        Patch.load(path)
    assert caught.value.field == field, str(caught.value)
    assert caught.value.path == path
    assert words in str(caught.value) and path in str(caught.value)


@pytest.mark.parametrize("form_fields, field, words", [
    ({"form": "lowrank", "a": [[1.0], [2.0]], "b": [[1.0, 2.0]]}, "tensors.w", "do not fit"),
    ({"form": "lowrank", "a": [[1.0], [2.0, 3.0]], "b": [[1.0]]}, "tensors.w.a[1]", "expected 1"),
    ({"form": "projection", "direction": [1.0, 1.0], "strength": 1, "axis": 2, "span": None},
     "tensors.w.axis", "0..1"),
    ({"form": "projection", "direction": [0.0, 0.0], "strength": 1, "axis": 0, "span": None},
     "tensors.w", "all zeros"),
    ({"form": "projection", "direction": [1.0, 1.0], "strength": 1, "axis": 0, "span": [0]},
     "tensors.w.span", "[start, stop]"),
    ({"form": "sparse", "indices": [3, 1], "values": [1.0, 2.0]}, "tensors.w", "ascending"),
    ({"form": "dense", "values": [1.0]}, "tensors.w.values", "expected 6 values"),
])
def test_load_checks_each_form(tmp_path, form_fields, field, words):
    _, document = _saved(tmp_path)
    entry = document["tensors"]["w"]
    for key in ("indices", "values"):
        entry.pop(key, None)
    entry.update(form_fields)
    with pytest.raises(ArtifactError) as caught:
        Patch.load(_write(tmp_path, document))
    assert caught.value.field == field, str(caught.value)
    assert words in str(caught.value)


@pytest.mark.parametrize("text, words", [
    ("not json", "not valid JSON"),
    ('{"format": NaN}', "not valid JSON"),
    ('{"format": "a", "format": "b"}', "duplicate key"),
    ("[" * 100_000 + "]" * 100_000, "JSON"),
    ("[]", "expected a JSON object"),
])
def test_load_refuses_what_is_not_a_patch(tmp_path, text, words):
    with pytest.raises(ArtifactError, match=words):
        Patch.load(_write(tmp_path, text))


def test_load_refuses_missing_and_binary_files(tmp_path):
    with pytest.raises(ArtifactError, match="cannot read"):
        Patch.load(tmp_path / "absent.json")
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ArtifactError, match="UTF-8"):
        Patch.load(path)


def test_a_hand_edited_value_is_caught_on_apply(tmp_path):
    base, document = _saved(tmp_path)
    document["tensors"]["w"]["values"] = [8.0]
    from tensorcode.errors import PatchError

    loaded = Patch.load(_write(tmp_path, document))
    with pytest.raises(PatchError, match="edited hash"):
        loaded.apply(base)

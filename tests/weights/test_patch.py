"""Patches: all four forms round-trip, diff then apply reproduces the edited mapping
exactly, a base with a different hash is refused, and the report numbers add up."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from tensorcode.errors import PatchError
from tensorcode.weights import (
    Dense,
    LowRank,
    Patch,
    Projection,
    Sparse,
    build,
    diff,
    tensor_sha256,
)


def _base(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w": rng.normal(size=(6, 5)).astype(np.float32),
            "v": rng.normal(size=(4, 8)),
            "b": rng.normal(size=5).astype(np.float32),
            "n": np.arange(10, dtype=np.int32)}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return tensor_sha256(a) == tensor_sha256(b)


# -- the four forms -----------------------------------------------------------------------

def test_lowrank_rebuilds_w_plus_a_times_b():
    base = _base()
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(6, 2)), rng.normal(size=(2, 5))
    patch = build(base, {"w": LowRank(a, b)})
    result = patch.apply(base)["w"]
    oracle = base["w"].astype(np.float64) + a @ b
    assert result.dtype == np.float32
    np.testing.assert_allclose(result, oracle.astype(np.float32), rtol=0, atol=4e-7)
    assert patch.changes["w"].form.kind == "lowrank" and patch.changes["w"].form.rank == 2
    assert patch.summary()["by_tensor"]["w"]["stored_numbers"] == 22


@pytest.mark.parametrize("axis, span", [(0, None), (1, None), (0, (1, 4)), (1, (2, 3))])
def test_projection_removes_the_direction_on_the_span(axis, span):
    base = _base()
    w = base["v"]  # float64 [4, 8]
    rng = np.random.default_rng(2)
    direction = rng.normal(size=w.shape[axis]) * 3.0
    strength = 0.75
    patch = build(base, {"v": Projection(direction, strength, axis=axis, span=span)})
    result = patch.apply(base)["v"]
    u = direction / np.linalg.norm(direction)
    oracle = w.copy()
    start, stop = span if span else (0, w.shape[1 - axis])
    if axis == 0:
        block = w[:, start:stop]
        oracle[:, start:stop] = block - strength * np.outer(u, u @ block)
    else:
        block = w[start:stop, :]
        oracle[start:stop, :] = block - strength * np.outer(block @ u, u)
    np.testing.assert_allclose(result, oracle, rtol=1e-12, atol=1e-12)
    untouched = np.ones(w.shape, dtype=bool)
    if axis == 0:
        untouched[:, start:stop] = False
    else:
        untouched[start:stop, :] = False
    assert np.array_equal(result[untouched], w[untouched])


def test_full_strength_projection_leaves_no_component_along_u():
    base = _base()
    direction = np.array([1.0, -2.0, 0.5, 3.0])
    result = build(base, {"v": Projection(direction, 1.0)}).apply(base)["v"]
    u = direction / np.linalg.norm(direction)
    np.testing.assert_allclose(u @ result, 0.0, atol=1e-12)


def test_sparse_and_dense_forms_given_directly():
    base = _base()
    patch = build(base, {"b": Sparse([1, 3], [10.0, -10.0]),
                         "n": Dense(np.full(10, 7, dtype=np.int32))})
    result = patch.apply(base)
    expected_b = base["b"].copy()
    expected_b[[1, 3]] = [10.0, -10.0]
    assert _same(result["b"], expected_b)
    assert result["n"].tolist() == [7] * 10


def test_build_with_an_edited_array_chooses_like_diff():
    base = _base()
    edited = base["w"].copy()
    edited[2, 3] = 9.0
    patch = build(base, {"w": edited})
    assert patch.changes["w"].form.kind == "sparse"
    assert _same(patch.apply(base)["w"], edited)


def test_structured_forms_are_bit_reproducible():
    base = _base()
    rng = np.random.default_rng(3)
    changes = {"w": LowRank(rng.normal(size=(6, 3)), rng.normal(size=(3, 5))),
               "v": Projection(rng.normal(size=8), 0.5, axis=1, span=(0, 3))}
    first = build(base, changes)
    second = build(base, changes)
    for name in changes:
        assert first.changes[name].edited_sha256 == second.changes[name].edited_sha256
        assert tensor_sha256(first.apply(base)[name]) == first.changes[name].edited_sha256


@pytest.mark.parametrize("change, words", [
    (LowRank(np.ones((5, 1)), np.ones((1, 5))), "a needs 6 rows"),
    (Projection(np.ones(3)), "direction has 3 entries"),
    (Projection(np.ones(6), span=(0, 9)), "reaches past axis 1"),
])
def test_forms_that_do_not_fit_the_tensor_are_refused(change, words):
    with pytest.raises(PatchError, match=words):
        build(_base(), {"w": change})


def test_form_arguments_are_checked():
    with pytest.raises(PatchError, match="rows x r"):
        LowRank(np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises(PatchError, match="non-finite"):
        LowRank(np.full((2, 1), np.nan), np.ones((1, 2)))
    with pytest.raises(PatchError, match="all zeros"):
        Projection(np.zeros(3))
    with pytest.raises(PatchError, match="axis must be 0 or 1"):
        Projection(np.ones(3), axis=2)
    with pytest.raises(PatchError, match="span"):
        Projection(np.ones(3), span=(2, 1))
    with pytest.raises(PatchError, match="strength must be finite"):
        Projection(np.ones(3), strength=float("inf"))
    with pytest.raises(PatchError, match="rank-2"):
        build(_base(), {"b": LowRank(np.ones((5, 1)), np.ones((1, 1)))})
    with pytest.raises(PatchError, match="floating"):
        build({"n": np.zeros((2, 2), dtype=np.int32)}, {"n": LowRank(np.ones((2, 1)),
                                                                    np.ones((1, 2)))})
    with pytest.raises(PatchError, match="overflow"):
        build({"h": np.ones((2, 2), dtype=np.float16)},
              {"h": LowRank(np.full((2, 1), 1e3), np.full((1, 2), 1e3))})
    with pytest.raises(PatchError, match="ascending"):
        build(_base(), {"b": Sparse([3, 1], [1.0, 2.0])})
    with pytest.raises(PatchError, match="cannot change tensor 'zz'"):
        build(_base(), {"zz": Sparse([0], [1.0])})


# -- diff ---------------------------------------------------------------------------------

def test_diff_then_apply_reproduces_the_edited_mapping_exactly():
    base = _base()
    edited = {name: array.copy() for name, array in base.items()}
    edited["w"][1, 2] = -0.0 if edited["w"][1, 2] == 0 else 0.0  # one element: sparse
    edited["v"] += 1.0                                           # everything: dense
    edited["n"][[0, 9]] = [-5, 50]
    patch = diff(base, edited)
    assert {name: change.form.kind for name, change in patch.changes.items()} == {
        "w": "sparse", "v": "dense", "n": "sparse"}
    assert "b" not in patch
    applied = patch.apply(base)
    for name in base:
        assert _same(applied[name], edited[name]), name
    assert applied["b"] is base["b"]


def test_diff_counts_bit_changes_even_negative_zero_and_nan_payloads():
    base = {"x": np.array([0.0, np.nan, 1.0])}
    edited = {"x": np.array([-0.0, np.nan, 1.0])}
    patch = diff(base, edited)
    assert patch.changes["x"].changed == 1
    assert _same(patch.apply(base)["x"], edited["x"])


def test_diff_chooses_sparse_or_dense_by_bytes():
    base = {"x": np.zeros(100, dtype=np.float32)}
    few = base["x"].copy()
    few[:33] = 1.0    # 33 * (8 + 4) = 396 < 400 bytes
    many = base["x"].copy()
    many[:34] = 1.0   # 34 * 12 = 408 >= 400 bytes
    assert diff(base, {"x": few}).changes["x"].form.kind == "sparse"
    assert diff(base, {"x": many}).changes["x"].form.kind == "dense"


def test_diff_and_apply_accept_big_endian_arrays():
    base = {"x": np.arange(4, dtype=">f4")}
    edited = {"x": np.array([0, 1, 5, 3], dtype="<f4")}
    patch = diff(base, edited)
    assert patch.changes["x"].changed == 1
    assert _same(patch.apply(base)["x"], edited["x"])


def test_diff_refuses_different_names_shapes_and_dtypes():
    base = _base()
    with pytest.raises(PatchError, match="same tensors"):
        diff(base, {name: base[name] for name in ("w", "v")})
    with pytest.raises(PatchError, match="changes shape"):
        diff(base, {**base, "b": np.zeros(6, dtype=np.float32)})
    with pytest.raises(PatchError, match="changes dtype"):
        diff(base, {**base, "b": base["b"].astype(np.float64)})


# -- applying -----------------------------------------------------------------------------

def test_apply_refuses_a_base_whose_hash_differs_naming_tensor_and_both_hashes():
    base = _base()
    patch = Patch.from_edits(base, "w[0, 0] = 1\nb[0] = 2\n")
    other = dict(base)
    other["b"] = base["b"] + np.float32(1e-6)
    with pytest.raises(PatchError) as caught:
        patch.apply(other)
    message = str(caught.value)
    assert "'b'" in message
    assert patch.changes["b"].base_sha256 in message
    assert tensor_sha256(other["b"]) in message


def test_apply_refuses_missing_tensors_and_wrong_layouts_before_building_anything():
    base = _base()
    patch = Patch.from_edits(base, "w[0, 0] = 1\n")
    with pytest.raises(PatchError, match="does not have"):
        patch.apply({"b": base["b"]})
    with pytest.raises(PatchError, match="was made for float32"):
        patch.apply({"w": base["w"].astype(np.float64)})
    with pytest.raises(PatchError, match="mapping"):
        patch.apply([base["w"]])


def test_apply_keeps_the_container_kind_and_leaves_the_input_alone():
    base = _base()
    ordered = OrderedDict(base)
    before = {name: tensor_sha256(array) for name, array in base.items()}
    result = Patch.from_edits(base, "w[0] = 0\n").apply(ordered)
    assert isinstance(result, OrderedDict) and list(result) == list(base)
    assert {name: tensor_sha256(array) for name, array in base.items()} == before


def test_a_tampered_patch_is_caught_by_the_edited_hash():
    base = _base()
    patch = Patch.from_edits(base, "b[0] = 5\n")
    change = patch.changes["b"]
    forged = Patch({"b": type(change)(change.shape, change.dtype, change.base_sha256,
                                      change.edited_sha256, change.changed,
                                      Dense(np.zeros(5, dtype=np.float32)))})
    with pytest.raises(PatchError, match="recorded edited hash"):
        forged.apply(base)


def test_from_edits_example_from_the_guide():
    base = {"w": np.zeros((8, 130), dtype=np.float32), "b": np.zeros(4, dtype=np.float32)}
    scales = {"w": 0.01, "b": 0.1}
    patch = Patch.from_edits(base, "w[6, 122] = 80\nw[:, 122:128] = 0\nb[3] += -5\n",
                             scales=scales, rationale="why", evidence=[{"source": "forward:3"}],
                             author={"model": "recorded"})
    result = patch.apply(base)
    # Statements run in order: the block assignment undoes the first edit, so w is
    # unchanged and gets no entry.
    assert "w" not in patch and result["w"] is base["w"]
    assert result["b"][3] == np.float32(-0.5)
    alone = Patch.from_edits(base, "w[6, 122] = 80\n", scales=scales)
    assert alone.apply(base)["w"][6, 122] == np.float32(0.8)
    assert alone.changes["w"].form.kind == "sparse" and alone.changes["w"].changed == 1
    assert patch.edits.startswith("w[6, 122]")


# -- report numbers and metadata ----------------------------------------------------------

def test_summary_and_fraction_changed():
    base = _base()
    rng = np.random.default_rng(4)
    patch = build(base, {"w": LowRank(rng.normal(size=(6, 1)), rng.normal(size=(1, 5)))})
    patch2 = Patch.from_edits(base, "b[0:2] = 3\nn[4] = 0\n", rationale="r", author="a",
                              evidence=[{"source": "x"}, {"source": "y"}])
    info = patch2.summary()
    assert info["tensors"] == 2 and info["forms"] == {"dense": 1, "sparse": 1}
    assert info["elements_changed"] == 3
    assert info["by_tensor"]["b"]["changed"] == 2 and info["by_tensor"]["b"]["size"] == 5
    assert info["rationale"] == "r" and info["author"] == "a" and info["evidence"] == 2
    total = sum(array.size for array in base.values())
    assert patch2.fraction_changed(base) == pytest.approx(3 / total)
    assert patch.fraction_changed(base) == pytest.approx(30 / total)
    assert "b" in patch2.describe() and "rationale: r" in patch2.describe()
    with pytest.raises(PatchError, match="not among the tensors"):
        patch2.fraction_changed({"w": base["w"]})


def test_metadata_must_be_plain_json():
    base = _base()
    with pytest.raises(PatchError, match="list of records"):
        Patch.from_edits(base, "", evidence={"source": "x"})
    with pytest.raises(PatchError, match="JSON object"):
        Patch.from_edits(base, "", evidence=["text"])
    with pytest.raises(PatchError, match="only JSON data"):
        Patch.from_edits(base, "", evidence=[{"source": object()}])
    with pytest.raises(PatchError, match="non-finite"):
        Patch.from_edits(base, "", evidence=[{"score": float("nan")}])
    with pytest.raises(PatchError, match="rationale must be text"):
        Patch.from_edits(base, "", rationale=3)
    with pytest.raises(PatchError, match="author"):
        Patch.from_edits(base, "", author=3)

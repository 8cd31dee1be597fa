"""Exported plans against the llvm backend's in-process plans, bit for bit, and the
export's rules: reproducible bytes, a non-empty directory refused unless forced, a
clear error without a C compiler."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tensorcode as tc
from tensorcode import aot
from tensorcode.aot import manifest as manifests
from tensorcode.aot import toolchain
from tensorcode.errors import CompileError, FeedError, TensorCodeError


def _elementwise():
    tape = tc.Tape()
    w = tape.parameter(np.linspace(-2, 2, 12).reshape(3, 4), name="w")
    x = tape.input(np.ones((3, 4)), name="x")
    y = tape.input(np.ones(4, np.float32), name="y")
    roots = [(x * w + 1.5).tanh() - (x / (w * w + 1.0)).exp(), (y * 3.0).sigmoid(),
             tc.functional.maximum(x, w).astype("float32")]
    rng = np.random.default_rng(0)
    return tape, roots, [rng.normal(size=(3, 4)), rng.normal(size=4).astype(np.float32)]


def _reductions():
    tape = tc.Tape()
    x = tape.input(np.ones((5, 7)), name="x")
    z = tape.input(np.ones((9, 33), np.float32), name="z")
    roots = [x.sum(), x.sum(axis=0), x.max(axis=1), z.mean(axis=1), (z * z).sum()]
    rng = np.random.default_rng(1)
    return tape, roots, [rng.normal(size=(5, 7)), rng.normal(size=(9, 33)).astype(np.float32)]


def _matmul():
    tape = tc.Tape()
    small = tape.parameter(np.linspace(-1, 1, 12).reshape(4, 3), name="small")
    big = tape.parameter(np.linspace(-1, 1, 256 * 192).reshape(256, 192), name="big")
    x = tape.input(np.ones((2, 4)), name="x")
    a = tape.input(np.ones((256, 256)), name="a")
    roots = [x @ small, a @ big]  # a loop matmul, and one through BLAS
    rng = np.random.default_rng(2)
    return tape, roots, [rng.normal(size=(2, 4)), rng.normal(size=(256, 256))]


def _take():
    tape = tc.Tape()
    table = tape.parameter(np.arange(24.0).reshape(6, 4), name="table")
    idx = tape.input(np.array([0, 1, 2], np.int64), name="idx")
    return tape, [table.take(idx, axis=0) * 2.0], [np.array([5, 0, 3], np.int64)]


def _random():
    tape = tc.Tape()
    key = tape.random_key()
    logits = tape.input(np.zeros((3, 5)), name="logits")
    roots = [tc.random.random_uniform(key, (4, 6)), tc.random.random_normal(key, (7,), "float64"),
             tc.random.bernoulli(key, 0.3, (9,)), tc.random.categorical(key, logits, 0.8)]
    rng = np.random.default_rng(3)
    return tape, roots, [tc.random.Generator(11).key_state(), rng.normal(size=(3, 5))]


def _partitioned():
    """Loops large enough to run in chunks on the worker pool in process; the library
    runs the same chunks in order."""
    tape = tc.Tape()
    x = tape.input(np.ones((300, 96), np.float32), name="x")
    roots = [x.tanh() * 2.0, x.softmax(axis=1), tc.layer_norm(x)]
    rng = np.random.default_rng(4)
    return tape, roots, [rng.normal(size=(300, 96)).astype(np.float32)]


KINDS = {"elementwise": _elementwise, "reductions": _reductions, "matmul": _matmul,
         "take": _take, "random": _random, "partitioned": _partitioned}


def _names(plan):
    return [plan.network.graph.nodes[symbol.index].name for symbol in plan.inputs()]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_exported_plan_equals_the_llvm_plan_bit_for_bit(kind, tmp_path):
    tape, roots, values = KINDS[kind]()
    network = tape.into_network()
    plan = network.entry(roots).lower("llvm")
    partitioned = any(s.annotations.partition for k in plan.program.loops for s in k.body
                      if hasattr(s, "annotations"))
    assert partitioned == (kind in ("partitioned", "matmul"))  # a large product: row blocks
    given = dict(zip([n.name for n in network.graph.nodes if n.op == "input"], values))
    inputs = [given[name] for name in _names(plan)]
    document = plan.export(tmp_path / "lib", name=kind)
    loaded = aot.load(tmp_path / "lib", sha256=document["export_sha256"])
    assert loaded.input_names == _names(plan)
    want = plan.bind(network.parameters())(*inputs)
    got = loaded(*inputs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    if kind == "matmul":
        assert document["blas"] is not None and document["blas"]["symbols"]
        assert os.path.isfile(document["blas"]["library"])
    else:
        assert document["blas"] is None
    # a batch of two cases: the same compiled body once per case
    batch = loaded.batch(*[np.stack([v, v]) for v in inputs])
    for a, b in zip(batch, want):
        assert a[1].tobytes() == b.tobytes()


def test_an_index_out_of_range_is_refused_with_the_plans_message(tmp_path):
    tape, roots, _ = _take()
    plan = tape.into_network().entry(roots).lower("llvm")
    plan.export(tmp_path / "lib", name="take")
    loaded = aot.load(tmp_path / "lib")
    with pytest.raises(FeedError, match="take: an index is out of range for an axis of size 6"):
        loaded(np.array([0, 6, 1], np.int64))
    with pytest.raises(FeedError, match="case 1"):
        loaded.batch(np.array([[0, 1, 2], [0, -1, 2]], np.int64))
    with pytest.raises(FeedError, match="expected shape"):
        loaded(np.array([0, 1], np.int64))
    with pytest.raises(FeedError, match="expected int64"):
        loaded(np.array([0, 1, 2], np.int32))


def test_the_export_is_reproducible(tmp_path):
    tape, roots, _ = _elementwise()
    plan = tape.into_network().entry(roots).lower("llvm")
    first = plan.export(tmp_path / "a", name="same")
    second = plan.export(tmp_path / "b", name="same")
    assert first == second
    for name in sorted(os.listdir(tmp_path / "a")):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert manifests.read(tmp_path / "a")["export_sha256"] == first["export_sha256"]


def test_a_non_empty_directory_is_refused_unless_forced(tmp_path):
    tape, roots, _ = _take()
    plan = tape.into_network().entry(roots).lower("llvm")
    target = tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(TensorCodeError, match=r"not empty.*--force"):
        plan.export(target)
    assert (target / "notes.txt").read_text() == "mine"
    plan.export(target, force=True)
    assert sorted(os.listdir(target)) == ["libplan.so", "manifest.json", "plan.h"]
    (target / "inner").mkdir()
    with pytest.raises(TensorCodeError, match="inner, which is not a file"):
        plan.export(target, force=True)


def test_a_library_name_is_an_identifier(tmp_path):
    tape, roots, _ = _take()
    plan = tape.into_network().entry(roots).lower("llvm")
    with pytest.raises(TensorCodeError, match="library name"):
        plan.export(tmp_path / "x", name="bad name; rm")


def test_without_a_compiler_the_error_names_cc_and_zig(monkeypatch):
    monkeypatch.delenv(toolchain.CC_ENV, raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(toolchain, "installed", lambda module: None)
    with pytest.raises(CompileError, match=r"cc .*tensorcode\[aot\].*zig cc"):
        toolchain.find_compiler()

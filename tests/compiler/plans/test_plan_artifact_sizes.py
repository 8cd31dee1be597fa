"""A saved plan whose graph names values no machine could hold (a ``broadcast_to`` to
terabytes, with a matching digest) is refused at load with ``ArtifactError``, never a
``MemoryError`` in a later call."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.core import ir
from tensorcode.errors import ArtifactError


def _graph(shape):
    tape = tc.Tape()
    x = tape.input(np.ones((2,), np.float32), name="x")
    y = (x.broadcast_to(shape) * 2.0).sum()
    network = tape.into_network()
    return network.entry([y]).lower("reference")


def test_a_graph_larger_than_the_machine_is_refused_at_load(tmp_path):
    _graph((3, 2)).save(tmp_path / "plan")
    document = json.loads((tmp_path / "plan" / "plan.json").read_text())
    big = [2 ** 18, 2 ** 20, 2]  # 2 TiB of float32
    nodes = document["graph"]["nodes"]
    nodes[2]["attrs"]["shape"] = nodes[2]["shape"] = nodes[3]["shape"] = big
    nodes[4]["attrs"]["axis"] = [0, 1, 2]
    crafted = _graph(tuple(big)).graph  # recorded, never run: the digest an attacker writes
    document["digest"] = hashlib.sha256(ir.describe(crafted).encode()).hexdigest()
    (tmp_path / "plan" / "plan.json").write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match=r"graph.*more than this machine's"):
        tc.Plan.load(tmp_path / "plan", backend="reference")


def test_a_plan_that_fits_loads_and_runs(tmp_path):
    _graph((3, 2)).save(tmp_path / "plan")
    plan = tc.Plan.load(tmp_path / "plan", backend="reference")
    assert float(plan.forward(plan.parameters()).of(plan.network.symbol(plan.roots[0]))) == 12.0


def test_a_layout_slot_that_does_not_fit_its_parameter_is_an_artifact_error(tmp_path):
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [2, 3, 1], "tanh", tc.init.xavier(3))
    out = mlp(tape.input(np.ones((4, 2), np.float32), name="x")).sum(axis=1)
    tape.into_network().entry([out]).lower("reference").save(tmp_path / "plan")
    path = tmp_path / "plan" / "plan.json"
    document = json.loads(path.read_text())
    weights = document["layout"][0]
    assert weights["shape"] == [2, 3]
    weights["shape"] = [3, 2]  # same size and offsets, so only the graph can refuse it
    path.write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match="does not fit the graph") as caught:
        tc.Plan.load(tmp_path / "plan", backend="reference")
    assert caught.value.field == "layout"

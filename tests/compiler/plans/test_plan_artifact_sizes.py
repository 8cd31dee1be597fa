"""A saved plan whose graph names values far beyond what its file holds (a
``broadcast_to`` to gigabytes or terabytes, with a matching digest) is refused at load
with ``ArtifactError``, in well under a second and without allocating them, never a
``MemoryError`` or gigabytes allocated in a later call; ``max_graph_bytes`` raises the
bound for a file the caller trusts."""

from __future__ import annotations

import hashlib
import json
import time
import tracemalloc

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


def _crafted(tmp_path, big):
    """A saved ``(x.broadcast_to(big) * 2).sum()`` with ``x`` of two values: the file
    holds 8 bytes of sources and a digest matching the crafted graph."""
    _graph((3, 2)).save(tmp_path / "plan")
    document = json.loads((tmp_path / "plan" / "plan.json").read_text())
    nodes = document["graph"]["nodes"]
    nodes[2]["attrs"]["shape"] = nodes[2]["shape"] = nodes[3]["shape"] = list(big)
    nodes[4]["attrs"]["axis"] = list(range(len(big)))
    crafted = _graph(tuple(big)).graph  # recorded, never run: the digest an attacker writes
    document["digest"] = hashlib.sha256(ir.describe(crafted).encode()).hexdigest()
    (tmp_path / "plan" / "plan.json").write_text(json.dumps(document))
    return tmp_path / "plan"


def test_a_small_file_asking_for_gigabytes_is_refused_fast_and_small(tmp_path):
    """A billion rows from two values (16 GB of float32 across two nodes): over the
    default limit of 256 times the file's sources (at least 64 MiB), so refused before
    anything is built."""
    directory = _crafted(tmp_path, (10 ** 9, 2))
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ArtifactError, match=r"graph.*more than the limit of "
                                                r"67108864.*max_graph_bytes") as caught:
            tc.Plan.load(directory, backend="reference")
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.field == "graph"
    assert elapsed < 1.0 and peak < 100 * 2 ** 20, (elapsed, peak)


def test_max_graph_bytes_raises_the_limit_and_the_machine_still_bounds_it(tmp_path):
    directory = _crafted(tmp_path / "a", (2 ** 20, 2))  # 16 MiB: under the floor
    assert tc.Plan.load(directory, backend="reference").graph.nodes[2].type.shape == (
        2 ** 20, 2)
    with pytest.raises(ArtifactError, match=r"more than the limit of 1000 \(max_graph_bytes"):
        tc.Plan.load(directory, backend="reference", max_graph_bytes=1000)
    big = _crafted(tmp_path / "b", (2 ** 18, 2 ** 20, 2))  # 2 TiB of float32
    with pytest.raises(ArtifactError, match=r"graph.*more than this machine's"):
        tc.Plan.load(big, backend="reference", max_graph_bytes=2 ** 62)
    with pytest.raises(TypeError, match="max_graph_bytes"):
        tc.Plan.load(directory, backend="reference", max_graph_bytes=-1)


def test_the_default_limit_is_a_multiple_of_the_sources_with_a_floor(tmp_path):
    """1 MiB of sources allow 256 MiB of values: a graph of 121 MiB (over the 64 MiB
    floor) loads, one of 401 MiB is refused, naming the file's own source bytes.
    Lowering and loading record the graph; neither runs it."""
    from tensorcode.compiler.plans.saved import GRAPH_FLOOR_BYTES, GRAPH_MULTIPLE

    assert (GRAPH_MULTIPLE, GRAPH_FLOOR_BYTES) == (256, 64 << 20)
    width = 1 << 18  # float32: 1 MiB of sources
    for rows, loads in [(60, True), (200, False)]:
        tape = tc.Tape()
        x = tape.input(np.ones((width,), np.float32), name="x")
        y = (x.broadcast_to((rows, width)) * 2.0).sum()
        directory = tmp_path / f"plan{rows}"
        tape.into_network().entry([y]).lower("reference").save(directory)
        if loads:
            assert tc.Plan.load(directory, backend="reference").roots
        else:
            with pytest.raises(ArtifactError, match=r"256 times the 10485\d\d bytes"):
                tc.Plan.load(directory, backend="reference")


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

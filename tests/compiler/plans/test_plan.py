"""The plan API on the reference backend (no compiling): forward, of, recorded
gradients, batches, feeds, and saved plans."""

from __future__ import annotations

import json

import numpy as np
import pytest
from compiler_graphs import assert_close, mlp_program, random_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorcode as tc
from tensorcode.compiler.plans.plan import Plan
from tensorcode.errors import BackendError


def check_against_runtime(network, loss, adjoints, extras, plan, dtype):
    parameters = network.parameters()
    run = plan.forward(parameters)
    ref = network.forward(parameters)
    assert_close(run.of(loss), ref.of(loss), dtype, "loss")
    for e in extras:
        assert_close(run.of(e), ref.of(e), dtype, "extra root")
    recorded = run.recorded_gradients(adjoints)
    backward = ref.backward(loss).parameters(parameters)
    for k, (a, b) in enumerate(zip(recorded, backward)):
        assert_close(a, b, dtype, f"gradient {k}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), dtype=st.sampled_from(["float32", "float64"]))
def test_reference_plan_matches_the_interpreter_and_runtime_backward(seed, dtype):
    network, loss, adjoints, extras = random_program(seed, dtype, steps=14, parts=2)
    plan = network.entry(adjoints.roots() + extras).lower("reference")
    check_against_runtime(network, loss, adjoints, extras, plan, dtype)


@pytest.mark.parametrize("activation, loss", [("tanh", "mse"), ("relu", "sum"),
                                              ("tanh", "cross_entropy")])
def test_mlp_training_programs(activation, loss):
    network, value, adjoints, syms = mlp_program([3, 8, 4], activation, batch=6, loss=loss)
    plan = network.entry(adjoints.roots()).lower("reference")
    check_against_runtime(network, value, adjoints, [], plan, "float32")


def test_embedding_program():
    network, value, adjoints, syms = mlp_program([6, 8, 5], batch=4, loss="cross_entropy",
                                                 embedding=(5, 2, 3))
    plan = network.entry(adjoints.roots()).lower("reference")
    check_against_runtime(network, value, adjoints, [], plan, "float32")


def test_of_refuses_a_symbol_that_is_not_a_root():
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    plan = network.entry([value]).lower("reference")
    run = plan.forward(network.parameters())
    with pytest.raises(tc.TensorCodeError, match="not a root of this plan"):
        run.of(syms["out"])
    with pytest.raises(tc.TensorCodeError, match="not a root"):
        run.recorded_gradients(adjoints)


def test_unknown_backend_and_foreign_tables_are_refused():
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    with pytest.raises(BackendError,
                       match=r"unknown backend 'cuda'.*\['numba', 'llvm', 'reference'\]"):
        network.entry([value]).lower("cuda")
    other, *_ = mlp_program([2, 4, 1], batch=3)
    plan = network.entry([value]).lower("reference")
    with pytest.raises(tc.TensorCodeError, match="another network"):
        plan.forward(other.parameters())


def test_feeds_are_validated_and_used():
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    plan = network.entry([value, syms["out"]]).lower("reference")
    parameters = network.parameters()
    x = np.full((3, 2), 0.25, np.float32)
    run = plan.forward(parameters, {syms["x"]: x})
    assert_close(run.of(syms["out"]), network.forward(parameters, {syms["x"]: x}).of(syms["out"]),
                 "float32")
    with pytest.raises(tc.FeedError, match='"x"'):
        plan.forward(parameters, {syms["x"]: np.zeros((2, 2), np.float32)})
    with pytest.raises(tc.FeedError):
        plan.forward(parameters, {syms["out"]: x})


def test_forward_batch_loops_over_cases():
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    plan = network.entry([value, syms["out"]]).lower("reference")
    parameters = network.parameters()
    xs = np.random.default_rng(0).uniform(-1, 1, (5, 3, 2)).astype(np.float32)
    run = plan.forward_batch(parameters, {syms["x"]: xs})
    assert run.of(value).shape == (5,) and run.of(syms["out"]).shape == (5, 3, 1)
    for c in range(5):
        assert_close(run.of(value)[c], network.forward(parameters, {syms["x"]: xs[c]}).of(value),
                     "float32")
    with pytest.raises(tc.FeedError, match="N"):
        plan.forward_batch(parameters, {syms["x"]: xs, syms["y"]: np.zeros((4, 3, 1), np.float32)})


def test_bind_returns_roots_in_order():
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    plan = network.entry([syms["out"], value]).lower("reference")
    parameters = network.parameters()
    bound = plan.bind(parameters)
    inputs = [network.graph.nodes[network.node_of(s)].value for s in plan.inputs()]
    out, loss = bound(*inputs)
    assert out.shape == (3, 1) and loss.shape == ()
    assert_close(loss, network.forward(parameters).of(value), "float32")


@pytest.mark.parametrize("backend", ["reference", "numba", "llvm"])
def test_bound_scalars_return_the_scalar_roots_as_numbers(backend):
    tape = tc.Tape()
    x = tape.input(np.array([1.0, -2.0, 3.0]), name="x")
    w = tape.parameter(np.array([0.5, 0.25, 2.0]), name="w")
    total = (x * w).sum()
    count = (x > 0).astype("int64").sum()
    vector = x * w
    network = tape.into_network()
    parameters = network.parameters()
    plan = network.entry([total, count]).lower(backend)
    call = plan.bind(parameters).scalars
    values = call(np.array([4.0, 1.0, -1.0]))
    assert values == (0.25, 2)  # 4*0.5 + 1*0.25 - 1*2; two positive entries
    assert type(values[0]) is float and type(values[1]) is int
    assert network.entry([total, vector]).lower("reference").bind(parameters).scalars is None


def test_describe_before_and_after_lowering():
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    entry = network.entry(adjoints.roots())
    before = entry.describe()
    after = entry.lower("reference").describe()
    assert "return" in before and "kernel" not in before
    assert "kernel 0" in after and "bytes" in after


# ---------------------------------------------------------------------------------------
# saved plans


def test_save_and_load_round_trip(tmp_path):
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    plan = network.entry(adjoints.roots()).lower("reference")
    plan.save(tmp_path / "plan")
    assert sorted(p.name for p in (tmp_path / "plan").iterdir()) == ["plan.json",
                                                                     "values.safetensors"]
    loaded = Plan.load(tmp_path / "plan")
    assert loaded.backend == "reference"
    expected = plan.forward(network.parameters())
    run = loaded.forward(loaded.parameters())
    for root, mine in zip(loaded.roots, adjoints.roots()):
        assert_close(run.of(loaded.network.symbol(root)), expected.of(mine), "float32")
    # bound to the original network: same symbols, same tables
    again = Plan.load(tmp_path / "plan", network=network)
    assert_close(again.forward(network.parameters()).of(value), expected.of(value), "float32")


def test_save_is_atomic_a_failed_save_keeps_the_old_plan(tmp_path, monkeypatch):
    from tensorcode.compiler.plans import saved as artifact

    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    first = network.entry([value]).lower("reference")
    first.save(tmp_path / "plan")
    before = {p.name: p.read_bytes() for p in (tmp_path / "plan").iterdir()}

    def crash(*args, **kwargs):
        raise OSError("simulated crash while writing plan.json")

    monkeypatch.setattr(artifact, "atomic_write_text", crash)
    with pytest.raises(OSError, match="simulated"):
        network.entry(adjoints.roots()).lower("reference").save(tmp_path / "plan")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "plan").iterdir()} == before
    assert len(Plan.load(tmp_path / "plan").roots) == 1
    monkeypatch.undo()
    network.entry(adjoints.roots()).lower("reference").save(tmp_path / "plan")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]
    assert len(Plan.load(tmp_path / "plan").roots) == len(adjoints.roots())


def _tamper(path, change):
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


@pytest.mark.parametrize("change, field", [
    (lambda d: d.update(format="other/9"), "format"),
    (lambda d: d["graph"]["nodes"][-1].update(op="frobnicate"), "graph.nodes"),
    (lambda d: d["graph"]["nodes"][-1].update(shape="big"), "graph.nodes"),
    (lambda d: d["layout"][0].update(offset=7), "layout[0].offset"),
    (lambda d: d.update(digest="0" * 64), "digest"),
    (lambda d: d["graph"].pop("outputs"), "graph.outputs"),
])
def test_load_validates_fields(tmp_path, change, field):
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    network.entry(adjoints.roots()).lower("reference").save(tmp_path / "plan")
    _tamper(tmp_path / "plan" / "plan.json", change)
    with pytest.raises(tc.ArtifactError) as info:
        Plan.load(tmp_path / "plan")
    assert "plan.json" in str(info.value)
    assert info.value.field is not None and info.value.field.startswith(field.split("[")[0])


def test_load_reports_damaged_values_and_the_wrong_network(tmp_path):
    network, value, adjoints, syms = mlp_program([2, 4, 1], batch=3)
    network.entry(adjoints.roots()).lower("reference").save(tmp_path / "plan")
    other, *_ = mlp_program([2, 5, 1], batch=3)
    with pytest.raises(tc.ArtifactError, match="layout"):
        Plan.load(tmp_path / "plan", network=other)
    values = tmp_path / "plan" / "values.safetensors"
    values.write_bytes(values.read_bytes()[:40])
    with pytest.raises(tc.ArtifactError, match=r"values\.safetensors"):
        Plan.load(tmp_path / "plan")
    with pytest.raises(tc.ArtifactError, match="no such file"):
        Plan.load(tmp_path / "nowhere")

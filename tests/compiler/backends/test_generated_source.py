"""No text from a name or an attribute reaches generated source: names are data.

A plan whose names hold quotes, newlines and Python code lowers, runs, saves and loads on
both compiled backends, and neither ``plan.source()`` (Python for ``numba``, LLVM IR for
``llvm``) nor any file of the plan cache contains that text; a saved
plan whose attributes were edited to hold code or floats where integers belong is
refused when loaded."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.compiler.plans.plan import Plan, cache_dir
from tensorcode.errors import FeedError

MARK = "PWNED_BY_NAME"
NAMES = [
    "it's",
    'say "hi"',
    "line\nbreak",
    f"__import__('os').system('echo {MARK}')#",
    f"'''\nraise SystemExit('{MARK}')\n'''",
    f'"); import os; os.system("{MARK}"); ("',
]
FRAGMENTS = ["it's", '"hi"', "line\nbreak", MARK, "__import__", "import os", "SystemExit"]


def _clean(text: str) -> None:
    for fragment in FRAGMENTS:
        assert fragment not in text, f"generated source holds {fragment!r}"


@pytest.fixture(scope="module", params=["llvm", "numba"])
def built(request):
    tape = tc.Tape()
    xs = [tape.input(np.full((2, 3), k + 1, np.float32), name=name)
          for k, name in enumerate(NAMES)]
    w = tape.parameter(np.arange(3, dtype=np.float32), name=NAMES[3])
    total = xs[0] * w
    for x in xs[1:]:
        total = total + x
    y = total.slice(1, 3, axis=1).sum()
    network = tape.into_network()
    plan = network.entry([y]).lower(request.param)
    return network, plan, xs, y


def test_names_never_reach_generated_source(built):
    network, plan, xs, y = built
    _clean(plan.source())
    expected = float(network.forward(network.parameters()).of(y))
    assert float(plan.forward(network.parameters()).of(y)) == pytest.approx(expected)
    for path in pathlib.Path(cache_dir()).rglob("p_*.py"):
        _clean(path.read_text(encoding="utf-8"))
    for path in pathlib.Path(cache_dir()).rglob("l_*.o"):  # llvm objects
        _clean(path.read_bytes().decode("latin-1"))


def test_a_wrong_feed_names_the_input_as_data(built):
    network, plan, xs, y = built
    bound = plan.bind(network.parameters())
    inputs = [np.ones((2, 3), np.float32) for _ in xs]
    inputs[3] = np.ones((3, 2), np.float32)
    with pytest.raises(tc.FeedError) as caught:
        bound(*inputs)
    assert NAMES[3] in str(caught.value) and "expected shape [2, 3]" in str(caught.value)


def test_a_saved_plan_with_such_names_loads_without_running_them(built, tmp_path):
    network, plan, xs, y = built
    plan.save(tmp_path / "plan")
    document = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert {n.get("name") for n in document["graph"]["nodes"]} >= set(NAMES)
    loaded = Plan.load(tmp_path / "plan")
    _clean(loaded.source())
    expected = float(plan.forward(network.parameters()).of(y))
    rebuilt = loaded.network
    assert float(loaded.forward(rebuilt.parameters()).of(
        rebuilt.symbol(loaded.roots[0]))) == pytest.approx(expected)


def _edited(built, tmp_path, edit) -> pathlib.Path:
    network, plan, xs, y = built
    target = tmp_path / "edited"
    plan.save(target)
    path = target / "plan.json"
    document = json.loads(path.read_text())
    edit(document["graph"]["nodes"])
    path.write_text(json.dumps(document))
    return target


def _slice(nodes) -> dict:
    return next(n for n in nodes if n["op"] == "slice")


def test_a_float_slice_attribute_is_refused_at_load(built, tmp_path):
    target = _edited(built, tmp_path, lambda nodes: _slice(nodes)["attrs"].update(start=1.0))
    with pytest.raises(tc.ArtifactError, match=r"attrs\.start.*takes integers"):
        Plan.load(target)


@pytest.mark.parametrize("attrs", [
    {"axis": "1); import os; os.system('x') #"},
    {"start": [1, "'"]},
    {"stop": {"code": "__import__('os')"}},
])
def test_attributes_holding_code_are_refused_at_load(built, tmp_path, attrs):
    target = _edited(built, tmp_path, lambda nodes: _slice(nodes)["attrs"].update(attrs))
    with pytest.raises(tc.ArtifactError):
        Plan.load(target)


def test_an_overlong_name_is_refused_at_load(built, tmp_path):
    def edit(nodes):
        next(n for n in nodes if n["op"] == "input")["name"] = "x" * 5000
    with pytest.raises(tc.ArtifactError, match="at most 1000"):
        Plan.load(_edited(built, tmp_path, edit))


def test_generated_source_is_built_from_identifiers_the_generator_made(built):
    import ast
    import re

    network, plan, xs, y = built
    if plan.backend == "llvm":
        source = plan.source()
        # every global and local name is one the generator made from words and numbers
        quoted = re.findall(r'[@%]"([^"]*)"', source)
        assert quoted and all(re.fullmatch(r"[\w.]+", n) for n in quoted), quoted
        assert 'c"' not in source  # no string constant at all
        return
    allowed = re.compile(r"input #\d+: expected shape \[[\d, ]*\]( after the case axis)?"
                         r"|(take|scatter_add|one_hot): an index is out of range[\w ]*"
                         r"|-?0x[0-9a-f.]+p[+-]\d+|float32|float64|int32|int64"
                         r"|\(?types\.Array\(types\.\w+, \d+, 'C', readonly=True\)[^\n]*")
    literals = [node.value for node in ast.walk(ast.parse(plan.source()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    assert literals and all(allowed.fullmatch(text) for text in literals), literals
    names = [node.id for node in ast.walk(ast.parse(plan.source()))
             if isinstance(node, ast.Name)]
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in names)


@pytest.mark.parametrize("backend", ["llvm", "numba"])
def test_a_fused_step_plan_keeps_names_out_of_its_source(backend):
    """The step generator (``run_step``/``run_steps``) names inputs by position too; a
    wrong feed still names the input, as data."""
    tape = tc.Tape()
    x = tape.input(np.ones((2, 3), np.float32), name=NAMES[4])
    w = tape.parameter(np.arange(3, dtype=np.float32), name="w")
    loss = (x * w).sum()
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    step = network.entry(adjoints.roots()).lower(backend, optimizer=tc.optim.Sgd())
    _clean(step.source())
    parameters = network.parameters()
    bound = step.bind(parameters, tc.optim.Sgd())
    with pytest.raises(FeedError) as caught:
        bound(0.1, np.ones((5, 3), np.float32))
    assert MARK in str(caught.value) and "expected shape" in str(caught.value)


@pytest.mark.parametrize("backend", ["llvm", "numba"])
def test_split_products_and_their_epilogues_keep_names_out_of_the_source(backend):
    """The loop program's rewrites after lowering (a product's blocks with the
    elementwise kernel after it, a product split along its shared dimension) and the
    tiled products' calls add loop variables, titles and numbers of their own making;
    the names of the tape's values stay out."""
    import re

    from tensorcode.compiler.lower.loops import Gemm
    from tensorcode.compiler.lower.partition import walk

    rng = np.random.default_rng(0)
    tape = tc.Tape()
    x = tape.input(rng.normal(size=(512, 256)).astype(np.float32), name=NAMES[3])
    w = tape.parameter(rng.normal(size=(256, 256)).astype(np.float32) / 16, name=NAMES[4])
    b = tape.parameter(rng.normal(size=(256,)).astype(np.float32), name=NAMES[5])
    g = tape.input(rng.normal(size=(2048, 64)).astype(np.float32), name=NAMES[2])
    h = tape.input(rng.normal(size=(2048, 192)).astype(np.float32), name=NAMES[1])
    y, gradient = (x @ w + b).relu(), g.T @ h
    network = tape.into_network()
    plan = network.entry([y, gradient]).lower(backend)
    titles = [k.title for k in plan.program.loops]
    assert any(" + " in t for t in titles)  # an epilogue moved into a product's blocks
    assert any(s.var == "depth" for k in plan.program.loops for s in k.body
               if hasattr(s, "var"))  # a product split along its shared dimension
    assert any(s.method == "tiles" for k in plan.program.loops for s in walk(k.body)
               if isinstance(s, Gemm))  # x @ w is tiled with or without AVX-512
    assert all(re.fullmatch(r"[\w %+]*", t) for t in titles)
    _clean(plan.source())
    run = plan.forward(network.parameters())
    want = network.entry([y, gradient]).lower("reference").forward(network.parameters())
    for value in (y, gradient):
        np.testing.assert_allclose(run.of(value), want.of(value), rtol=1e-4, atol=1e-3)

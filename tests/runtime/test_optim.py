"""Optimizers: PyTorch parity on recorded trajectories (no PyTorch needed), the compiled
loop against the NumPy reference, PyTorch's state-dict layout, all-or-nothing loads, and
a custom optimizer with the same standing as the built-ins."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from promised import assert_promised_equal
from safetensors import safe_open
from safetensors.numpy import load_file

import tensorcode as tc
from tensorcode.compiler.plans.tables import Gradients

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
FIXTURE_FILES = sorted(FIXTURES.glob("optim_*.safetensors"))
CLASSES = {"SGD": tc.optim.Sgd, "Adam": tc.optim.Adam, "AdamW": tc.optim.AdamW}


def table(shapes_dtypes, seed=0):
    """A network with one named parameter per (shape, dtype) and its fresh table."""
    rng = np.random.default_rng(seed)
    tape = tc.Tape()
    symbols = [tape.parameter(rng.standard_normal(shape).astype(dtype), name=f"p{k}")
               for k, (shape, dtype) in enumerate(shapes_dtypes)]
    network = tape.into_network()
    return network, symbols, network.parameters()


def gradients_like(parameters, arrays):
    return Gradients.from_payloads(parameters.layout, arrays)


def random_gradients(parameters, rng):
    return gradients_like(parameters, [rng.standard_normal(p.shape).astype(p.dtype) +
                                       0.1 * p for p in parameters.payloads()])


def read_fixture(path):
    tensors = load_file(str(path))
    with safe_open(str(path), "np") as handle:
        metadata = handle.metadata()
    return tensors, metadata


def build(metadata, backend):
    kwargs = json.loads(metadata["kwargs"])
    if "betas" in kwargs:
        kwargs["betas"] = tuple(kwargs["betas"])
    return CLASSES[metadata["optimizer"]](**kwargs, backend=backend)


def test_fixtures_are_present():
    assert len(FIXTURE_FILES) >= 10
    for path in FIXTURE_FILES:
        tensors, metadata = read_fixture(path)
        assert int(metadata["steps"]) >= 50


@pytest.mark.parametrize("backend", ["llvm", "reference"])
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_trajectory_matches_torch_recording(path, backend):
    tensors, metadata = read_fixture(path)
    steps = int(metadata["steps"])
    initial = [tensors[f"initial/{k}"] for k in range(3)]
    tape = tc.Tape()
    for k, value in enumerate(initial):
        tape.parameter(value, name=f"p{k}")
    network = tape.into_network()
    parameters = network.parameters()
    optimizer = build(metadata, backend)
    for t in range(steps):
        grads = gradients_like(parameters, [tensors[f"gradients/{k}"][t] for k in range(3)])
        parameters = optimizer.step(parameters, grads, float(tensors["lr"][t]))
        for k, payload in enumerate(parameters.payloads()):
            expected = tensors[f"trajectory/{k}"][t]
            np.testing.assert_allclose(payload, expected, rtol=1e-10, atol=1e-14,
                                       err_msg=f"step {t + 1}, parameter {k}")
    state = optimizer.state_dict()
    recorded = {}
    for name, value in tensors.items():
        if name.startswith("state/"):
            _, index, key = name.split("/")
            recorded.setdefault(int(index), {})[key] = value
    assert sorted(state["state"]) == sorted(recorded)
    for index, entry in recorded.items():
        assert list(state["state"][index]) == [k for k in ("momentum_buffer", "step", "exp_avg",
                                                             "exp_avg_sq", "max_exp_avg_sq")
                                               if k in entry]
        for key, value in entry.items():
            ours = state["state"][index][key]
            assert ours.dtype == value.dtype and ours.shape == value.shape, key
            np.testing.assert_allclose(ours, value, rtol=1e-10, atol=1e-14)
    group = json.loads(metadata["param_group"])
    ours = dict(state["param_groups"][0])
    if "betas" in ours:
        ours["betas"] = list(ours["betas"])
    assert list(ours) == list(group)  # PyTorch's keys in PyTorch's order
    assert ours == group


OPTIMIZER_CASES = {
    "sgd": lambda b: tc.optim.Sgd(backend=b),
    "sgd-momentum": lambda b: tc.optim.Sgd(momentum=0.9, dampening=0.3, weight_decay=0.01,
                                           backend=b),
    "sgd-nesterov": lambda b: tc.optim.Sgd(momentum=0.7, nesterov=True, maximize=True,
                                           backend=b),
    "adam": lambda b: tc.optim.Adam(backend=b),
    "adam-amsgrad": lambda b: tc.optim.Adam(betas=(0.3, 0.5), amsgrad=True, weight_decay=0.1,
                                            backend=b),
    "adamw": lambda b: tc.optim.AdamW(maximize=True, backend=b),
    "adamw-ams": lambda b: tc.optim.AdamW(amsgrad=True, weight_decay=0.2, backend=b),
}
#: every case on the default backend; on Numba (each update a compile of its own, seconds)
#: one case per rule, with most of its options (llvm and numba lower the same rule IR
#: through op tables held equal op by op in tests/compiler/backends)
NUMBA_CASES = ("sgd-nesterov", "adam-amsgrad", "adamw-ams")


@pytest.mark.parametrize("case, backend",
                         [(case, "llvm") for case in OPTIMIZER_CASES]
                         + [(case, "numba") for case in NUMBA_CASES],
                         ids=[f"llvm-{c}" for c in OPTIMIZER_CASES]
                         + [f"numba-{c}" for c in NUMBA_CASES])
def test_compiled_loop_equals_reference_as_promised(case, backend):
    """Bit for bit where the rule is correctly rounded arithmetic (SGD), within a few ulps
    where it calls ``pow`` (Adam's bias corrections): NumPy's ``power`` is CPU-dispatched
    (``promised.py``). On Numba, the llvm backend's trajectory too, bit for bit."""
    make = OPTIMIZER_CASES[case]
    # float32 and float64 slots interleaved: one buffer (and one loop call) per dtype
    network, _, start = table([((4, 3), "float32"), ((7,), "float64"), ((2,), "float32"),
                               ((3, 3), "float64")])
    compiled, reference = make(backend), make("reference")
    twin = make("llvm") if backend != "llvm" else None
    exact = compiled.recorded_rule(["float32", "float64"]).exact
    assert exact == case.startswith("sgd")   # Adam's rule reads beta ** step
    a = b = c = start
    rng = np.random.default_rng(1)
    for t in range(12):
        grads = random_gradients(a, rng)
        a = compiled.step(a, grads, 0.01 + 0.001 * t)
        b = reference.step(b, gradients_like(b, grads.payloads()), 0.01 + 0.001 * t)
        for k, (ours, theirs) in enumerate(zip(a.payloads(), b.payloads())):
            assert_promised_equal(ours, theirs, exact, f"step {t}, slot {k}")
        if twin is not None:
            c = twin.step(c, gradients_like(c, grads.payloads()), 0.01 + 0.001 * t)
            assert a.equals(c), f"step {t}: {backend} and llvm differ"
    sa, sb = compiled.state_dict(), reference.state_dict()
    for index in sa["state"]:
        for key in sa["state"][index]:
            assert_promised_equal(sa["state"][index][key], sb["state"][index][key], exact,
                                  f"state[{index}].{key}")


def test_float32_stays_float32():
    network, _, parameters = table([((5,), "float32")])
    rng = np.random.default_rng(2)
    optimizer = tc.optim.Adam()
    result = optimizer.step(parameters, random_gradients(parameters, rng), 0.1)
    assert result.payloads()[0].dtype == np.float32
    assert optimizer.state_dict()["state"][0]["exp_avg"].dtype == np.float32
    assert optimizer.state_dict()["state"][0]["step"].dtype == np.float32


def test_step_returns_a_new_table_and_leaves_the_old_one():
    network, symbols, parameters = table([((3,), "float64")])
    before = parameters.clone()
    grads = gradients_like(parameters, [np.ones(3)])
    after = tc.optim.Sgd(momentum=0.5).step(parameters, grads, 0.1)
    assert parameters.equals(before)
    np.testing.assert_array_equal(after.of(symbols[0]), before.of(symbols[0]) - 0.1)


def test_state_dict_defaults_match_torch_layout():
    sgd, adam, adamw = tc.optim.Sgd(), tc.optim.Adam(), tc.optim.AdamW()
    assert sgd.state_dict() == {"state": {}, "param_groups": [{
        "lr": 0.001, "momentum": 0, "dampening": 0, "weight_decay": 0, "nesterov": False,
        "maximize": False, "foreach": None, "differentiable": False, "fused": None,
        "params": []}]}
    adam_group = {"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-08, "weight_decay": 0,
                  "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                  "differentiable": False, "fused": None, "decoupled_weight_decay": False,
                  "params": []}
    assert adam.state_dict() == {"state": {}, "param_groups": [adam_group]}
    assert list(adam.state_dict()["param_groups"][0]) == list(adam_group)
    assert adamw.state_dict()["param_groups"][0] == dict(
        adam_group, weight_decay=0.01, decoupled_weight_decay=True)


def test_sgd_without_momentum_keeps_no_state():
    network, _, parameters = table([((3,), "float64"), ((2,), "float64")])
    sgd = tc.optim.Sgd()
    sgd.step(parameters, gradients_like(parameters, [np.ones(3), np.ones(2)]), 0.1)
    state = sgd.state_dict()
    assert state["state"] == {} and state["param_groups"][0]["params"] == [0, 1]
    assert state["param_groups"][0]["lr"] == 0.1


def test_state_dict_round_trip_continues_identically():
    network, _, parameters = table([((4,), "float64"), ((2, 3), "float32")])
    rng = np.random.default_rng(3)
    first = tc.optim.Adam(amsgrad=True, weight_decay=0.01)
    for _ in range(5):
        parameters = first.step(parameters, random_gradients(parameters, rng), 0.05)
    second = tc.optim.Adam()
    second.load_state_dict(first.state_dict(), parameters)
    assert second.amsgrad and second.weight_decay == 0.01  # adopted, as torch.optim does
    a = b = parameters
    for _ in range(5):
        grads = random_gradients(a, rng)
        a = first.step(a, grads, 0.05)
        b = second.step(b, grads, 0.05)
    assert a.equals(b)


def snapshot(optimizer):
    state = optimizer.state_dict()
    return (repr(state["param_groups"]),
            {k: {n: v.copy() for n, v in e.items()} for k, e in state["state"].items()})


def same(x, y):
    return x[0] == y[0] and x[1].keys() == y[1].keys() and all(
        np.array_equal(x[1][k][n], y[1][k][n]) for k in x[1] for n in x[1][k])


def corrupt_cases():
    def wrong_shape(s):
        s["state"][1]["exp_avg"] = np.zeros((9,))

    def wrong_dtype(s):
        s["state"][0]["exp_avg_sq"] = s["state"][0]["exp_avg_sq"].astype(np.float32)

    def extra_key(s):
        s["state"][0]["velocity"] = np.zeros(4)

    def missing_key(s):
        del s["state"][1]["exp_avg_sq"]

    def bad_index(s):
        s["state"][7] = s["state"][0]

    def bad_step(s):
        s["state"][0]["step"] = np.array(-1.0, dtype=np.float32)

    def bad_group_field(s):
        s["param_groups"][0]["eps"] = "small"

    def extra_group_field(s):
        s["param_groups"][0]["nesterov"] = False

    def missing_group_field(s):
        del s["param_groups"][0]["amsgrad"]

    def bad_params(s):
        s["param_groups"][0]["params"] = [0]

    def adamw_state(s):
        s["param_groups"][0]["decoupled_weight_decay"] = True

    def bad_betas(s):
        s["param_groups"][0]["betas"] = (0.9, 1.5)

    def two_groups(s):
        s["param_groups"].append(dict(s["param_groups"][0]))

    return [wrong_shape, wrong_dtype, extra_key, missing_key, bad_index, bad_step,
            bad_group_field, extra_group_field, missing_group_field, bad_params, adamw_state,
            bad_betas, two_groups]


@pytest.mark.parametrize("corrupt", corrupt_cases(), ids=lambda f: f.__name__)
def test_load_state_dict_rejects_mismatch_and_changes_nothing(corrupt):
    network, _, parameters = table([((4,), "float64"), ((2, 3), "float64")])
    rng = np.random.default_rng(4)
    source = tc.optim.Adam()
    for _ in range(3):
        parameters = source.step(parameters, random_gradients(parameters, rng), 0.05)
    target = tc.optim.Adam(eps=1e-6)
    target.step(parameters, random_gradients(parameters, rng), 0.01)
    before = snapshot(target)
    bad = source.state_dict()
    corrupt(bad)
    with pytest.raises(tc.TensorCodeError):
        target.load_state_dict(bad)
    assert same(snapshot(target), before)


def test_load_before_any_step_needs_the_parameters():
    network, _, parameters = table([((4,), "float64")])
    source = tc.optim.Sgd(momentum=0.9)
    source.step(parameters, gradients_like(parameters, [np.ones(4)]), 0.1)
    with pytest.raises(tc.TensorCodeError, match="pass the parameters"):
        tc.optim.Sgd(momentum=0.9).load_state_dict(source.state_dict())


def test_bad_calls_raise_clear_errors():
    network, _, parameters = table([((4,), "float64")])
    other, _, other_parameters = table([((5,), "float64")])
    grads = gradients_like(parameters, [np.ones(4)])
    sgd = tc.optim.Sgd(momentum=0.9)
    for lr in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lr"):
            sgd.step(parameters, grads, lr)
    with pytest.raises(TypeError):
        sgd.step(parameters, grads, "0.1")
    with pytest.raises(tc.TensorCodeError):
        sgd.step(parameters, gradients_like(other_parameters, [np.ones(5)]), 0.1)
    sgd.step(parameters, grads, 0.1)
    with pytest.raises(tc.TensorCodeError, match="one optimizer per parameter table"):
        sgd.step(other_parameters, gradients_like(other_parameters, [np.ones(5)]), 0.1)
    with pytest.raises(ValueError, match="Nesterov"):
        tc.optim.Sgd(nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        tc.optim.Adam(betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="backend"):
        tc.optim.Adam(backend="gpu")
    tape = tc.Tape()
    tape.parameter(np.arange(3, dtype=np.int64), name="counts")
    ints = tape.into_network().parameters()
    with pytest.raises(tc.DTypeError):
        tc.optim.Sgd().step(ints, gradients_like(ints, [np.zeros(3, np.int64)]), 0.1)


def test_same_shaped_table_from_a_rerecorded_network_is_accepted():
    _, _, a = table([((3,), "float64")])
    _, _, b = table([((3,), "float64")])
    adam = tc.optim.Adam()
    adam.step(a, gradients_like(a, [np.ones(3)]), 0.1)
    result = adam.step(b, gradients_like(b, [np.ones(3)]), 0.1)
    assert result.layout is b.layout
    assert adam.state_dict()["state"][0]["step"] == 2


class SignMomentum(tc.optim.Optimizer):
    """A custom rule: momentum over gradient signs, ``p - lr * m``."""

    kind = "SignMomentum"
    state_keys = ("step", "momentum")

    def __init__(self, beta: float = 0.5) -> None:
        super().__init__()
        self.beta = beta

    def group(self):
        return {"beta": self.beta}

    def _load_group(self, group):
        beta = group["beta"]
        if not isinstance(beta, float) or not 0 <= beta < 1:
            raise tc.TensorCodeError(f"beta must be in [0, 1), got {beta!r}")

        def adopt():
            self.beta = beta
        return adopt

    def update(self, parameters, gradients, lr):
        momentum = self.state_table("momentum")
        moments = [self.beta * m + (1 - self.beta) * np.sign(g)
                   for m, g in zip(momentum.payloads(), gradients.payloads())]
        self.set_state("momentum", moments)
        self.steps += 1
        self.present[:] = 1
        return parameters.step_each(gradients, lambda s, p, g: p - lr * moments[
            parameters.layout.index(s)])


def test_custom_optimizer_has_the_standing_of_the_built_ins():
    network, symbols, start = table([((3,), "float64"), ((2,), "float64")])
    rng = np.random.default_rng(5)
    grads = [random_gradients(start, rng) for _ in range(4)]
    finals = {}
    for label, optimizer in [("sgd", tc.optim.Sgd()), ("adam", tc.optim.Adam()),
                             ("sign", SignMomentum(0.5))]:
        parameters = start
        for g in grads:
            parameters = optimizer.step(parameters, g, 0.1)
        finals[label] = (optimizer, parameters)
    sign, parameters = finals["sign"]
    # by hand: m1 = .5 s1, m2 = .25 s1 + .5 s2, ...; p -= 0.1 m each step
    m = np.zeros(3)
    p = start.of(symbols[0]).copy()
    for g in grads:
        m = 0.5 * m + 0.5 * np.sign(g.payloads()[0])
        p = p - 0.1 * m
    np.testing.assert_allclose(parameters.of(symbols[0]), p, rtol=1e-15)
    state = sign.state_dict()
    assert list(state["state"][0]) == ["step", "momentum"]
    assert state["state"][0]["step"] == 4
    assert state["param_groups"] == [{"lr": 0.1, "beta": 0.5, "params": [0, 1]}]
    again = SignMomentum(0.9)
    again.load_state_dict(state, parameters)
    assert again.beta == 0.5
    np.testing.assert_array_equal(again.state_table("momentum").payloads()[0], m)
    with pytest.raises(tc.TensorCodeError, match="beta"):
        SignMomentum().load_state_dict(
            {"state": {}, "param_groups": [{"lr": 0.1, "beta": 2.0, "params": [0, 1]}]},
            parameters)


@pytest.mark.parametrize("make", [lambda: tc.optim.Sgd(momentum=0.9), tc.optim.Adam],
                         ids=["sgd", "adam"])
def test_recycled_buffers_never_change_a_table_anyone_holds(make):
    network, symbols, parameters = table([((50,), "float32"), ((3, 3), "float64")])
    rng = np.random.default_rng(6)
    optimizer = make()
    held, copies = [], []
    view = None
    for t in range(12):
        parameters = optimizer.step(parameters, random_gradients(parameters, rng), 0.1)
        if t % 3 == 0:  # keep some whole tables
            held.append(parameters)
            copies.append(parameters.clone())
        if t == 4:  # keep only a view of one payload of another
            view, expected_view = parameters.of(symbols[0]), parameters.of(symbols[0]).copy()
    for table_, copy in zip(held, copies):
        assert table_.equals(copy)
    np.testing.assert_array_equal(view, expected_view)
    # the loop's own result matches an optimizer that never recycles (fresh tables)
    fresh_network, _, start = table([((50,), "float32"), ((3, 3), "float64")])
    a, b = start, start
    first, second = make(), make()
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    kept = []
    for _ in range(6):
        a = first.step(a, random_gradients(a, rng_a), 0.1)
        b = second.step(b, random_gradients(b, rng_b), 0.1)
        kept.append(b)
    assert a.equals(b)


def test_deepcopy_is_independent_and_shares_the_layout():
    import copy

    network, _, parameters = table([((4,), "float64")])
    rng = np.random.default_rng(8)
    adam = tc.optim.Adam(amsgrad=True)
    parameters = adam.step(parameters, random_gradients(parameters, rng), 0.1)
    twin = copy.deepcopy(adam)
    assert twin.layout is adam.layout
    grads = random_gradients(parameters, rng)
    a = adam.step(parameters, grads, 0.1)
    b = twin.step(parameters, grads, 0.1)
    assert a.equals(b)
    assert twin.state_table("exp_avg").equals(adam.state_table("exp_avg"))
    twin.step(b, grads, 0.1)
    assert not twin.state_table("exp_avg").equals(adam.state_table("exp_avg"))


def test_a_fresh_built_in_reuses_the_rule_its_configuration_recorded():
    # what-ifs on threads build an optimizer each: the rule is recorded once per
    # configuration, not once per instance
    dtypes = ("float32",)
    plain = tc.optim.Sgd().recorded_rule(dtypes)
    assert tc.optim.Sgd().recorded_rule(dtypes) is plain
    momentum = tc.optim.Sgd(momentum=0.9).recorded_rule(dtypes)
    assert momentum is not plain and momentum.key() != plain.key()
    assert tc.optim.AdamW().recorded_rule(dtypes) is not tc.optim.Adam().recorded_rule(dtypes)

    class Scaled(tc.optim.Sgd):  # reads self.scale, which group() does not hold
        scale = 1.0

        def slot_rule(self, parameter, gradient, state, lr, slot):
            new, states = super().slot_rule(parameter, gradient, state, lr, slot)
            return new * self.scale, states

    halved = Scaled()
    halved.scale = 0.5
    assert Scaled().recorded_rule(dtypes).key() != halved.recorded_rule(dtypes).key()

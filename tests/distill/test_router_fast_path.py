"""The Router's fast path over a compiled program answers exactly as the full path does:
the same answers, the same refusals (kind and field), the same counts and records."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode import algorithm as algorithms
from tensorcode.distill import Router
from tensorcode.distill.inputs import InputError, check_case
from tensorcode.distill.spec import (
    EXAMPLE_INPUTS,
    EXAMPLE_OUTPUTS,
    EXAMPLE_PARAMETERS,
    EXAMPLE_SOURCE,
)


@pytest.fixture(scope="module")
def compiled():
    return algorithms.compile(EXAMPLE_SOURCE, EXAMPLE_INPUTS, EXAMPLE_OUTPUTS,
                              EXAMPLE_PARAMETERS, executor="numba")


def _features(value=None, at=3):
    features = np.zeros(12)
    features[4] = 1.0
    if value is not None:
        features[at] = value
    return features


def _cases():
    strided = np.zeros(24)
    strided[8] = 1.0
    read_only = _features()
    read_only.flags.writeable = False
    huge = _features().tolist()
    huge[0] = 10 ** 30
    overflowing = _features().tolist()
    overflowing[0], overflowing[1] = 1e308, 1e308   # finite, but their sum overflows
    return {
        "array": {"features": _features()},
        "abstains": {"features": np.zeros(12)},
        "read-only array": {"features": read_only},
        "strided array": {"features": strided[::2]},
        "float32 array": {"features": _features().astype(np.float32)},
        "int array": {"features": _features().astype(np.int64)},
        "2-d array": {"features": _features().reshape(3, 4)},
        "NaN array": {"features": _features(np.nan)},
        "infinite array": {"features": _features(np.inf)},
        "inf - inf array": {"features": _features(np.inf) - _features(np.inf, at=5)},
        "list": {"features": _features().tolist()},
        "int list": {"features": [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]},
        "10**30 in a list": {"features": huge},
        "10**400 in a list": {"features": [10 ** 400] + [0] * 11},
        "sum overflows": {"features": overflowing},
        "bool in a list": {"features": [True] + [0] * 11},
        "string in a list": {"features": ["1"] + [0] * 11},
        "short list": {"features": [0, 1]},
        "nested list": {"features": [[0] * 12]},
        "tuple": {"features": tuple(_features().tolist())},
        "extra input": {"features": _features(), "other": 1.0},
        "missing input": {"other": _features()},
        "not a dict": [("features", _features())],
        "None": {"features": None},
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_the_fast_path_answers_and_refuses_as_the_full_path(name, compiled):
    case = _cases()[name]
    fast = Router(compiled, lambda inputs: {"route": 9.0}, ["route"])
    full = Router(compiled, lambda inputs: {"route": 9.0}, ["route"],
                  validate=lambda inputs: check_case(inputs, compiled.inputs))
    assert fast._entry is not fast._answer and full._entry == full._answer
    outcomes = []
    for router in (fast, full):
        try:
            answer = router(case)
            outcomes.append(("answer", {k: (float(v) if k == "route" else v)
                                        for k, v in answer.items()}))
        except InputError as error:
            outcomes.append(("refused", error.kind, error.field))
    assert outcomes[0] == outcomes[1]
    assert fast.paths() == full.paths()
    assert [c.keys() for c in fast.cases()[0]] == [c.keys() for c in full.cases()[0]]


@pytest.mark.parametrize("entry", ["validated_scalars", "validated_call"])
def test_program_failures_escalate_on_the_fast_path(entry, compiled, monkeypatch):
    def broken(feeds):
        raise ZeroDivisionError("boom")

    if entry == "validated_scalars":  # the unrolled path: outputs as a tuple of floats
        names = compiled.validated_scalars()[1]
        monkeypatch.setattr(compiled, "validated_scalars", lambda: (broken, names))
    else:  # the general path: a dict of outputs
        monkeypatch.setattr(compiled, "validated_scalars", lambda: None)
        monkeypatch.setattr(compiled, "_call", broken)
    router = Router(compiled, lambda inputs: {"route": 9.0}, ["route"])
    assert router._entry is not router._answer
    for given in (_features(), _features().tolist()):
        answer = router({"features": given})
        assert answer == {"route": 9.0, "escalated": True, "path": "fallback_error"}
    assert router.reasons() == ["error: ZeroDivisionError: boom"] * 2
    assert router.paths()["fallback_error"] == 2


@pytest.mark.parametrize("name", ["array", "abstains", "list", "int list", "NaN array",
                                  "10**30 in a list", "bool in a list"])
def test_the_general_fast_path_answers_as_the_full_path(name, compiled, monkeypatch):
    monkeypatch.setattr(compiled, "validated_scalars", lambda: None)
    test_the_fast_path_answers_and_refuses_as_the_full_path(name, compiled)


def test_a_distillation_router_takes_the_fast_path(tmp_path):
    from tensorcode.distill import Distillation, tickets

    directory = tmp_path / "tickets"
    tickets.run_example(directory)
    router = Distillation.load(directory).router(lambda inputs: {"route": 9.0},
                                                 max_recorded=5)
    assert router._entry is not router._answer
    assert router({"features": _features()})["path"] == "program"
    assert router.max_recorded == 5

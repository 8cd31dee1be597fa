"""The Router refuses malformed requests before anything runs, checks the fallback's
answers, reads ``covered`` by one rule, and feeds lists onto the compiled path."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode import algorithm as algorithms
from tensorcode.distill import Router
from tensorcode.distill.cases import normalize_case, normalize_contract
from tensorcode.distill.inputs import InputError
from tensorcode.distill.report import judge
from tensorcode.distill.spec import (
    EXAMPLE_INPUTS,
    EXAMPLE_OUTPUTS,
    EXAMPLE_PARAMETERS,
    EXAMPLE_SOURCE,
)
from tensorcode.errors import FeedError, TensorCodeError


def program(inputs):
    x = float(np.asarray(inputs["x"]).reshape(-1)[0])
    return {"y": 2.0 * x, "covered": 1.0 if x >= 0 else 0.0}


def counting_fallback(log):
    def fallback(inputs):
        log.append(inputs)
        return {"y": -1.0}
    return fallback


@pytest.fixture(scope="module")
def compiled():
    return algorithms.compile(EXAMPLE_SOURCE, EXAMPLE_INPUTS, EXAMPLE_OUTPUTS,
                              EXAMPLE_PARAMETERS, executor="numba")


# 11 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("request_", [[1, 2], "x", None, 5])
def test_11_a_non_mapping_is_refused_before_the_fallback_runs(request_):
    ran = []
    router = Router(program, counting_fallback(ran), ["y"])
    with pytest.raises(InputError, match="must be a JSON object"):
        router(request_)
    assert ran == [] and router.calls == 0 and router.refused == 1


# 12 -------------------------------------------------------------------------------------
def test_12_malformed_requests_stay_out_of_cases_and_rate():
    def strict(inputs):
        if set(inputs) != {"x"}:
            raise FeedError("inputs must be exactly ['x']")
        return program(inputs)

    ran = []
    router = Router(strict, counting_fallback(ran), ["y"])
    assert router({"x": 1.0}) == {"y": 2.0, "escalated": False, "path": "program"}
    assert router({"x": -1.0})["escalated"] is True
    with pytest.raises(FeedError):
        router({"x": 1.0, "z": 2.0})  # the program itself refuses it: not an escalation
    assert router.calls == 2 and router.escalations == 1 and router.refused == 1
    assert router.rate() == 0.5 and len(ran) == 1
    cases, targets = router.cases()
    assert cases == [{"x": -1.0}] and targets == [{"y": -1.0}]


# 13, 14 ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value, kind", [
    (np.inf, "not_finite"), (np.nan, "not_finite"), (10 ** 400, "not_finite"),
    ([1.0, np.inf], "not_finite"), ("1", "type"), (["1", 2.0], "type"), (True, "type"),
    (None, "type")])
def test_13_14_every_router_refuses_what_route_and_distill_refuse(value, kind, compiled):
    ran = []
    plain = Router(program, counting_fallback(ran), ["y"])
    with pytest.raises(InputError) as caught:
        plain({"x": value})
    assert caught.value.kind == kind and caught.value.field == "x"
    # a router over a compiled program checks its contract by the same rules
    over = Router(compiled, counting_fallback(ran), ["route"])
    features = [0.0] * 12
    features[3] = value
    with pytest.raises(InputError) as caught:
        over({"features": features})
    assert caught.value.kind in (kind, "shape")
    # distill's workload and saved records: the same rules
    contract = normalize_contract({"x": ()}, "inputs")
    with pytest.raises(FeedError):
        normalize_case({"x": value}, contract, "workload[0]")
    assert ran == [] and plain.refused == 1 and over.refused == 1


def test_13_a_router_over_an_algorithm_checks_names_and_shapes(compiled):
    router = Router(compiled, lambda inputs: {"route": 9.0}, ["route"])
    with pytest.raises(InputError, match="shape"):
        router({"features": [1.0, 0.0]})
    with pytest.raises(InputError, match="missing"):
        router({"other": [0.0] * 12})
    assert router.calls == 0 and router.refused == 2


# 15 -------------------------------------------------------------------------------------
def test_15_lists_and_integer_arrays_are_converted_before_the_compiled_call(compiled,
                                                                              monkeypatch):
    seen = []
    real = compiled._call

    def spy(feeds):
        seen.append({k: (type(v).__name__, getattr(v, "dtype", None)) for k, v in feeds.items()})
        return real(feeds)

    monkeypatch.setattr(compiled, "_call", spy)
    features = np.zeros(12)
    features[5] = 1.0
    expected = compiled({"features": features})
    for given in (features.tolist(), features.astype(np.int64), tuple(features.tolist())):
        seen.clear()
        assert compiled({"features": given}) == expected
        # one compiled call, given float64 arrays: no failed dispatch on the raw value
        assert seen == [{"features": ("ndarray", np.dtype(np.float64))}]
    run, names = compiled.validated_scalars()
    given_to_plan = []

    def scalar_spy(array):
        given_to_plan.append((type(array).__name__, array.dtype))
        return run(array)

    monkeypatch.setattr(compiled, "validated_scalars", lambda: (scalar_spy, names))
    router = Router(compiled, lambda inputs: {"route": 9.0}, ["route"])
    assert router({"features": features.tolist()})["route"] == expected["route"]
    assert given_to_plan == [("ndarray", np.dtype(np.float64))]


# 16 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer, fragment", [
    ({"route": 1.0}, "missing"), ({"y": 1.0, "extra": 2.0}, "unexpected"),
    ({"y": "1"}, "not numeric"), ({"y": np.nan}, "NaN"), (7, "returned int")])
def test_16_fallback_answers_are_checked_against_the_outputs(answer, fragment):
    router = Router(program, lambda inputs: answer, ["y"])
    with pytest.raises(TensorCodeError, match=fragment):
        router({"x": -1.0})
    assert router.calls == 0 and router.cases() == ([], [])


def test_16_a_fallback_answer_of_the_wrong_shape_is_refused(compiled):
    router = Router(compiled, lambda inputs: {"route": [1.0, 2.0]}, ["route"])
    with pytest.raises(TensorCodeError, match="shape"):
        router({"features": [0.0] * 12})  # abstains: the fallback answers
    assert router.calls == 0


@pytest.mark.parametrize("covered, claimed", [(1.0, True), (0.75, True), (0.5, False),
                                              (0.25, False), (0.0, False), (-1.0, False)])
def test_16_covered_claims_above_one_half_everywhere(covered, claimed):
    router = Router(lambda inputs: {"y": 3.0, "covered": covered},
                    lambda inputs: {"y": -1.0}, ["y"])
    assert router({"x": 1.0})["escalated"] is (not claimed)
    verdict = judge({"y": 3.0, "covered": covered}, {"y": np.float64(3.0)}, {"y": ()},
                    1e-6, 1e-6)
    assert verdict.kind == ("agreed" if claimed else "uncovered")

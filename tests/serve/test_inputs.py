"""The one input validator shared by Router, ``tensorcode route`` and the HTTP service,
and the serving package's import boundary."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tensorcode.distill import Router
from tensorcode.distill.inputs import (
    InputError,
    check_batch,
    check_case,
    check_value,
    check_values,
    read_batch,
    read_document,
)
from tensorcode.errors import FeedError

CONTRACT = {"x": (3,), "s": ()}


def test_a_valid_case_becomes_read_only_float64_arrays():
    case = check_case({"x": [1, 2.5, 0], "s": 4}, CONTRACT)
    assert case["x"].dtype == np.float64 and case["x"].tolist() == [1.0, 2.5, 0.0]
    assert case["s"].shape == () and not case["x"].flags.writeable
    assert check_case({"x": np.arange(3), "s": np.float32(1)}, CONTRACT)["s"] == 1.0
    assert check_case({"x": [1, 2, 3], "s": [7]}, CONTRACT)["s"] == 7.0  # size-1 fills ()


@pytest.mark.parametrize("case, kind, field", [
    ({"x": [1, 2, 3]}, "missing", "s"),
    ({"x": [1, 2, 3], "s": 1, "t": 2}, "unexpected", "t"),
    ({"x": ["1", 2, 3], "s": 1}, "type", "x"),
    ({"x": [True, 2, 3], "s": 1}, "type", "x"),
    ({"x": [1, 2, 3], "s": False}, "type", "s"),
    ({"x": [1, 2, None], "s": 1}, "type", "x"),
    ({"x": {"a": 1}, "s": 1}, "type", "x"),
    ({"x": np.array(["a", "b", "c"]), "s": 1}, "type", "x"),
    ({"x": np.array([True, False, True]), "s": 1}, "type", "x"),
    ({"x": [1, 2], "s": 1}, "shape", "x"),
    ({"x": [[1], 2, 3], "s": 1}, "shape", "x"),
    ({"x": [1, 2, float("nan")], "s": 1}, "not_finite", "x"),
    ({"x": [1, 2, 10 ** 400], "s": 1}, "not_finite", "x"),
    ({"x": [1e309, -1e309, 0], "s": 1}, "not_finite", "x"),  # fsum: -inf + inf
    ({"x": [1, 2, 3], "s": [float("-inf")]}, "not_finite", "s"),
    ([1, 2, 3], "not_object", None),
])
def test_refusals_name_the_field(case, kind, field):
    with pytest.raises(InputError) as caught:
        check_case(case, CONTRACT)
    assert caught.value.kind == kind and caught.value.field == field
    assert isinstance(caught.value, FeedError)


@pytest.mark.parametrize("text, fragment", [
    ('{"x": 1, "x": 2}', "duplicate key"),
    ('{"x": NaN}', "NaN is not a JSON number"),
    ('{"x": -Infinity}', "-Infinity is not a JSON number"),
    ("{", "not JSON"),
    (b"\xff", "not UTF-8"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),
])
def test_the_reader_is_strict(text, fragment):
    with pytest.raises(InputError, match=fragment):
        read_document(text, limit=1 << 20)


def test_the_reader_refuses_a_large_document_before_parsing():
    with pytest.raises(InputError) as caught:
        read_document("[" + "0," * 100 + "0]", limit=100)
    assert caught.value.kind == "too_large"


def test_a_batch_is_stacked_and_a_bad_case_is_named():
    cases = [{"x": [i, i, i], "s": i} for i in range(5)]
    stacked = check_batch(cases, CONTRACT, may_hold_booleans=False)
    assert stacked["x"].shape == (5, 3) and stacked["s"].tolist() == [0, 1, 2, 3, 4]
    assert check_batch([], CONTRACT)["x"].shape == (0, 3)
    for bad, field in [(cases + [{"x": [1, 2], "s": 1}], "[5].x"),
                       (cases + [{"x": [1, 2, True], "s": 1}], "[5].x"),
                       (cases[:2] + [{"x": [1, 2, 3]}], "[2].s"),
                       (cases + ["x"], "[5]")]:
        with pytest.raises(InputError) as caught:
            check_batch(bad, CONTRACT)
        assert caught.value.field == field
    with pytest.raises(InputError):
        check_batch({"x": [1, 2, 3], "s": 1}, CONTRACT)


def test_infinities_of_both_signs_are_refused_as_not_finite_on_every_reader():
    """``1e309`` and ``-1e309`` read as the two infinities, whose exact sum does not
    exist: the refusal is ``not_finite``, never the summing routine's own error."""
    body = b'{"x": [1e309, -1e309, 0], "s": 1}'
    for read in (lambda: check_case(read_document(body), CONTRACT),
                 lambda: read_batch(b"[" + body + b"]", CONTRACT),
                 lambda: check_batch([read_document(body)], CONTRACT),
                 lambda: check_values(read_document(body)),
                 lambda: check_value([-1e309, 1e309], (2,), "v")):
        with pytest.raises(InputError) as caught:
            read()
        assert caught.value.kind == "not_finite"


def test_router_validates_before_the_program_and_records_no_refusal():
    seen = []

    def program(inputs):
        seen.append(inputs)
        return {"y": float(inputs["s"]), "covered": 0.0 if inputs["s"] < 0 else 1.0}

    router = Router(program, lambda inputs: {"y": 99.0}, ["y"],
                    validate=lambda inputs: check_case(inputs, CONTRACT))
    assert router({"x": [1, 2, 3], "s": 2}) == {"y": 2.0, "escalated": False,
                                                "path": "program"}
    assert router({"x": [1, 2, 3], "s": -1})["escalated"] is True
    with pytest.raises(InputError):
        router({"x": [1, 2, 3], "s": "2"})
    assert router.calls == 2 and router.escalations == 1 and len(seen) == 2
    assert seen[0]["x"].dtype == np.float64


def test_import_tensorcode_loads_no_serving_dependency():
    code = ("import sys, tensorcode, tensorcode.distill, tensorcode.serve, "
            "tensorcode.serve.escalations; "
            "print(sorted(m for m in ('starlette', 'uvicorn', 'httpx', 'prometheus_client') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip() == "[]"


def test_a_missing_extra_names_the_install_command():
    code = ("import sys; sys.modules['starlette'] = None; sys.modules['starlette.applications']"
            " = None\nfrom tensorcode.serve import create_app\n"
            "try:\n    create_app([])\nexcept Exception as error:\n    print(error)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert "pip install 'tensorcode[serve]'" in out.stdout

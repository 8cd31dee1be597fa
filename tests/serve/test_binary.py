"""Safetensors batch bodies: the same answers as the equivalent JSON batch (claimed and
escalated cases, the fallback, the escalation log), and each bad body refused with its
documented status, ``kind`` and field, in the one error body."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save
from starlette.testclient import TestClient

from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.distill import CaseSet, Distillation
from tensorcode.distill.inputs import InputError
from tensorcode.distill.program import compile_program
from tensorcode.serve import create_app
from tensorcode.serve.binary import MEDIA_TYPE, is_safetensors, read_safetensors_batch
from tensorcode.serve.escalations import read_escalations

SOURCE = """\
def score(features, scale):
    covered = where(features.sum() > 0.0, 1.0, 0.0)
    return {"scores": features.slice(0, 2) * scale, "covered": covered}
"""
INPUTS = {"features": (3,), "scale": ()}
OUTPUTS = {"scores": (2,)}
BINARY = {"Content-Type": MEDIA_TYPE}
MAX_BATCH = 50


@pytest.fixture(scope="module")
def scorer() -> Distillation:
    """Two inputs (a vector and a scalar), an array output, abstains on all-zero features."""
    program, abstains = compile_program(SOURCE, None, INPUTS, OUTPUTS, DEFAULT_BACKEND)
    case = {"features": np.array([1.0, 2.0, 3.0]), "scale": np.array(2.0)}
    target = {"scores": np.array([2.0, 4.0])}
    cases = CaseSet([0], [case], [target])
    return Distillation(task="score", inputs=INPUTS, outputs=OUTPUTS, program=program,
                        source=SOURCE, report={"design": {}, "acceptance": {}}, attempts=[],
                        design=cases, acceptance=cases, settings={}, abstains=abstains)


def _cases(count: int = 12) -> dict[str, np.ndarray]:
    """``count`` cases, every third one all zeros (the program abstains on those)."""
    rng = np.random.default_rng(7)
    features = rng.uniform(0.1, 2.0, size=(count, 3))
    features[::3] = 0.0
    return {"features": features, "scale": rng.normal(size=count)}


def _json(cases: dict[str, np.ndarray]) -> bytes:
    """The same cases as a JSON batch (``repr`` of a float64 reads back to it exactly)."""
    count = len(cases["features"])
    return json.dumps([{name: cases[name][i].tolist() for name in cases}
                       for i in range(count)]).encode()


def test_a_safetensors_body_answers_what_the_json_body_answers(scorer):
    cases = _cases()
    with TestClient(create_app({"scores": scorer})) as client:
        from_json = client.post("/v1/routers/scores/batch", content=_json(cases))
        binary = client.post("/v1/routers/scores/batch", content=save(cases), headers=BINARY)
        float32 = client.post("/v1/routers/scores/batch", headers=BINARY, content=save(
            {name: value.astype(np.float32) for name, value in cases.items()}))
        as_float32 = client.post("/v1/routers/scores/batch", content=_json(
            {name: value.astype(np.float32).astype(np.float64)
             for name, value in cases.items()}))
    assert from_json.status_code == binary.status_code == 200
    assert binary.content == from_json.content
    answers = binary.json()
    assert [a["escalated"] for a in answers] == [i % 3 == 0 for i in range(12)]
    assert answers[1]["scores"] == (cases["features"][1, :2] * cases["scale"][1]).tolist()
    # float32 tensors are read as the float64 numbers they hold
    assert float32.status_code == 200 and float32.content == as_float32.content


def test_escalated_cases_reach_the_fallback_and_the_log_as_from_json(scorer, tmp_path):
    cases = _cases()
    seen = []

    def teacher(router, inputs):
        seen.append({name: value.tolist() for name, value in inputs.items()})
        return {"scores": [inputs["scale"] * 10.0, -1.0]}

    answers = {}
    for kind, body, headers in [("json", _json(cases), {}),
                                ("binary", save(cases), BINARY)]:
        log = tmp_path / f"{kind}.jsonl"
        app = create_app({"scores": scorer}, fallback=teacher, escalation_log=log)
        with TestClient(app) as client:
            response = client.post("/v1/routers/scores/batch", content=body, headers=headers)
        assert response.status_code == 200
        answers[kind] = response.content
        records = read_escalations([log]).records
        assert _sorted([r["inputs"] for r in records]) == _sorted(seen[-4:])
        assert [r["answered_by"] for r in records] == ["fallback"] * 4
    assert answers["binary"] == answers["json"]
    assert len(seen) == 8 and _sorted(seen[:4]) == _sorted(seen[4:])
    escalated = [a for a in json.loads(answers["binary"]) if a["escalated"]]
    assert [a["path"] for a in escalated] == ["fallback_abstained"] * 4
    assert escalated[0]["scores"] == [cases["scale"][0] * 10.0, -1.0]


def _sorted(documents: list) -> list[str]:
    """The documents in an order that does not depend on which thread ran first."""
    return sorted(json.dumps(d, sort_keys=True) for d in documents)


def test_zero_cases_and_header_metadata(scorer):
    with TestClient(create_app({"scores": scorer})) as client:
        empty = client.post("/v1/routers/scores/batch", headers=BINARY, content=save(
            {"features": np.zeros((0, 3)), "scale": np.zeros(0)}))
        tagged = client.post("/v1/routers/scores/batch", headers=BINARY, content=save(
            _cases(3), metadata={"client": "a test"}))
    assert (empty.status_code, empty.json()) == (200, [])
    assert tagged.status_code == 200 and len(tagged.json()) == 3


@pytest.mark.parametrize("content_type", [MEDIA_TYPE, "Application/VND.Safetensors",
                                          f"{MEDIA_TYPE}; charset=binary"])
def test_the_media_type_is_matched_without_case_or_parameters(content_type):
    assert is_safetensors(content_type.encode())


@pytest.mark.parametrize("content_type", ["application/json", "application/octet-stream",
                                          "application/vnd.safetensors2", ""])
def test_other_media_types_are_not_safetensors(content_type):
    assert not is_safetensors(content_type.encode())


def _header_body(header: bytes, data: bytes) -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def _repeated_name() -> bytes:
    """A header naming ``features`` twice; the safetensors library keeps the last."""
    features = '{"dtype":"F64","shape":[2,3],"data_offsets":[0,48]}'
    header = (f'{{"features":{features},"features":{features},'
              f'"scale":{{"dtype":"F64","shape":[2],"data_offsets":[48,64]}}}}').encode()
    return _header_body(header, bytes(64))


GOOD = save(_cases(4))
BAD_BODIES = {
    "empty": (b"", 400, "safetensors", None),
    "json text": (_json(_cases(2)), 400, "safetensors", None),
    "cut short": (GOOD[:-5], 400, "safetensors", None),
    "cut in the header": (GOOD[:20], 400, "safetensors", None),
    "trailing bytes": (GOOD + b"\0" * 8, 400, "safetensors", None),
    "a huge header length": (struct.pack("<Q", 1 << 62) + b"{}", 400, "safetensors", None),
    "a repeated name": (_repeated_name(), 400, "safetensors", None),
    "a missing input": (save({"features": np.ones((4, 3))}), 422, "missing", "scale"),
    "an unexpected input": (save({**_cases(4), "other": np.ones(4)}), 422, "unexpected",
                            "other"),
    "integers": (save({"features": np.ones((4, 3), dtype=np.int64), "scale": np.ones(4)}),
                 422, "type", "features"),
    "float16": (save({"features": np.ones((4, 3)), "scale": np.ones(4, dtype=np.float16)}),
                422, "type", "scale"),
    "a wrong case shape": (save({"features": np.ones((4, 2)), "scale": np.ones(4)}), 422,
                           "shape", "features"),
    "no case axis": (save({"features": np.ones(3), "scale": np.ones(())}), 422, "shape",
                     "features"),
    "a scalar with an axis too many": (save({"features": np.ones((4, 3)),
                                             "scale": np.ones((4, 1))}), 422, "shape",
                                       "scale"),
    "different case counts": (save({"features": np.ones((4, 3)), "scale": np.ones(5)}), 422,
                              "shape", "scale"),
    "too many cases": (save({"features": np.ones((MAX_BATCH + 1, 3)),
                             "scale": np.ones(MAX_BATCH + 1)}), 413, "too_many", None),
    "too many bytes": (save({"features": np.ones((4, 3000)), "scale": np.ones(4)}), 413,
                       "too_large", None),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_each_bad_body_gets_its_documented_error(scorer, name):
    body, status, kind, field = BAD_BODIES[name]
    app = create_app({"scores": scorer}, max_batch=MAX_BATCH, max_body_bytes=64 << 10)
    with TestClient(app) as client:
        response = client.post("/v1/routers/scores/batch", content=body, headers=BINARY)
        assert response.status_code == status
        document = response.json()
        assert document["path"] == "refused"
        assert (document["error"]["kind"], document["error"]["field"]) == (kind, field)
        assert document["error"]["message"]
        counted = [line for line in client.get("/metrics").text.splitlines()
                   if line.startswith("tensorcode_router_errors_total{")
                   and f'kind="{kind}"' in line]
        assert counted and counted[0].endswith(" 1.0")
        assert client.get("/healthz").status_code == 200


def test_refusals_shared_with_json_have_the_json_batchs_body(scorer):
    """Where a rule is the JSON batch's, so is the error body: a non-finite number (the
    first case holding one, as ``[i].name``), too many cases, too many bytes (whose
    message gives the body's own size)."""
    cases = _cases(8)
    cases["features"][5, 1] = np.inf
    cases["scale"][6] = -np.inf
    as_json = _json(cases).replace(b"Infinity", b"1e400")  # JSON's way to write inf
    many = _cases(MAX_BATCH + 1)
    big = {"features": np.ones((4000, 3)), "scale": np.ones(4000)}
    app = create_app({"scores": scorer}, max_batch=MAX_BATCH, max_body_bytes=64 << 10)
    refusals = []
    with TestClient(app) as client:
        for binary, text in [(save(cases), as_json), (save(many), _json(many)),
                             (save(big), _json(big))]:
            refused = client.post("/v1/routers/scores/batch", content=binary, headers=BINARY)
            from_json = client.post("/v1/routers/scores/batch", content=text)
            refusals.append((refused.status_code, refused.json(), from_json.status_code,
                             from_json.json()))
    (status, finite, json_status, json_finite), (_, many_cases, _, json_many) = refusals[:2]
    assert (status, finite) == (json_status, json_finite) == (422, finite)
    assert finite["error"]["field"] == "[5].features"
    assert many_cases == json_many and many_cases["error"]["kind"] == "too_many"
    status, large, json_status, json_large = refusals[2]
    assert status == json_status == 413
    assert large["error"]["kind"] == json_large["error"]["kind"] == "too_large"
    assert str(len(save(big))) in large["error"]["message"]


def test_a_non_finite_number_names_the_first_case_holding_one(scorer):
    cases = _cases(8)
    cases["scale"][6] = -np.inf
    cases["features"][4, 2] = np.nan
    with pytest.raises(InputError) as caught:
        read_safetensors_batch(save(cases), INPUTS, 1 << 20)
    assert (caught.value.kind, caught.value.field) == ("not_finite", "[4].features")
    as_float32 = {name: value.astype(np.float32) for name, value in _cases(4).items()}
    as_float32["features"][3, 0] = np.float32(np.inf)
    with pytest.raises(InputError) as caught:
        read_safetensors_batch(save(as_float32), INPUTS, 1 << 20)
    assert (caught.value.kind, caught.value.field) == ("not_finite", "[3].features")


def test_the_arrays_are_float64_of_the_contracts_shapes():
    cases = _cases(5)
    read = read_safetensors_batch(save(cases), INPUTS, 1 << 20, max_cases=5)
    assert set(read) == set(INPUTS)
    for name, value in read.items():
        assert value.dtype == np.float64 and value.flags.c_contiguous
        assert value.shape == (5, *INPUTS[name])
        assert np.array_equal(value, cases[name])


def test_a_safetensors_body_without_its_media_type_is_read_as_json(scorer):
    with TestClient(create_app({"scores": scorer})) as client:
        response = client.post("/v1/routers/scores/batch", content=GOOD)
    assert response.status_code == 400 and response.json()["error"]["kind"] == "json"


KINDS = {"safetensors", "missing", "unexpected", "type", "shape", "too_many", "too_large",
         "not_finite"}


def _outcome(body: bytes) -> str:
    """What the reader makes of ``body``: valid arrays of the contract, or a refusal of
    a documented kind (anything else fails the test)."""
    try:
        read = read_safetensors_batch(body, INPUTS, 1 << 20, max_cases=MAX_BATCH)
    except InputError as error:
        assert error.kind in KINDS, (error.kind, str(error))
        return error.kind
    count = len(read["features"])
    for name, shape in INPUTS.items():
        value = read[name]
        assert value.dtype == np.float64 and value.shape == (count, *shape)
        assert np.isfinite(value).all()
    return "read"


def test_every_cut_of_a_body_is_refused_as_not_safetensors():
    body = save(_cases(3))
    assert _outcome(body) == "read"
    for length in range(len(body)):
        assert _outcome(body[:length]) == "safetensors"


def test_fuzzed_bodies_are_read_or_refused_with_a_documented_kind():
    """Random byte changes, in the header (where names, dtypes, shapes and offsets
    are) and anywhere: every outcome is valid arrays or a documented refusal."""
    rng = np.random.default_rng(11)
    body = save(_cases(3))
    header_end = 8 + struct.unpack_from("<Q", body)[0]
    outcomes = set()
    for trial in range(600):
        mutated = bytearray(body)
        end = header_end if trial % 2 else len(body)
        for _ in range(int(rng.integers(1, 4))):
            mutated[int(rng.integers(0, end))] = int(rng.integers(0, 256))
        outcomes.add(_outcome(bytes(mutated)))
    assert {"read", "safetensors"} <= outcomes

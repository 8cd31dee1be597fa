"""The single-request fast path answers exactly what the general path answers, takes no
body the general path would refuse or escalate, and the app around it (bare ASGI before
Starlette's routing, counts folded into the Prometheus series) behaves as Starlette's
routes did: mounted, on wrong methods, on an internal fault."""

from __future__ import annotations

import json
import math
import random

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from tensorcode.distill.inputs import InputError, read_document
from tensorcode.serve import create_app
from tensorcode.serve.answers import dumps
from tensorcode.serve.served import answer_document, load_router

from .test_fast_reader import _mutations

BILLING = [0, 0, 0, 1] + [0] * 8


@pytest.fixture(scope="module")
def served(ticket_dir):
    return load_router("tickets", ticket_dir)


def _general(served, body):
    """The general path's outcome: the answer's bytes, ``escalated`` or the refusal."""
    try:
        case = served.check(read_document(body))
    except InputError as error:
        return ("refused", error.kind)
    decision, reason = served.answer(case)
    return ("escalated", reason) if decision is None else dumps(answer_document(decision))


def _agrees(served, body) -> bool:
    fast = served.single_answer.answer(body)
    if fast is None:
        return False
    assert fast == _general(served, body), body
    return True


def test_the_fast_path_is_built_for_the_ticket_router(served):
    assert served.single_answer is not None
    body = json.dumps({"features": BILLING}).encode()
    assert _agrees(served, body)
    assert json.loads(served.single_answer.answer(body)) == {
        "route": 1.0, "escalated": False, "reason": None, "path": "program"}


LEFT_TO_THE_GENERAL_PATH = [
    b'{"features": [0,0,0,1,0,0,0,0,0,0,0,0], "features": [0,0,0,1,0,0,0,0,0,0,0,0]}',
    b'{"feat\\u0075res": [0,0,0,1,0,0,0,0,0,0,0,0]}', b'{"\\ud800": [0,0,0,1,0,0,0,0,0,0,0,0]}',
    b'{"features": [0,0,0,1,0,0,0,0,0,0,0,0], "\\ud800": 1}',
    b'{"features": [0,0,0,1' + b"0" * 400 + b',0,0,0,0,0,0,0,0]}',  # past float64
    b'{"features": [0,0,0,1e400,0,0,0,0,0,0,0,0]}', b'{"features": [0,0,0,NaN,0,0,0,0,0,0,0,0]}',
    b'{"features": [0,0,0,true,0,0,0,0,0,0,0,0]}', b'{"features": [0,0,0,null,0,0,0,0,0,0,0,0]}',
    b'{"features": [0,0,0,"1",0,0,0,0,0,0,0,0]}', b'{"features": [0,0,0,1,0,0,0,0,0,0,0]}',
    b'{"features": [[0,0,0,1,0,0,0,0,0,0,0,0]]}', b'{"features": ' + b"[" * 70 + b"]" * 70 + b"}",
    b'{"features": [0,0,0,1,0,0,0,0,0,0,0,0]', b'{"features": [0,0,0,1', b"", b"[]",
    b'{"features": [0,0,0,1,0,0,0,0,0,0,0,0]} x',
    b'{"features": [0,0,0,1,0,0,0,0,0,0,0,0], "x": 1}',
    b'{}', b'{"features": [0]}', b'{"features": [0,0,0,0,0,0,0,0,0,0,0,0]}',  # abstains
    b'\xef\xbb\xbf{"features": [0,0,0,1,0,0,0,0,0,0,0,0]}',
    b'{"feature\xa0s": [0,0,0,1,0,0,0,0,0,0,0,0]}',                  # not UTF-8
    b'{"features\xed\xa0\x80": [0,0,0,1,0,0,0,0,0,0,0,0]}',       # a raw surrogate
    b'{"features": [0,0,0,1,0,0,0,0,0,0,0,0], "features\xed\xa0\x80": 1}',
]


@pytest.mark.parametrize("body", LEFT_TO_THE_GENERAL_PATH)
def test_the_fast_path_leaves_to_the_general_path_what_it_must(served, body):
    """Refusals, escalations and what it cannot prove (an escaped key, a BOM): the
    general path reads these, and refuses, escalates or answers them itself."""
    assert served.single_answer.answer(body) is None


def test_through_the_app_each_of_those_is_answered_by_the_general_path(ticket_dir, served):
    """Over HTTP the bodies above get the general path's outcome: its refusal (status
    and kind), its escalation, or its answer."""
    status = {"json": 400, "not_object": 400, "too_large": 413, "too_many": 413}
    with TestClient(create_app({"tickets": ticket_dir})) as client:
        for body in LEFT_TO_THE_GENERAL_PATH:
            response = client.post("/v1/routers/tickets", content=body)
            expected = _general(served, body)
            if isinstance(expected, bytes):
                assert response.status_code == 200 and response.content == expected, body
            elif expected[0] == "escalated":
                assert response.status_code == 200, body
                assert response.json()["escalated"] is True, body
                assert response.json()["reason"] == expected[1], body
            else:
                assert response.status_code == status.get(expected[1], 422), body
                assert response.json()["error"]["kind"] == expected[1], body


def test_numbers_decode_as_the_strict_reader_reads_them(served):
    """Integers past int64 (``10**30`` written out) and decimals are the float64 Python
    reads, so the fast path answers them exactly as the general path does."""
    import msgspec

    from tensorcode.serve.hot import contract_struct

    decoder = msgspec.json.Decoder(contract_struct({"v": (6,)}, "Probe"))
    rng = random.Random(61)
    for _ in range(300):
        texts = [str(rng.randint(-10 ** 40, 10 ** 40)), str(2 ** 53 + 1), "1" + "0" * 30,
                 repr(rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300)),
                 f"{rng.randint(0, 10 ** 20)}e{rng.randint(-320, 300)}",
                 f"-{rng.randint(0, 999)}.{rng.randint(0, 10 ** 25)}"]
        body = ('{"v": [' + ", ".join(texts) + "]}").encode()
        strict = [float(value) for value in read_document(body)["v"]]
        if all(map(math.isfinite, strict)):
            assert decoder.decode(body).f0 == strict, body
        else:  # past float64: refused (not_finite) by the general path, never taken
            with pytest.raises(msgspec.ValidationError):
                decoder.decode(body)
    body = b'{"features": [0,0,0,1' + b"0" * 30 + b',0,0,0,0,0,0,0,0]}'  # 10**30
    assert _agrees(served, body)


def test_fuzzed_bodies_are_taken_only_where_the_general_path_agrees(served):
    rng = random.Random(53)
    seeds = [json.dumps({"features": [rng.choice([0, 1, 0.5, -1, 2e-3, 1e5]) for _ in range(12)]},
                        separators=rng.choice([(",", ":"), (", ", ": ")])).encode()
             for _ in range(10)]
    outcomes = {"taken": 0, "left": 0}
    for body in _mutations(seed=59, count=2000, seeds=seeds):
        outcomes["taken" if _agrees(served, body) else "left"] += 1
    for seed in seeds:
        _agrees(served, seed)
    print(f"fuzzed single bodies: {outcomes}")
    assert outcomes["taken"] > 50 and outcomes["left"] > 500


def _sample(client, key: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.rpartition(" ")[0] == key:
            return float(line.rpartition(" ")[2])
    return 0.0


def test_counts_are_folded_into_the_series_before_every_scrape(ticket_dir):
    with TestClient(create_app({"tickets": ticket_dir})) as client:
        for _ in range(5):
            assert client.post("/v1/routers/tickets", json={"features": BILLING}).json()[
                "path"] == "program"
        client.post("/v1/routers/tickets", json={"features": [0] * 12})  # escalates
        client.post("/v1/routers/tickets/batch", json=[{"features": BILLING}] * 3)
        label = 'router="tickets"'
        assert _sample(client, f"tensorcode_router_calls_total{{{label}}}") == 9
        assert _sample(client, f'tensorcode_router_paths_total{{path="program",{label}}}') == 8
        assert _sample(client, f'tensorcode_router_requests_total{{endpoint="single",'
                               f'{label}}}') == 6
        assert _sample(client, f'tensorcode_router_latency_seconds_count{{endpoint="single",'
                               f'{label}}}') == 6
        assert _sample(client, f'tensorcode_router_latency_seconds_bucket{{endpoint="single",'
                               f'le="+Inf",{label}}}') == 6
        assert _sample(client, f'tensorcode_router_latency_seconds_count{{endpoint="batch",'
                               f'{label}}}') == 1
        client.post("/v1/routers/tickets", json={"features": BILLING})
        assert _sample(client, f"tensorcode_router_calls_total{{{label}}}") == 10


def test_mounted_wrong_method_and_unknown_paths_are_starlettes(ticket_dir):
    routing = create_app({"tickets": ticket_dir})
    with TestClient(Starlette(routes=[Mount("/routing", app=routing)])) as client:
        answer = client.post("/routing/v1/routers/tickets", json={"features": BILLING})
        assert answer.json()["route"] == 1.0
        batch = client.post("/routing/v1/routers/tickets/batch", json=[{"features": BILLING}])
        assert batch.json()[0]["route"] == 1.0
        routing.state.service.close()
    with TestClient(routing) as client:
        wrong = client.get("/v1/routers/tickets")
        assert wrong.status_code == 405 and wrong.json()["error"]["kind"] == "http"
        deeper = client.post("/v1/routers/tickets/batch/more", json={})
        assert deeper.status_code == 404 and deeper.json()["error"]["kind"] == "http"
        unknown = client.post("/v1/routers/nothing/batch", json=[])
        assert unknown.status_code == 404 and unknown.json()["error"]["kind"] == "unknown_router"


def test_a_fault_on_the_fast_path_is_a_logged_500_with_the_error_body(ticket_dir, caplog):
    app = create_app({"tickets": ticket_dir})
    service = app.state.service

    def broken(name):
        raise RuntimeError("a fault")
    service.routers.get = broken
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/v1/routers/tickets", json={"features": BILLING})
        assert response.status_code == 500
        assert response.json()["error"]["kind"] == "internal"
        assert "RuntimeError" in response.json()["error"]["message"]
        assert _sample(client, 'tensorcode_router_errors_total{kind="internal",'
                               'router="(unknown)"}') == 1
    assert "unhandled error serving /v1/routers/tickets" in caplog.text


def test_a_batch_without_teacher_or_log_escalates_as_case_by_case(ticket_dir, tmp_path):
    """Without a teacher or a log a batch's escalations are rendered once per reason; the
    answers and the counts are those of the case-by-case path (taken with a log)."""
    cases = [{"features": [0] * 12}, {"features": BILLING}, {"features": [0] * 12},
             {"features": [0] * 11 + [1]}]
    answers, counts = [], []
    for log in (None, tmp_path / "escalations.jsonl"):
        with TestClient(create_app({"tickets": ticket_dir}, escalation_log=log)) as client:
            response = client.post("/v1/routers/tickets/batch", json=cases)
            assert response.status_code == 200
            answers.append(response.content)
            counts.append([_sample(client, key) for key in (
                'tensorcode_router_escalations_total{reason="abstained",router="tickets"}',
                'tensorcode_router_paths_total{path="fallback_abstained",router="tickets"}',
                'tensorcode_router_paths_total{path="program",router="tickets"}',
                'tensorcode_router_calls_total{router="tickets"}')])
    assert answers[0] == answers[1]
    assert counts[0] == counts[1]
    documents = json.loads(answers[0])
    assert documents[0] == {"route": None, "escalated": True, "reason": "abstained",
                            "path": "fallback_abstained", "answered_by": None,
                            "fallback_error": "no fallback is configured"}
    assert counts[0][0] >= 2 and documents[1]["path"] == "program"

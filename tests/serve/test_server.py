"""A real server on the loopback interface: answers, load, metrics and bad input."""

from __future__ import annotations

import itertools
import json
import threading
import time

import numpy as np
import pytest

from tensorcode.distill import Distillation

from .conftest import Server

CLIENTS = 8
REQUESTS_PER_CLIENT = 2_000
#: every 0/1 keyword vector the ticket router can see
ALL_FEATURES = [list(map(float, bits)) for bits in itertools.product((0, 1), repeat=12)]


@pytest.fixture(scope="module")
def expected(ticket_dir) -> list[tuple[float | None, bool]]:
    """The in-process Router's (route, escalated) for every vector."""
    router = Distillation.load(ticket_dir).router(lambda inputs: {"route": -1.0})
    answers = []
    for features in ALL_FEATURES:
        answer = router({"features": np.array(features)})
        # the service without a fallback answers an escalation with a null route
        answers.append((None if answer["escalated"] else answer["route"],
                        answer["escalated"]))
    return answers


def _answer(document: dict) -> tuple[float | None, bool]:
    return document["route"], document["escalated"]


def test_answers_equal_the_in_process_router(server: Server, expected):
    picks = range(0, len(ALL_FEATURES), 7)
    for i in picks:
        status, document = server.request("POST", "/v1/routers/tickets",
                                          {"features": ALL_FEATURES[i]})
        assert status == 200
        assert _answer(document) == expected[i]
        assert document["reason"] == (None if not expected[i][1] else "abstained")
    status, answers = server.request("POST", "/v1/routers/tickets/batch",
                                     [{"features": f} for f in ALL_FEATURES])
    assert status == 200 and len(answers) == len(ALL_FEATURES)
    assert [_answer(a) for a in answers] == expected


def test_eight_clients_lose_and_corrupt_nothing(server: Server, expected):
    before = server.metrics()
    log_before = _lines(server.escalation_log)
    problems: list = []
    answered = [0] * CLIENTS
    barrier = threading.Barrier(CLIENTS)

    def client(t: int) -> None:
        connection = server.connection()
        try:
            barrier.wait(timeout=60)
            for k in range(REQUESTS_PER_CLIENT):
                i = (t * REQUESTS_PER_CLIENT + k * 13) % len(ALL_FEATURES)
                body = json.dumps({"features": ALL_FEATURES[i]})
                connection.request("POST", "/v1/routers/tickets", body=body,
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                document = json.loads(response.read())
                if response.status != 200 or _answer(document) != expected[i]:
                    problems.append((t, k, response.status, document))
                answered[t] += 1
        except Exception as error:  # reported below
            problems.append(error)
        finally:
            connection.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(t,)) for t in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    elapsed = time.perf_counter() - start
    assert not any(thread.is_alive() for thread in threads)
    assert problems == []
    total = CLIENTS * REQUESTS_PER_CLIENT
    assert sum(answered) == total
    sent = [(t * REQUESTS_PER_CLIENT + k * 13) % len(ALL_FEATURES)
            for t in range(CLIENTS) for k in range(REQUESTS_PER_CLIENT)]
    escalated = sum(expected[i][1] for i in sent)
    after = server.metrics()
    assert _delta(before, after, 'tensorcode_router_calls_total{router="tickets"}') == total
    assert _delta(before, after, 'tensorcode_router_requests_total{endpoint="single",'
                                 'router="tickets"}') == total
    assert _delta(before, after, 'tensorcode_router_escalations_total{reason="abstained",'
                                 'router="tickets"}') == escalated
    assert _delta(before, after, 'tensorcode_router_latency_seconds_count{endpoint="single",'
                                 'router="tickets"}') == total
    assert _lines(server.escalation_log) - log_before == escalated
    print(f"{total} requests from {CLIENTS} clients in {elapsed:.1f} s")


def test_metrics_count_what_was_sent(server: Server, expected):
    claimed = next(i for i, (_, escalated) in enumerate(expected) if not escalated)
    abstained = next(i for i, (_, escalated) in enumerate(expected) if escalated)
    before = server.metrics()
    for _ in range(5):
        server.request("POST", "/v1/routers/tickets", {"features": ALL_FEATURES[claimed]})
    for _ in range(3):
        server.request("POST", "/v1/routers/tickets", {"features": ALL_FEATURES[abstained]})
    server.request("POST", "/v1/routers/tickets/batch",
                   [{"features": ALL_FEATURES[claimed]}] * 10
                   + [{"features": ALL_FEATURES[abstained]}] * 4)
    server.request("POST", "/v1/routers/tickets", {"features": [1, 2]})
    server.request("POST", "/v1/routers/tickets", raw=b"{")
    server.request("POST", "/v1/routers/nobody", {"features": ALL_FEATURES[0]})
    after = server.metrics()
    key = 'tensorcode_router_{}{{{}router="tickets"}}'.format
    assert _delta(before, after, key("calls_total", "")) == 5 + 3 + 14
    assert _delta(before, after, key("requests_total", 'endpoint="single",')) == 8
    assert _delta(before, after, key("requests_total", 'endpoint="batch",')) == 1
    assert _delta(before, after, key("escalations_total", 'reason="abstained",')) == 3 + 4
    assert _delta(before, after, key("errors_total", 'kind="shape",')) == 1
    assert _delta(before, after, key("errors_total", 'kind="json",')) == 1
    assert _delta(before, after, 'tensorcode_router_errors_total{kind="unknown_router",'
                                 'router="(unknown)"}') == 1


@pytest.mark.parametrize("raw, status, kind, field", [
    (b'{"features": [1, 0]}', 422, "shape", "features"),
    (b'{"features": "0,1,0"}', 422, "type", "features"),
    (b'{"features": ["1",0,0,0,0,0,0,0,0,0,0,0]}', 422, "type", "features"),
    (b'{"features": [true,0,0,0,0,0,0,0,0,0,0,0]}', 422, "type", "features"),
    (b'{"features": [null,0,0,0,0,0,0,0,0,0,0,0]}', 422, "type", "features"),
    (b'{"features": [[0],0,0,0,0,0,0,0,0,0,0,0]}', 422, "shape", "features"),
    (b'{"features": [1e999,0,0,0,0,0,0,0,0,0,0,0]}', 422, "not_finite", "features"),
    (b'{"features": [NaN,0,0,0,0,0,0,0,0,0,0,0]}', 400, "json", None),
    (b'{"features": [Infinity,0,0,0,0,0,0,0,0,0,0,0]}', 400, "json", None),
    (b'{"features": [0,0,0,0,0,0,0,0,0,0,0,0], "features": [1,0,0,0,0,0,0,0,0,0,0,0]}',
     400, "json", None),
    (b'{}', 422, "missing", "features"),
    (b'{"features": [0,0,0,0,0,0,0,0,0,0,0,0], "extra": 1}', 422, "unexpected", "extra"),
    (b'[{"features": [0,0,0,0,0,0,0,0,0,0,0,0]}]', 400, "not_object", None),
    (b'"features"', 400, "not_object", None),
    (b'not json', 400, "json", None),
    (b'\xff\xfe', 400, "json", None),
    (b'{"features": [' + b'0,' * 250_000 + b'0]}', 413, "too_large", None),
])
def test_bad_input_is_a_4xx_naming_the_field(server: Server, raw, status, kind, field):
    before = server.metrics()
    got, document = server.request("POST", "/v1/routers/tickets", raw=raw)
    assert got == status
    assert document["error"]["kind"] == kind and document["error"]["field"] == field
    assert "Traceback" not in document["error"]["message"]
    after = server.metrics()
    escalations = 'tensorcode_router_escalations_total{reason="abstained",router="tickets"}'
    assert after.get(escalations) == before.get(escalations)  # a refusal is no escalation
    assert server.request("GET", "/healthz") == (200, {"status": "ok"})


def test_a_bad_case_in_a_batch_names_its_index(server: Server):
    cases = [{"features": ALL_FEATURES[5]}] * 3 + [{"features": ALL_FEATURES[5][:4]}]
    status, document = server.request("POST", "/v1/routers/tickets/batch", cases)
    assert status == 422 and document["error"]["field"] == "[3].features"
    status, document = server.request("POST", "/v1/routers/tickets/batch",
                                      {"features": ALL_FEATURES[5]})
    assert status == 400 and document["error"]["kind"] == "not_object"


def test_a_safetensors_batch_over_http_answers_as_json_does(server: Server, expected):
    """Through uvicorn: the binary body's answers equal the JSON batch's, each escalated
    case is logged as from JSON, and a body cut short is a 400 in the error body."""
    from safetensors.numpy import save

    binary = {"Content-Type": "application/vnd.safetensors"}
    picks = list(range(0, len(ALL_FEATURES), 5))
    body = save({"features": np.array([ALL_FEATURES[i] for i in picks])})
    log_before = _lines(server.escalation_log)
    status, answers = server.request("POST", "/v1/routers/tickets/batch", raw=body,
                                     headers=binary)
    assert status == 200 and [_answer(a) for a in answers] == [expected[i] for i in picks]
    escalated = sum(expected[i][1] for i in picks)
    assert escalated and _lines(server.escalation_log) - log_before == escalated
    status, from_json = server.request("POST", "/v1/routers/tickets/batch",
                                       [{"features": ALL_FEATURES[i]} for i in picks])
    assert (status, from_json) == (200, answers)
    status, document = server.request("POST", "/v1/routers/tickets/batch", raw=body[:-1],
                                      headers=binary)
    assert status == 400 and document["error"]["kind"] == "safetensors"


def test_the_listing_and_probes(server: Server, ticket_dir):
    status, document = server.request("GET", "/v1/routers")
    assert status == 200
    (described,) = document["routers"]
    assert described["name"] == "tickets"
    assert described["inputs"] == {"features": [12]} and described["outputs"] == {"route": []}
    recorded = json.loads((ticket_dir / "distillation.json").read_text())
    assert described["artifact_sha256"] == recorded["artifact_sha256"]
    assert described["report"]["acceptance"] == recorded["report"]["acceptance"]
    assert server.request("GET", "/readyz") == (200, {"status": "ready", "routers": ["tickets"]})
    status, document = server.request("GET", "/nowhere")
    assert status == 404 and document["error"]["kind"] == "http"


def test_reload_needs_the_token(server: Server):
    status, document = server.request("POST", "/admin/reload")
    assert status == 401 and document["error"]["kind"] == "unauthorized"
    status, _ = server.request("POST", "/admin/reload",
                               headers={"Authorization": "Bearer wrong-token-wrong-token"})
    assert status == 401
    from .conftest import TOKEN

    status, document = server.request("POST", "/admin/reload",
                                      headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and document["routers"]["tickets"]["outcome"] == "unchanged"


def _delta(before: dict, after: dict, key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


def _lines(path) -> int:
    try:
        return sum(1 for _ in open(path, "rb"))
    except FileNotFoundError:
        return 0


def test_two_workers_share_metrics_and_log_apart(ticket_dir, tmp_path):
    from .conftest import running_server

    log = tmp_path / "escalations.jsonl"
    with running_server([ticket_dir], tmp_path, "--workers", "2", "--escalation-log",
                        str(log)) as server:
        for _ in range(12):
            status, answer = server.request("POST", "/v1/routers/tickets",
                                            {"features": [0.0] * 12})
            assert status == 200 and answer["escalated"] is True
        metrics = server.metrics()
        assert metrics['tensorcode_router_calls_total{router="tickets"}'] == 12
    files = sorted(tmp_path.glob("escalations-*.jsonl"))
    assert 1 <= len(files) <= 2
    assert sum(_lines(path) for path in files) == 12

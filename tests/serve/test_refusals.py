"""Bad requests are 4xx with the one error body, never a 500; a full disk under the
escalation log costs the record, never the answer; integers past int64 follow float64's
rule on every path (HTTP, ``tensorcode route``, the in-process router)."""

from __future__ import annotations

import io
import json
import os
import shutil

import numpy as np
import pytest
from starlette.testclient import TestClient

from tensorcode.cli import main as cli_main
from tensorcode.distill import Distillation
from tensorcode.serve import create_app
from tensorcode.serve.escalations import EscalationLog, read_escalations

TOKEN = "an-admin-token-of-some-length"
ZERO = [0] * 12
BILLING = [0, 0, 0, 1] + [0] * 8


def _sample(client, key: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.rpartition(" ")[0] == key:
            return float(line.rpartition(" ")[2])
    return 0.0


@pytest.mark.parametrize("path, body, field", [
    ("/v1/routers/tickets", b'{"features": [0,0,0,0,0,0,0,0,0,0,0,0], "\\ud800": 1}',
     "\\ud800"),
    ("/v1/routers/tickets", b'{"\\ud800": [0,0,0,0,0,0,0,0,0,0,0,0]}', "features"),
    ("/v1/routers/tickets/batch",
     b'[{"features": [0,0,0,0,0,0,0,0,0,0,0,0], "\\udfff\\ud800": 1}]', "[0].\\udfff"),
])
def test_a_lone_surrogate_is_a_422_with_a_renderable_body(ticket_dir, path, body, field):
    with TestClient(create_app({"tickets": ticket_dir})) as client:
        response = client.post(path, content=body)
        assert response.status_code == 422
        error = response.json()["error"]
        assert error["kind"] in ("unexpected", "missing")
        assert error["field"].startswith(field)
        response.content.decode("utf-8")  # valid UTF-8 throughout
        assert response.json()["path"] == "refused"
        assert client.get("/healthz").status_code == 200


def test_a_reload_refused_for_a_tampered_artifact_has_the_error_body(ticket_dir, tmp_path):
    directory = tmp_path / "tickets"
    shutil.copytree(ticket_dir, directory)
    with TestClient(create_app({"tickets": directory}, admin_token=TOKEN)) as client:
        artifact = directory / "algorithm.json"
        artifact.write_bytes(artifact.read_bytes().replace(b'"version"', b'"versi0n"', 1))
        response = client.post("/admin/reload", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 422
        document = response.json()
        assert document["error"]["kind"] == "reload_failed"
        assert document["error"]["field"] == "routers"
        assert "SHA-256" in document["error"]["message"]
        assert document["routers"]["tickets"]["outcome"] == "failed"
        answer = client.post("/v1/routers/tickets", json={"features": BILLING}).json()
        assert answer["escalated"] is False  # still serving the old artifact
        assert _sample(client, 'tensorcode_router_reloads_total{outcome="failed",'
                               'router="tickets"}') == 1.0


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_loses_the_record_not_the_answer(ticket_dir, caplog):
    log = EscalationLog("/dev/full")
    app = create_app({"tickets": ticket_dir}, escalation_log=log,
                     fallback=lambda router, inputs: {"route": 2.0})
    with TestClient(app) as client:
        for _ in range(3):
            response = client.post("/v1/routers/tickets", json={"features": ZERO})
            assert response.status_code == 200
            assert response.json() == {"route": 2.0, "escalated": True, "reason": "abstained",
                                       "answered_by": "fallback",
                                       "path": "fallback_abstained"}
        batch = client.post("/v1/routers/tickets/batch",
                            json=[{"features": ZERO}, {"features": BILLING}])
        assert batch.status_code == 200
        assert [a["path"] for a in batch.json()] == ["fallback_abstained", "program"]
        key = 'tensorcode_router_escalation_log_failures_total{router="tickets"}'
        assert _sample(client, key) == 4.0
        assert _sample(client, 'tensorcode_router_paths_total{path="fallback_abstained",'
                               'router="tickets"}') == 4.0
    assert "was not written" in caplog.text and "/dev/full" in caplog.text
    app.state.service.close()


def test_a_short_write_is_completed_or_leaves_a_line_the_reader_skips(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    log = EscalationLog(path)
    real_write = os.write
    # one step per os.write call: record 1 is written in two pieces; record 2 gets ten
    # bytes out before the disk is full; record 3 goes through
    plan = iter(["short", "ok", "short", "full"])

    def flaky(fd, data):
        step = next(plan, "ok")
        if step == "short":
            return real_write(fd, bytes(data[:10]))
        if step == "full":
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", flaky)
    log.append({"router": "a", "n": 1})          # short, then completed
    with pytest.raises(OSError):
        log.append({"router": "a", "n": 2})      # torn: 10 bytes, then the disk is full
    log.append({"router": "a", "n": 3})          # starts on a line of its own
    log.close()
    read = read_escalations([path])
    assert [r["n"] for r in read.records] == [1, 3] and read.skipped == 1


def test_10_to_the_30_is_one_rule_everywhere(ticket_dir, monkeypatch, capsys):
    huge = [10 ** 30] + [0] * 11
    router = Distillation.load(ticket_dir).router(lambda inputs: {"route": -1.0})
    in_process = router({"features": huge})
    with TestClient(create_app({"tickets": ticket_dir})) as client:
        body = json.dumps({"features": huge}).encode()
        assert b"1000000000000000000000000000000" in body
        over_http = client.post("/v1/routers/tickets", content=body)
        assert over_http.status_code == 200
        assert over_http.json()["route"] == float(in_process["route"])
        batch = client.post("/v1/routers/tickets/batch",
                            content=b"[" + body + b"," + body + b"]")
        assert batch.status_code == 200 and len(batch.json()) == 2
        too_big = json.dumps({"features": [10 ** 400] + [0] * 11}).encode()
        refused = client.post("/v1/routers/tickets", content=too_big)
        assert refused.status_code == 422
        assert refused.json()["error"]["kind"] == "not_finite"
    lines = body.decode() + "\n" + too_big.decode() + "\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
    status = cli_main(["route", str(ticket_dir), "--quiet"])
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert status == 1
    assert answers[0]["path"] in ("program", "fallback_abstained")
    assert answers[0].get("route") == (None if in_process["escalated"]
                                       else float(in_process["route"]))
    assert "too large for float64" in answers[1]["error"]["message"]
    assert answers[1]["error"]["kind"] == "not_finite"
    with pytest.raises(Exception, match="too large for float64"):
        router({"features": [10 ** 400] + [0] * 11})
    assert np.isfinite(float(in_process["route"]))


def test_infinities_of_both_signs_are_a_422_on_the_single_and_batch_endpoints(ticket_dir):
    features = "[1e309, -1e309" + ", 0" * 10 + "]"
    single = f'{{"features": {features}}}'.encode()
    with TestClient(create_app({"tickets": ticket_dir})) as client:
        for path, body, field in [("/v1/routers/tickets", single, "features"),
                                  ("/v1/routers/tickets/batch", b"[" + single + b"]",
                                   "[0].features")]:
            response = client.post(path, content=body)
            assert response.status_code == 422, response.text
            assert response.json()["error"]["kind"] == "not_finite"
            assert response.json()["error"]["field"] == field
        assert 'kind="internal"' not in client.get("/metrics").text

"""The application in process: array outputs, fallbacks (sync, async, failing), an
in-memory router's reload, and the admin switch."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.testclient import TestClient

from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.distill import CaseSet, Distillation
from tensorcode.distill.program import compile_program
from tensorcode.errors import TensorCodeError
from tensorcode.serve import create_app

SOURCE = """\
def score(features):
    covered = where(features.sum() > 0.0, 1.0, 0.0)
    return {"scores": features.slice(0, 2) * 2.0, "covered": covered}
"""
INPUTS = {"features": (3,)}
OUTPUTS = {"scores": (2,)}


@pytest.fixture(scope="module")
def scorer() -> Distillation:
    program, abstains = compile_program(SOURCE, None, INPUTS, OUTPUTS, DEFAULT_BACKEND)
    case = {"features": np.array([1.0, 2.0, 3.0])}
    target = {"scores": np.array([2.0, 4.0])}
    cases = CaseSet([0], [case], [target])
    return Distillation(task="score", inputs=INPUTS, outputs=OUTPUTS, program=program,
                        source=SOURCE, report={"design": {}, "acceptance": {}}, attempts=[],
                        design=cases, acceptance=cases, settings={}, abstains=abstains)


def test_array_outputs_through_both_paths(scorer):
    with TestClient(create_app({"scores": scorer})) as client:
        answer = client.post("/v1/routers/scores", json={"features": [1, 2, 3]}).json()
        assert answer == {"scores": [2.0, 4.0], "escalated": False, "reason": None,
                          "path": "program"}
        answers = client.post("/v1/routers/scores/batch",
                              json=[{"features": [1, 2, 3]}, {"features": [0, 0, 0]}]).json()
        assert answers[0] == answer
        assert answers[1]["escalated"] is True and answers[1]["scores"] is None


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_callable_fallback_answers_escalations(scorer, kind):
    seen = []

    def sync(router, inputs):
        seen.append((router.name, inputs["features"].tolist()))
        return {"scores": [7.0, 8.0]}

    async def asynchronous(router, inputs):
        return sync(router, inputs)

    app = create_app({"scores": scorer}, fallback=sync if kind == "sync" else asynchronous)
    with TestClient(app) as client:
        answer = client.post("/v1/routers/scores", json={"features": [0, 0, 0]}).json()
        batch = client.post("/v1/routers/scores/batch",
                            json=[{"features": [0, 0, 0]}, {"features": [0, 1, 0]}]).json()
    expected = {"scores": [7.0, 8.0], "escalated": True, "reason": "abstained",
                "answered_by": "fallback", "path": "fallback_abstained"}
    assert answer == expected and batch[0] == expected
    assert batch[1] == {"scores": [0.0, 2.0], "escalated": False, "reason": None,
                        "path": "program"}
    assert seen == [("scores", [0.0, 0.0, 0.0])] * 2


def test_a_fallback_answer_that_does_not_fit_is_reported(scorer):
    app = create_app({"scores": scorer}, fallback=lambda router, inputs: {"other": 1.0})
    with TestClient(app) as client:
        answer = client.post("/v1/routers/scores", json={"features": [0, 0, 0]}).json()
    assert answer["scores"] is None and "KeyError" in answer["fallback_error"]


def test_reload_of_an_in_memory_router_says_why_and_without_a_token_is_off(scorer):
    token = "an-admin-token-of-some-length"
    with TestClient(create_app({"scores": scorer}, admin_token=token)) as client:
        response = client.post("/admin/reload", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 422
        assert "in memory" in response.json()["routers"]["scores"]["reason"]
        error = response.json()["error"]  # the one error body shape
        assert error["kind"] == "reload_failed" and error["field"] == "routers"
        assert "in memory" in error["message"]
    with TestClient(create_app({"scores": scorer})) as client:
        response = client.post("/admin/reload", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 403
    with pytest.raises(TensorCodeError, match="16 characters"):
        create_app({"scores": scorer}, admin_token="short")
    with pytest.raises(TensorCodeError, match="at least one router"):
        create_app({})


def test_a_client_that_leaves_before_its_body_is_not_a_server_error(scorer, caplog):
    """A reload body that never arrives (the client left, or its body timeout closed it)
    ends the request quietly: no traceback, no ``internal`` error counted."""
    import asyncio

    token = "an-admin-token-of-some-length"
    app = create_app({"scores": scorer}, admin_token=token)
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/admin/reload",
             "raw_path": b"/admin/reload", "root_path": "", "query_string": b"",
             "scheme": "http", "http_version": "1.1", "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 2),
             "headers": [(b"authorization", f"Bearer {token}".encode()),
                         (b"content-length", b"100")]}
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 400
    assert "unhandled error" not in caplog.text
    exposition = app.state.service.metrics.exposition()[0].decode()
    assert 'kind="internal"' not in exposition

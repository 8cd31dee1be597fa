"""Hot reload against a real server: under load nothing is dropped, a bad artifact leaves
the old router serving with the reason in the answer, and SIGHUP reloads too."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time

import numpy as np
import pytest

from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.distill import Distillation
from tensorcode.distill.program import compile_program
from tensorcode.distill.result import ARTIFACT, RECORD

from .conftest import TOKEN, running_server

#: the replacement program: same contract, claims every ticket, routes all to shipping
REPLACEMENT = """\
def route(features):
    return {"route": features.sum() * 0.0 + 3.0, "covered": features.sum() * 0.0 + 1.0}
"""
CASES = [[float(b) for b in np.binary_repr(i, 12)] for i in range(0, 4096, 97)]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def replacement(original: Distillation, directory):
    program, abstains = compile_program(REPLACEMENT, None, original.inputs, original.outputs,
                                        DEFAULT_BACKEND)
    Distillation(task=original.task, inputs=original.inputs, outputs=original.outputs,
                 program=program, source=REPLACEMENT, report=original.report,
                 attempts=original.attempts, design=original.design,
                 acceptance=original.acceptance, settings=original.settings,
                 abstains=abstains).save(directory)
    return directory


def install(staged, served) -> None:
    """Put a saved router's files in place the way a deploy would (artifact, then record)."""
    for name in (ARTIFACT, RECORD):
        shutil.copy(staged / name, served / f".{name}.new")
        os.replace(served / f".{name}.new", served / name)


def sha(server) -> str:
    return server.request("GET", "/v1/routers")[1]["routers"][0]["artifact_sha256"]


@pytest.fixture()
def deployment(ticket_dir, tmp_path):
    served = tmp_path / "deploy" / "tickets"
    shutil.copytree(ticket_dir, served)
    original = Distillation.load(ticket_dir)
    new = replacement(original, tmp_path / "staged")
    old_answers = {}
    router = original.router(lambda inputs: {"route": -1.0})
    for features in CASES:
        answer = router({"features": np.array(features)})
        # the service without a fallback answers an escalation with a null route
        route = None if answer["escalated"] else answer["route"]
        old_answers[tuple(features)] = (route, answer["escalated"])
    return served, new, old_answers


def test_a_reload_under_load_drops_nothing(deployment, tmp_path):
    served, staged, old_answers = deployment
    new_answer = (3.0, False)
    with running_server([served], tmp_path) as server:
        old_sha = sha(server)
        clients, per_client = 4, 600
        problems: list = []
        answered = [0] * clients
        sent = [0] * clients
        reloaded = threading.Event()
        seen = {"old": 0, "new": 0}
        lock = threading.Lock()

        def client(t: int) -> None:
            connection = server.connection()
            try:
                # At least per_client requests each, and on until 50 more have gone out
                # after the reload answered (bounded), so a slow machine still sends
                # requests on both sides of the swap.
                after = 0
                for k in range(20 * per_client):
                    if k >= per_client and after >= 50:
                        break
                    if reloaded.is_set():
                        after += 1
                    sent[t] += 1
                    features = CASES[(t + k) % len(CASES)]
                    connection.request("POST", "/v1/routers/tickets",
                                       body=json.dumps({"features": features}))
                    response = connection.getresponse()
                    document = json.loads(response.read())
                    got = (document.get("route"), document.get("escalated"))
                    if response.status != 200:
                        problems.append((t, k, response.status, document))
                    elif got == new_answer and got != old_answers[tuple(features)]:
                        with lock:
                            seen["new"] += 1
                    elif got == old_answers[tuple(features)]:
                        with lock:
                            seen["old"] += 1
                    else:
                        problems.append((t, k, "corrupt", document))
                    answered[t] += 1
            except Exception as error:  # reported below
                problems.append(error)
            finally:
                connection.close()

        threads = [threading.Thread(target=client, args=(t,)) for t in range(clients)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120
        while sum(answered) < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        install(staged, served)
        status, outcome = server.request("POST", "/admin/reload", headers=AUTH)
        assert status == 200, outcome
        assert outcome["routers"]["tickets"]["outcome"] == "reloaded"
        reloaded.set()
        after_reload = server.request("POST", "/v1/routers/tickets",
                                      {"features": CASES[0]})[1]
        for thread in threads:
            thread.join(timeout=600)
        assert problems == []
        assert sum(answered) == sum(sent) >= clients * per_client
        assert seen["old"] > 0 and seen["new"] > 0
        assert (after_reload["route"], after_reload["escalated"]) == new_answer
        assert sha(server) != old_sha
        metrics = server.metrics()
        assert metrics['tensorcode_router_reloads_total{outcome="reloaded",router="tickets"}'] == 1


def test_a_bad_artifact_leaves_the_old_router_serving(deployment, tmp_path):
    served, _, old_answers = deployment
    with running_server([served], tmp_path) as server:
        old_sha = sha(server)
        (served / ARTIFACT).write_text('{"format": "something else"}')
        status, outcome = server.request("POST", "/admin/reload", headers=AUTH)
        assert status == 422
        result = outcome["routers"]["tickets"]
        assert result["outcome"] == "failed" and "SHA-256" in result["reason"]
        assert result["artifact_sha256"] == old_sha == sha(server)
        features = CASES[3]
        status, document = server.request("POST", "/v1/routers/tickets", {"features": features})
        assert status == 200
        assert (document["route"], document["escalated"]) == old_answers[tuple(features)]
        status, outcome = server.request("POST", "/admin/reload", body={"routers": ["nobody"]},
                                         headers=AUTH)
        assert status == 404 and outcome["error"]["field"] == "routers"


def test_sighup_reloads(deployment, tmp_path):
    served, staged, _ = deployment
    with running_server([served], tmp_path) as server:
        old_sha = sha(server)
        install(staged, served)
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 120
        while sha(server) == old_sha:
            assert time.monotonic() < deadline, "SIGHUP did not reload within 120 s"
            time.sleep(0.1)
        status, document = server.request("POST", "/v1/routers/tickets", {"features": CASES[0]})
        assert status == 200 and document["route"] == 3.0
        assert server.process.poll() is None

"""``tensorcode serve --workers 2``: a rolling reload under (bounded, loopback) client
load replaces both workers without a failed request, and its outcome, success or
failure, is in ``/metrics`` and ``GET /admin/reload``, not only in the server's log."""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time

import pytest

from .conftest import TOKEN, copy_router, running_server

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BILLING = [0.0, 0.0, 0.0, 1.0] + [0.0] * 8
RELOAD_DEADLINE_S = 240.0


def _reloads(server) -> dict:
    status, document = server.request("GET", "/admin/reload", headers=AUTH)
    assert status == 200
    return document["rolling"]


def _wait_for(server, count: int) -> dict:
    deadline = time.monotonic() + RELOAD_DEADLINE_S
    while True:
        rolling = _reloads(server)
        if len(rolling["history"]) >= count:
            return rolling
        assert time.monotonic() < deadline, "the rolling reload did not finish in time"
        time.sleep(0.5)


def _metric(server, outcome: str) -> float:
    return server.metrics().get(f'tensorcode_server_reloads_total{{outcome="{outcome}"}}', 0.0)


@pytest.fixture()
def load():
    """A bounded client load: one thread sending single requests until told to stop
    (or 20,000 requests), recording every status and every dropped connection."""
    state = {"stop": threading.Event(), "statuses": [], "errors": []}

    def start(server):
        def run():
            for _ in range(20_000):
                if state["stop"].is_set():
                    return
                try:
                    status, _ = server.request("POST", "/v1/routers/tickets",
                                               {"features": BILLING})
                    state["statuses"].append(status)
                except OSError as error:  # a dropped connection, even before any answer:
                    # a retiring worker answers what it accepted, so none is retried
                    state["errors"].append(error)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        state["thread"] = thread
        return state

    yield start
    state["stop"].set()
    if "thread" in state:
        state["thread"].join(timeout=60)


def test_rolling_reloads_report_their_outcome_under_load(ticket_dir, tmp_path, load):
    directory = copy_router(ticket_dir, tmp_path / "tickets")
    with running_server([directory], tmp_path, "--workers", "2",
                        "--ready-timeout", "120") as server:
        assert _reloads(server) == {"counts": {"reloaded": 0, "failed": 0, "interrupted": 0},
                                    "history": []}
        running = load(server)
        time.sleep(1.0)
        # 1. POST /admin/reload asks the supervisor to replace both workers
        status, answer = server.request("POST", "/admin/reload", headers=AUTH)
        assert status == 202 and answer["rolling"] == "started"
        first = _wait_for(server, 1)["history"][0]
        assert first["outcome"] == "reloaded" and first["replaced"] == 2
        assert first["ready_timeout"] == 120
        assert _metric(server, "reloaded") == 1.0
        # 2. a tampered artifact: the new worker cannot start, the old ones keep serving
        artifact = directory / "algorithm.json"
        original = artifact.read_bytes()
        artifact.write_bytes(original.replace(b'"version"', b'"versi0n"', 1))
        server.process.send_signal(signal.SIGHUP)
        second = _wait_for(server, 2)["history"][1]
        assert second["outcome"] == "failed" and second["replaced"] == 0
        assert "keep serving" in second["reason"]
        assert _metric(server, "failed") == 1.0
        status, answer = server.request("POST", "/v1/routers/tickets", {"features": BILLING})
        assert status == 200 and answer["path"] == "program"
        artifact.write_bytes(original)
        running["stop"].set()
        running["thread"].join(timeout=60)
    statuses = running["statuses"]
    assert running["errors"] == [] and statuses and set(statuses) == {200}


KEEP_ALIVE_CLIENTS = 3
RELOADS = 3
PAUSE_S = 0.002  # between a client's requests: load, not a busy loop starving the workers


def test_rolling_reloads_drain_keep_alive_connections(ticket_dir, tmp_path):
    """Clients that keep their connections alive see no connection error over a few
    rolling reloads: each retired worker answers their next request with
    ``Connection: close`` and they reconnect to a worker that is listening."""
    stop = threading.Event()
    lock = threading.Lock()
    seen = {"statuses": [], "errors": [], "closes": 0}
    body = json.dumps({"features": BILLING})

    def client(port: int) -> None:
        connection = None
        for _ in range(20_000):
            if stop.is_set():
                break
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                connection.request("POST", "/v1/routers/tickets", body=body,
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as error:  # no retry: a failure
                with lock:
                    seen["errors"].append(error)
                connection.close()
                connection = None
                continue
            with lock:
                seen["statuses"].append(response.status)
                seen["closes"] += response.will_close
            if response.will_close:
                connection.close()
                connection = None
            time.sleep(PAUSE_S)
        if connection is not None:
            connection.close()

    with running_server([ticket_dir], tmp_path, "--workers", "2",
                        "--ready-timeout", "120") as server:
        threads = [threading.Thread(target=client, args=(server.port,), daemon=True)
                   for _ in range(KEEP_ALIVE_CLIENTS)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(0.5)
            for count in range(1, RELOADS + 1):
                server.process.send_signal(signal.SIGHUP)
                last = _wait_for(server, count)["history"][-1]
                assert last["outcome"] == "reloaded", last
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
    assert seen["errors"] == []
    assert seen["statuses"] and set(seen["statuses"]) == {200}
    assert seen["closes"] >= 1  # the retired workers closed kept-alive connections


@pytest.mark.parametrize("queued, reloads, stops", [
    (["HUP"] * 5, 1, 0),              # SIGHUPs queued during a reload: one more reload
    (["HUP", "TERM", "HUP"], 0, 1),   # a stop drops the queued reloads
    (["TTIN", "HUP", "HUP"], 1, 0),   # other signals keep their place
])
def test_queued_sighups_are_served_by_one_reload_and_a_stop_goes_first(queued, reloads,
                                                                       stops):
    from tensorcode.serve.rolling import supervisor_class

    # made without __init__, which would install the supervisor's signal handlers here
    instance = object.__new__(supervisor_class())
    calls = {"reloads": 0, "stops": 0, "other": 0}
    instance.signal_queue = [getattr(signal, f"SIG{name}") for name in queued]
    instance.restart_all = lambda: calls.__setitem__("reloads", calls["reloads"] + 1)
    instance.handle_term = lambda: calls.__setitem__("stops", calls["stops"] + 1)
    instance.handle_ttin = lambda: calls.__setitem__("other", calls["other"] + 1)
    instance.handle_signals()
    assert (calls["reloads"], calls["stops"]) == (reloads, stops)
    assert calls["other"] == queued.count("TTIN")
    assert instance.signal_queue == []

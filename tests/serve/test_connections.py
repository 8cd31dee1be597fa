"""Slow and numerous clients: read timeouts, the connection cap below the open-file limit,
and draining at shutdown (``serve.connections``).

The slow-client tests run a real ``tensorcode serve`` on 127.0.0.1 with its open-file
limit set to 256 (so its connection cap is 128) and open more slow connections than the
limit; the overload and draining tests run uvicorn in a thread of this process with an
application that holds requests until told to answer."""

from __future__ import annotations

import asyncio
import http.client
import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tensorcode.errors import TensorCodeError
from tensorcode.serve.connections import (
    MIN_RESERVED_FILES,
    RESERVED_FILES,
    UNLIMITED_CAP,
    ConnectionLimits,
    connection_cap,
)

from .conftest import free_port, running_server

OPEN_FILES = 256
SLOW = 300  # more than the server may open
READ_TIMEOUT_S = 1.5
SLACK_S = 3.0  # the sweep's period and a busy machine
BILLING = json.dumps({"features": [0.0, 0.0, 0.0, 1.0] + [0.0] * 8}).encode()
SLOW_BODY = (b"POST /v1/routers/tickets HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
             b"\r\nContent-Length: 1000\r\n\r\n{\"fea")
SLOW_HEADERS = b"POST /v1/routers/tickets HTTP/1.1\r\nHost: t\r\nContent-Le"


# -- the cap's arithmetic -------------------------------------------------------------------

def test_the_default_cap_leaves_room_for_the_service_files(monkeypatch):
    assert connection_cap(None, 1024) == 1024 - RESERVED_FILES
    assert connection_cap(500, 1024) == 500
    monkeypatch.setattr(resource, "getrlimit",
                        lambda _: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert connection_cap(None) == UNLIMITED_CAP


def test_a_cap_at_or_past_the_open_file_limit_is_refused():
    with pytest.raises(TensorCodeError, match=r"--max-connections 1024 .* at most 960"):
        connection_cap(1024, 1024)
    assert connection_cap(1024 - MIN_RESERVED_FILES, 1024) == 960
    with pytest.raises(TensorCodeError, match="ulimit -n"):
        connection_cap(None, 100)


def test_the_command_refuses_a_cap_past_the_open_file_limit(ticket_dir, monkeypatch, capsys):
    from tensorcode.cli import main
    from tensorcode.serve.factory import SETTINGS

    monkeypatch.setenv(SETTINGS, "")  # the command sets it; restored after the test
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        pytest.skip("no open-file limit to pass")
    assert main(["serve", str(ticket_dir), "--max-connections", str(soft)]) != 0
    assert "--max-connections" in capsys.readouterr().err


@pytest.mark.parametrize("field, value", [("header_timeout", 0), ("body_timeout", -1.0),
                                          ("max_connections", 0)])
def test_limits_must_be_positive(field, value):
    with pytest.raises(TensorCodeError, match=field.replace("_", "-")):
        ConnectionLimits(**{field: value})


# -- a real server under slow clients -------------------------------------------------------

def _connect(port: int, sent: bytes = b"") -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    if sent:
        client.sendall(sent)
    return client


def _answer(client: socket.socket, deadline_s: float) -> bytes:
    """What the server sends before closing (b"" when it closes silently)."""
    client.settimeout(deadline_s)
    chunks = []
    while True:
        chunk = client.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _status_line(client: socket.socket) -> bytes:
    client.settimeout(10)
    received = b""
    while b"\r\n" not in received:
        chunk = client.recv(4096)
        assert chunk, "closed before a status line"
        received += chunk
    return received.split(b"\r\n", 1)[0]


def _normal_request(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/v1/routers/tickets", body=BILLING,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@pytest.fixture(scope="module")
def limited(ticket_dir, tmp_path_factory):
    """A server whose open-file limit is 256, with short read timeouts."""
    with running_server([ticket_dir], tmp_path_factory.mktemp("limited"),
                        "--header-timeout", str(READ_TIMEOUT_S),
                        "--body-timeout", str(READ_TIMEOUT_S),
                        open_files=OPEN_FILES) as server:
        yield server


def test_more_slow_connections_than_open_files_leave_normal_requests_answered(limited):
    slow = []
    try:
        for i in range(SLOW):  # headers and 5 of 1,000 body bytes, or half a header line
            slow.append(_connect(limited.port, SLOW_BODY if i % 2 else SLOW_HEADERS))
        statuses = [_normal_request(limited.port) for _ in range(20)]
        assert statuses == [200] * 20
        # every slow connection is answered and closed: 503 when it made room for a
        # newer one at the cap (128), 408 at its read timeout, never left open
        answers = [_answer(client, READ_TIMEOUT_S + SLACK_S) for client in slow]
    finally:
        for client in slow:
            client.close()
    firsts = [answer.split(b"\r\n", 1)[0] for answer in answers]
    evicted = firsts.count(b"HTTP/1.1 503 Service Unavailable")
    timed_out = firsts.count(b"HTTP/1.1 408 Request Timeout")
    assert evicted + timed_out == SLOW
    assert evicted > 0  # about 300 - 128 (fewer if some timed out while others opened)
    assert _normal_request(limited.port) == 200


def test_a_slow_body_gets_408_within_the_body_timeout(limited):
    with _connect(limited.port, SLOW_BODY) as client:
        start = time.monotonic()
        answer = _answer(client, READ_TIMEOUT_S + SLACK_S)
        waited = time.monotonic() - start
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head
    error = json.loads(body)["error"]
    assert error["kind"] == "timeout" and "--body-timeout" in error["message"]
    assert READ_TIMEOUT_S - 0.1 <= waited <= READ_TIMEOUT_S + SLACK_S


def test_slow_headers_get_408_and_a_silent_connection_is_closed(limited):
    with _connect(limited.port, SLOW_HEADERS) as trickling, _connect(limited.port) as silent:
        answer = _answer(trickling, READ_TIMEOUT_S + SLACK_S)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b"--header-timeout" in answer
        start = time.monotonic()
        assert _answer(silent, READ_TIMEOUT_S + SLACK_S) == b""  # nothing sent, nothing owed
        assert time.monotonic() - start <= READ_TIMEOUT_S + SLACK_S


# -- overload and draining, in this process ---------------------------------------------------

class Held:
    """An ASGI app whose requests wait until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        self.started += 1
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def in_thread(app, max_connections: int) -> Iterator[tuple[int, object]]:
    """uvicorn with the guarded protocol in a thread; stopped (bounded) on exit."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off",
                            http="tensorcode.serve.connections:GuardedProtocol", ws="none",
                            log_level="warning", timeout_keep_alive=5,
                            timeout_graceful_shutdown=10)
    config.connection_limits = ConnectionLimits(
        header_timeout=5, body_timeout=5, max_connections=max_connections)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield port, server
    finally:
        app.release.set()
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive()


def _send_request(port: int) -> socket.socket:
    return _connect(port, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")


def _wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_when_every_connection_is_being_answered_a_newcomer_gets_503():
    app = Held()
    with in_thread(app, max_connections=2) as (port, _):
        held = [_send_request(port), _send_request(port)]
        _wait_for(lambda: app.started == 2)
        with _send_request(port) as newcomer:
            answer = _answer(newcomer, 10)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in head
        assert json.loads(body)["error"]["kind"] == "overloaded"
        app.release.set()
        for client in held:  # the held requests are answered
            assert _status_line(client) == b"HTTP/1.1 200 OK"
            client.close()


def test_shutdown_drains_in_flight_and_idle_keep_alive_connections():
    app = Held()
    with in_thread(app, max_connections=16) as (port, server):
        app.release.set()
        idle = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        idle.request("GET", "/")
        first = idle.getresponse()
        assert first.read() == b"ok" and not first.will_close  # kept alive
        app.release.clear()
        in_flight = _send_request(port)
        _wait_for(lambda: app.started == 2)
        server.should_exit = True  # what SIGTERM to a retiring worker does
        _wait_for(lambda: server.server_state.tensorcode_guard.draining)
        time.sleep(0.2)  # past uvicorn's own pause after asking connections to shut down
        # the idle connection is still open: its next request is answered, with close
        idle.request("GET", "/")
        app.release.set()
        second = idle.getresponse()
        assert second.read() == b"ok" and second.will_close
        idle.close()
        answer = _answer(in_flight, 10)
        in_flight.close()
        assert answer.startswith(b"HTTP/1.1 200 ") and b"connection: close" in answer

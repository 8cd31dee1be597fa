"""Fixtures for the serving tests: the demo's ticket router and real servers.

A server is ``tensorcode serve`` in a subprocess bound to 127.0.0.1 on a free port; the
fixture waits (bounded) for ``/readyz`` and always stops it: terminate, wait with a
timeout, kill if it has not gone.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import pathlib
import resource
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = "test-admin-token-0123456789"
STARTUP_TIMEOUT_S = 120.0


@pytest.fixture(scope="session")
def ticket_dir(tmp_path_factory) -> pathlib.Path:
    """The distilled ticket router ``tensorcode demo`` builds, saved once per session."""
    from tensorcode.distill import tickets

    directory = tmp_path_factory.mktemp("served") / "tickets"
    tickets.run_example(directory)
    return directory


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A running ``tensorcode serve``: ``request`` sends one HTTP request."""

    def __init__(self, process: subprocess.Popen, port: int, log: pathlib.Path) -> None:
        self.process = process
        self.port = port
        self.log = log

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, Any]:
        connection = self.connection()
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            connection.request(method, path, body=data, headers=headers or {})
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        kind = response.getheader("content-type", "")
        return response.status, json.loads(payload) if "json" in kind else payload.decode()

    def metrics(self) -> dict[str, float]:
        """``/metrics`` as ``{'name{labels}': value}`` (samples only)."""
        status, text = self.request("GET", "/metrics")
        assert status == 200
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                samples[key] = float(value)
        return samples


@contextmanager
def running_server(directories: list[pathlib.Path], tmp_path: pathlib.Path,
                   *extra: str, open_files: int | None = None) -> Iterator[Server]:
    """``tensorcode serve`` on a free loopback port; ``open_files`` sets the server's
    open-file limit (``RLIMIT_NOFILE``) before it starts."""
    port = free_port()
    log = tmp_path / f"server-{port}.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TENSORCODE_ADMIN_TOKEN=TOKEN)
    command = [sys.executable, "-c", ("import sys; from tensorcode.cli import main; "
                                      "sys.exit(main())"),
               "serve", *map(str, directories), "--host", "127.0.0.1", "--port", str(port), *extra]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=str(ROOT),
                                   preexec_fn=None if open_files is None else
                                   functools.partial(_limit_open_files, open_files))
    server = Server(process, port, log)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the server exited with {process.returncode}:\n"
                                     f"{log.read_text()[-3000:]}")
            try:
                if server.request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the server was not ready within {STARTUP_TIMEOUT_S} s:"
                                     f"\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@pytest.fixture(scope="module")
def server(ticket_dir, tmp_path_factory) -> Iterator[Server]:
    """One server of the ticket router for a test module (tests use metric deltas)."""
    tmp = tmp_path_factory.mktemp("server")
    with running_server([ticket_dir], tmp, "--escalation-log", str(tmp / "escalations.jsonl"),
                        "--max-body-bytes", "400000") as running:
        running.escalation_log = tmp / "escalations.jsonl"  # type: ignore[attr-defined]
        yield running


def _limit_open_files(count: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))


def copy_router(source: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    shutil.copytree(source, target)
    return target

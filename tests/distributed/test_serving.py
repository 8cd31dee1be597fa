"""The Ray Serve deployment of the router app: arguments checked when it is built, and
one request answered through Serve's HTTP proxy by a replica that built the app itself."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest
from ray import serve

from tensorcode.distill import tickets
from tensorcode.distributed import serve_deployment
from tensorcode.errors import TensorCodeError


@pytest.fixture(scope="module")
def router_dir(tmp_path_factory):
    """The demo's distilled ticket router, saved once for this module."""
    directory = tmp_path_factory.mktemp("served") / "tickets"
    tickets.run_example(directory)
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_deployment_refuses_what_no_replica_could_serve(tmp_path, router_dir):
    with pytest.raises(TensorCodeError, match="not a directory"):
        serve_deployment(tmp_path / "missing")
    with pytest.raises(TensorCodeError, match="replicas must be a positive integer"):
        serve_deployment(router_dir, replicas=0)
    with pytest.raises(TensorCodeError, match="at least one"):
        serve_deployment([])


@pytest.mark.usefixtures("local_ray")
def test_a_replica_answers_like_tensorcode_serve(router_dir):
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        serve.run(serve_deployment(router_dir, replicas=1, executor="reference"),
                  route_prefix="/", name="routers")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/routers/tickets", method="POST",
            data=json.dumps({"features": [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]}).encode(),
            headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert response.status == 200
        assert answer == {"route": 1.0, "escalated": False, "reason": None, "path": "program"}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/routers",
                                    timeout=60) as response:
            listed = json.loads(response.read())["routers"]
        assert [r["name"] for r in listed] == ["tickets"]
    finally:
        serve.shutdown()

"""OpenAICompatibleModel against a real HTTP server on 127.0.0.1 started here: each test
scripts the server's answers and checks the reply or the error and how many requests
were made (bounded)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tensorcode.integrations import ModelError, ModelRequest, OpenAICompatibleModel


def completion(text: str) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "stop",
         "message": {"role": "assistant", "content": text}}]}).encode()


class Script:
    """The answers the server gives, one per request (the last repeats)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()

    def next(self, body, headers, path):
        with self.lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.paths.append(path)
            index = min(len(self.requests) - 1, len(self.answers) - 1)
            return self.answers[index]


@pytest.fixture
def server():
    servers = []

    def start(answers):
        script = Script(answers)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                status, payload, delay, extra = script.next(body, dict(self.headers), self.path)
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for key, value in extra.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                  daemon=True)
        thread.start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1", script

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def ok(text):
    return (200, completion(text), 0.0, {})


def test_success_sends_the_chat_completion_protocol(server):
    url, script = server([ok("def program(x):\n    return {}")])
    model = OpenAICompatibleModel(url, "served-model", api_key="k-123", timeout=5, retries=0,
                                  backoff=0.0)
    reply = model.complete(ModelRequest(prompt="write a program", system="be brief",
                                        max_tokens=64))
    assert reply == "def program(x):\n    return {}"
    assert model.requests_made == 1 and len(script.requests) == 1
    assert script.paths == ["/v1/chat/completions"]
    body = script.requests[0]
    assert body["model"] == "served-model"
    assert body["messages"] == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "write a program"}]
    assert body["max_tokens"] == 64 and body["temperature"] == 0.0
    assert script.headers[0]["Authorization"] == "Bearer k-123"


@pytest.mark.parametrize("status", [429, 500])
def test_transient_status_is_retried_then_succeeds(server, status):
    url, script = server([(status, b'{"error": "busy"}', 0.0, {}), ok("fine")])
    model = OpenAICompatibleModel(url, "m", timeout=5, retries=2, backoff=0.0)
    assert model.complete("hello") == "fine"
    assert len(script.requests) == 2 and model.requests_made == 2


@pytest.mark.parametrize("status", [429, 500])
def test_transient_status_gives_up_after_the_retries(server, status):
    url, script = server([(status, b'{"error": "busy"}', 0.0, {})])
    model = OpenAICompatibleModel(url, "m", timeout=5, retries=2, backoff=0.0)
    with pytest.raises(ModelError, match=f"HTTP {status}") as caught:
        model.complete("hello")
    assert len(script.requests) == 3  # one try and two retries, no more
    assert caught.value.status == status and caught.value.attempts == 3


def test_retry_after_header_is_honoured_but_bounded(server):
    url, script = server([(429, b"{}", 0.0, {"Retry-After": "0.2"}), ok("later")])
    model = OpenAICompatibleModel(url, "m", timeout=5, retries=1, backoff=0.0)
    start = time.perf_counter()
    assert model.complete("hello") == "later"
    assert time.perf_counter() - start >= 0.2
    assert len(script.requests) == 2


def test_client_errors_are_not_retried(server):
    url, script = server([(401, b'{"error": "bad key"}', 0.0, {})])
    model = OpenAICompatibleModel(url, "m", timeout=5, retries=3, backoff=0.0)
    with pytest.raises(ModelError, match=r"HTTP 401.*bad key"):
        model.complete("hello")
    assert len(script.requests) == 1


def test_timeout_is_retried_and_reported(server):
    url, script = server([(200, completion("too late"), 1.0, {})])
    model = OpenAICompatibleModel(url, "m", timeout=0.2, retries=1, backoff=0.0)
    start = time.perf_counter()
    with pytest.raises(ModelError, match=r"no answer within 0\.2 s"):
        model.complete("hello")
    assert time.perf_counter() - start < 5
    assert len(script.requests) == 2


@pytest.mark.parametrize("payload, message", [
    (b"<html>not json</html>", "not JSON"),
    (b"[1, 2]", "not an object"),
    (b'{"object": "chat.completion"}', "without a 'choices' list"),
    (b'{"choices": [{"finish_reason": "length", "message": {"content": null}}]}',
     "no text content"),
    (b'{"choices": [{"message": {"content": null, "refusal": "I will not"}}]}',
     "refused: I will not"),
])
def test_malformed_or_refused_replies_fail_clearly_without_retry(server, payload, message):
    url, script = server([(200, payload, 0.0, {})])
    model = OpenAICompatibleModel(url, "m", timeout=5, retries=2, backoff=0.0)
    with pytest.raises(ModelError, match=message):
        model.complete("hello")
    assert len(script.requests) == 1


def test_connection_refused_is_reported_after_bounded_tries():
    import socket
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens on this port now
    model = OpenAICompatibleModel(f"http://127.0.0.1:{port}/v1", "m", timeout=2, retries=1,
                                  backoff=0.0)
    with pytest.raises(ModelError, match="could not connect"):
        model.complete("hello")
    assert model.requests_made == 2


def test_bad_configuration_is_refused():
    with pytest.raises(ModelError, match="http"):
        OpenAICompatibleModel("localhost:8000", "m")
    with pytest.raises(ModelError, match="model"):
        OpenAICompatibleModel("http://localhost:8000/v1", "")
    with pytest.raises(ModelError, match="retries"):
        OpenAICompatibleModel("http://localhost:8000/v1", "m", retries=-1)

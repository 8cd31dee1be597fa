"""Authors that hang: a 127.0.0.1 server that accepts connections and never answers.
One ``complete`` is bounded by the client's ``deadline`` (every try and pause together),
one ``distill`` call by its own ``deadline``, and when no attempt got an answer the
``DistillationError`` headline says so."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from tensorcode.distill import distill
from tensorcode.errors import DistillationError
from tensorcode.integrations import ModelRequest, OpenAICompatibleModel
from tensorcode.integrations.model import ModelError


@pytest.fixture()
def silent_server():
    """A listening socket that accepts every connection, reads nothing and never writes;
    bounded (each accept waits at most 50 ms, the loop ends when the test does)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.05)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", held
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


def test_one_completion_stops_at_its_deadline(silent_server):
    url, held = silent_server
    model = OpenAICompatibleModel(url, "m", timeout=0.4, retries=50, backoff=0.05,
                                  deadline=1.0)
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"deadline of 1 s") as caught:
        model.complete("hello")
    elapsed = time.monotonic() - start
    assert 0.9 <= elapsed < 2.5  # bounded by the deadline, not 51 tries of 0.4 s
    assert 1 <= caught.value.attempts < 51 and held


def test_a_request_deadline_shortens_the_clients(silent_server):
    url, _ = silent_server
    model = OpenAICompatibleModel(url, "m", timeout=5, retries=3, backoff=0.0, deadline=60)
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"deadline of 0\.5 s"):
        model.complete(ModelRequest(prompt="hello", deadline=0.5))
    assert time.monotonic() - start < 2.0


def test_deadlines_must_be_positive():
    with pytest.raises(ModelError, match="deadline"):
        OpenAICompatibleModel("http://127.0.0.1:1/v1", "m", deadline=0)
    with pytest.raises(ModelError, match="deadline"):
        ModelRequest(prompt="x", deadline=-1.0)


def _workload():
    cases = [{"x": np.array([float(k), 1.0])} for k in range(8)]
    return cases, [{"route": 2.0 * k} for k in range(8)]


def test_distill_against_a_hung_author_says_no_attempt_got_an_answer(silent_server):
    url, _ = silent_server
    cases, targets = _workload()
    author = OpenAICompatibleModel(url, "m", timeout=0.3, retries=1, backoff=0.0,
                                   deadline=5.0)
    start = time.monotonic()
    with pytest.raises(DistillationError) as caught:
        distill("double x", {"x": (2,)}, cases, targets=targets, author=author, attempts=4,
                executor="reference", deadline=1.0)
    assert time.monotonic() - start < 3.0
    message = str(caught.value)
    assert message.startswith("no attempt got an answer from the author")
    assert "did not compile" not in message and "compiles" not in message.split(";")[0]
    assert caught.value.attempts[0]["error"].startswith("the author failed: ModelError")


def test_distill_deadline_stops_further_attempts():
    cases, targets = _workload()
    calls = []

    def slow_author(prompt):
        calls.append(prompt)
        time.sleep(0.3)
        return "no code here"

    start = time.monotonic()
    with pytest.raises(DistillationError) as caught:
        distill("double x", {"x": (2,)}, cases, targets=targets, author=slow_author,
                attempts=50, executor="reference", deadline=0.5)
    assert time.monotonic() - start < 3.0
    assert 1 <= len(calls) <= 3
    last = caught.value.attempts[-1]
    assert "deadline of 0.5 s" in last["error"] and last["reply"] is None
    assert str(caught.value).startswith("no attempt produced a program that compiles")


def test_distill_refuses_a_bad_deadline():
    cases, targets = _workload()
    from tensorcode.errors import TensorCodeError
    with pytest.raises(TensorCodeError, match="deadline"):
        distill("double x", {"x": (2,)}, cases, targets=targets, author=lambda p: "",
                attempts=1, executor="reference", deadline=-1)

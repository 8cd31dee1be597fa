"""The whole loop with an author served over HTTP on 127.0.0.1, and a real compiled
program shared by threads through a Router."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from tensorcode.distill import distill, tickets
from tensorcode.integrations import OpenAICompatibleModel, load_replies


def test_distill_with_a_chat_completions_author_on_loopback():
    replies = load_replies(tickets.replies_path())
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append(body)
            text = replies[min(len(received), len(replies)) - 1]
            payload = json.dumps({"choices": [{"finish_reason": "stop", "message": {
                "role": "assistant", "content": text}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        author = OpenAICompatibleModel(f"http://127.0.0.1:{server.server_address[1]}/v1",
                                       "recorded", timeout=10, retries=0)
        generated = tickets.generate(60, 11)
        result = distill(tickets.TASK, {"features": (12,)},
                         [{"features": tickets.features(t.text)} for t in generated],
                         targets=[{"route": tickets.teacher(t.text)} for t in generated],
                         author=author, attempts=4, executor="reference")
    finally:
        server.shutdown()
        server.server_close()
    assert len(received) == 2  # the second reply is accepted, the loop stops
    assert received[0]["messages"][-1]["content"] == result.attempts[0]["prompt"]
    assert result.report["selected_attempt"] == 2
    assert result.report["acceptance"]["wrong"] == 0


def test_a_compiled_program_serves_many_threads_through_one_router():
    replies = load_replies(tickets.replies_path())
    generated = tickets.generate(40, 5)
    from tensorcode.integrations import RecordedModel

    result = distill(tickets.TASK, {"features": (12,)},
                     [{"features": tickets.features(t.text)} for t in generated],
                     targets=[{"route": tickets.teacher(t.text)} for t in generated],
                     author=RecordedModel([replies[-1]]), attempts=1)
    router = result.router(lambda inputs: {"route": -1.0})
    rows = np.array([tickets.features(t.text) for t in tickets.generate(64, 8)])
    expected = [None if not row.any() else float(result({"features": row})["route"])
                for row in rows]
    failures = []

    def work():
        for _ in range(50):
            for row, want in zip(rows, expected):
                answer = router({"features": row})
                got = -1.0 if want is None else want
                if answer["escalated"] != (want is None) or float(answer["route"]) != got:
                    failures.append((row, answer))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert router.calls == 8 * 50 * 64
    assert router.escalations == 8 * 50 * sum(w is None for w in expected)

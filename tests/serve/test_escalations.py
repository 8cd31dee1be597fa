"""The escalation log (append, rotation, torn lines, threads) and the escalation-to-repair
loop: a server with a teacher fallback logs what it escalated, ``tensorcode repair``
reads the log and saves a revised router."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tensorcode.cli import main as cli_main
from tensorcode.distill import Distillation, tickets
from tensorcode.errors import TensorCodeError
from tensorcode.integrations import load_replies, save_replies
from tensorcode.serve.escalations import (
    EscalationLog,
    read_escalations,
    repair_cases,
    rotated_files,
)

from .conftest import running_server

ZERO = [0.0] * 12


def record(i: int) -> dict:
    return {"router": "tickets", "inputs": {"features": [float(i % 2)] * 12},
            "target": {"route": float(i % 4)}, "reason": "abstained", "n": i}


def test_records_come_back_in_order_across_rotations(tmp_path):
    path = tmp_path / "log" / "escalations.jsonl"
    log = EscalationLog(path, max_bytes=2_000, keep=50, sync_every=7)
    for i in range(60):
        log.append(record(i))
    log.close()
    log.close()  # idempotent
    files = rotated_files(path)
    assert len(files) > 3 and files[-1] == path
    read = read_escalations(files)
    assert [r["n"] for r in read.records] == list(range(60)) and read.skipped == 0
    with pytest.raises(TensorCodeError, match="closed"):
        log.append(record(0))


def test_rotation_keeps_at_most_keep_files(tmp_path):
    path = tmp_path / "escalations.jsonl"
    log = EscalationLog(path, max_bytes=1_000, keep=2)
    for i in range(100):
        log.append(record(i))
    log.close()
    assert [p.name for p in rotated_files(path)] == [
        "escalations.jsonl.2", "escalations.jsonl.1", "escalations.jsonl"]


def test_a_torn_or_foreign_line_is_skipped_and_reported(tmp_path):
    path = tmp_path / "escalations.jsonl"
    log = EscalationLog(path)
    log.append(record(1))
    log.close()
    with open(path, "ab") as out:
        out.write(b'{"format": "other", "version": 1}\n')
        out.write(b'{"format": "tensorcode.escalation", "version": 1, "a": 1, "a": 2}\n')
        out.write(b'{"format": "tensorcode.escalation", "ver')  # a write cut short
    read = read_escalations([path])
    assert len(read.records) == 1 and read.skipped == 3
    assert any("torn" in p for p in read.problems)
    assert any("duplicate key" in p for p in read.problems)


def test_threads_lose_no_record(tmp_path):
    path = tmp_path / "escalations.jsonl"
    log = EscalationLog(path, max_bytes=50_000, keep=100, sync_every=16)
    threads = [threading.Thread(target=lambda t=t: [log.append(record(t * 1000 + k))
                                                    for k in range(400)]) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    numbers = sorted(r["n"] for r in read_escalations(rotated_files(path)).records)
    assert numbers == sorted(t * 1000 + k for t in range(8) for k in range(400))


def test_repair_cases_keep_answered_distinct_cases_of_the_router():
    records = [record(0), record(2), record(1), dict(record(3), router="other"),
               dict(record(5), target=None), dict(record(7), inputs={"features": [1, 2]})]
    chosen = repair_cases(records, "tickets", {"features": (12,)}, {"route": ()})
    assert len(chosen.cases) == 2 and chosen.duplicates == 1
    assert chosen.other_router == 1 and chosen.unanswered == 1 and len(chosen.invalid) == 1
    assert [t["route"].item() for t in chosen.targets] == [0.0, 1.0]


class Teacher(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint answering by the keyword policy; the first
    request gets a 503 (the client must retry), requests naming '"fail"' a 400."""

    calls = 0

    def do_POST(self):  # the http.server protocol names it
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Teacher.calls += 1
        if Teacher.calls == 1:
            self.send_response(503)
            self.end_headers()
            return
        prompt = body["messages"][-1]["content"]
        features = json.loads(re.search(r"Inputs: (\{.*?\})\n", prompt).group(1))["features"]
        groups = [sum(features[3 * r:3 * r + 3]) for r in range(4)]
        route = float(groups.index(max(groups)))
        reply = {"choices": [{"message": {"role": "assistant",
                                          "content": f'Sure: {{"route": {route}}}'},
                              "finish_reason": "stop"}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture()
def teacher():
    Teacher.calls = 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Teacher)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_escalations_reach_the_teacher_the_log_and_repair(ticket_dir, tmp_path, teacher,
                                                          capsys):
    log = tmp_path / "escalations.jsonl"
    with running_server([ticket_dir], tmp_path, "--fallback-url", teacher, "--fallback-model",
                        "teacher", "--fallback-retries", "2", "--escalation-log",
                        str(log)) as server:
        status, answer = server.request("POST", "/v1/routers/tickets", {"features": ZERO})
        assert status == 200
        assert answer == {"route": 0.0, "escalated": True, "reason": "abstained",
                          "answered_by": "fallback", "path": "fallback_abstained"}
        status, answers = server.request("POST", "/v1/routers/tickets/batch",
                                         [{"features": ZERO}, {"features": [1.0] + ZERO[1:]}])
        assert [a["escalated"] for a in answers] == [True, False]
        assert answers[0]["route"] == 0.0 and answers[1]["route"] == 0.0
        assert Teacher.calls == 3  # one 503 retried, then two answers
    records = read_escalations([log]).records
    assert len(records) == 2 and all(r["target"] == {"route": 0.0} for r in records)

    replies = tmp_path / "replies.json"
    save_replies(replies, [load_replies(tickets.replies_path())[-1]])
    out = tmp_path / "repaired"
    status = cli_main(["repair", str(ticket_dir), "--log", str(log), "--router", "tickets",
                       "--replies", str(replies), "--attempts", "1", "-o", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "1 answered cases to add" in printed and "1 repeated" in printed
    summary = Distillation.load(out).report["repair"]
    # the all-zero ticket is also a hidden acceptance case, so repair holds it back
    assert summary["offered"] == 1 and summary["added"] + summary["excluded_hidden"] == 1


def test_repair_without_answered_cases_says_what_to_do(ticket_dir, tmp_path, capsys):
    log = tmp_path / "escalations.jsonl"
    EscalationLog(log).close()
    status = cli_main(["repair", str(ticket_dir), "--log", str(log), "--replies",
                       str(tickets.replies_path()), "-o", str(tmp_path / "out")])
    assert status == 1
    assert "--fallback-url" in capsys.readouterr().err


def test_a_failing_teacher_is_an_answer_not_a_crash(ticket_dir, tmp_path):
    log = tmp_path / "escalations.jsonl"
    with running_server([ticket_dir], tmp_path, "--fallback-url", "http://127.0.0.1:9/v1",
                        "--fallback-model", "teacher", "--fallback-retries", "0",
                        "--fallback-timeout", "2", "--escalation-log", str(log)) as server:
        status, answer = server.request("POST", "/v1/routers/tickets", {"features": ZERO})
        assert status == 200 and answer["escalated"] is True and answer["route"] is None
        assert "connection failed" in answer["fallback_error"]
        metrics = server.metrics()
        assert metrics['tensorcode_router_errors_total{kind="fallback",router="tickets"}'] == 1
    (logged,) = read_escalations([log]).records
    assert logged["target"] is None and logged["answered_by"] is None

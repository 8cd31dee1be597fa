"""``tensorcode route``: every input line gets one answer line, whatever the line holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tensorcode.distill import distill
from tensorcode.distill.spec import EXAMPLE, EXAMPLE_INPUTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The language page's example router, distilled on the reference executor."""
    rng = np.random.default_rng(0)
    workload = [{"features": rng.integers(0, 2, 12).astype(np.float64)} for _ in range(16)]

    def teacher(case):
        f = case["features"]
        billing, technical, other = f[0:4].sum(), f[4:8].sum(), f[8:12].max()
        route = 0.0 if billing >= technical else 1.0
        return {"route": 2.0 if other > max(billing, technical) else route}

    result = distill("route tickets", EXAMPLE_INPUTS, workload, oracle=teacher,
                     author=lambda prompt: EXAMPLE, attempts=1, executor="reference")
    return result.save(tmp_path_factory.mktemp("router"))


def route(directory, data: bytes):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONIOENCODING="utf-8:strict")  # a strict text layer must not matter
    done = subprocess.run([sys.executable, "-m", "tensorcode.cli", "route", str(directory),
                           "--backend", "reference"], input=data, capture_output=True,
                          env=env, timeout=120)
    return done.returncode, done.stdout.decode().splitlines(), done.stderr.decode()


def test_D_every_line_gets_an_answer_or_an_error(saved):
    good = json.dumps({"features": [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]}).encode()
    lines = [
        b'{"features": [' + b"1" + b"0" * 400 + b", 0,0,0,0,0,0,0,0,0,0,0]}",  # OverflowError
        b"[" * 100_000 + b"]" * 100_000,  # RecursionError in a lenient parser
        b'{"features": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b"\xff\xfe{not utf-8",  # UnicodeDecodeError under a strict text layer
        b'{"features": [1e400, 0,0,0,0,0,0,0,0,0,0,0]}',
        b'{"features": ["1", 0,0,0,0,0,0,0,0,0,0,0]}',
        b"x" * ((1 << 20) + 10),  # longer than the line limit
        good,
    ]
    status, answers, err = route(saved, b"\n".join(lines) + b"\n")
    assert len(answers) == len(lines), err
    documents = [json.loads(a) for a in answers]
    kinds = ["not_finite", "json", "json", "json", "not_finite", "type", "too_large"]
    for number, (document, kind) in enumerate(zip(documents[:-1], kinds), start=1):
        assert document["error"]["message"].startswith(f"line {number}: "), document
        assert document["error"]["kind"] == kind, document
    assert documents[-1] == {"route": 1.0, "escalated": False, "path": "program"}
    assert all(document["path"] == "refused" for document in documents[:-1])
    assert status == 1 and "8 lines, 1 answered, 0 escalated" in err and "7 refused" in err


@pytest.mark.parametrize("body", [
    b'{"features": [1, 0]}',
    b'{"features": ["1", 0,0,0,0,0,0,0,0,0,0,0]}',
    b'{"features": [1e309, -1e309, 0,0,0,0,0,0,0,0,0,0]}',
    b'{"feature": [0,0,0,0,0,0,0,0,0,0,0,0]}',
    b'{"features": [0,0,0,0,0,0,0,0,0,0,0,0], "extra": 1}',
    b'[1, 2]',
    b'{"features": [0, 0',
    b'{"a": 1, "a": 2}',
])
def test_a_refused_line_carries_the_http_bodys_kind_and_field(saved, body):
    """One refusal format: a line ``tensorcode route`` refuses is the HTTP service's
    error body for the same request (the message led by the line number)."""
    from starlette.testclient import TestClient

    from tensorcode.serve import create_app

    status, answers, _ = route(saved, body + b"\n")
    line = json.loads(answers[0])
    with TestClient(create_app({"r": saved}, executor="reference")) as client:
        http = client.post("/v1/routers/r", content=body).json()
    assert status == 1 and line["path"] == http["path"] == "refused"
    assert set(line["error"]) == set(http["error"]) == {"kind", "field", "message"}
    assert (line["error"]["kind"], line["error"]["field"]) == (http["error"]["kind"],
                                                                http["error"]["field"])
    assert line["error"]["message"] == "line 1: " + http["error"]["message"]

"""The app ``tensorcode serve`` builds in each worker: from the command's settings, with
what it loaded kept out of the collector's full passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .conftest import ROOT

PROBE = """
import gc
from starlette.testclient import TestClient
from tensorcode.serve.factory import app_from_environment

app = app_from_environment()
frozen = gc.get_freeze_count()
# no lifespan: its SIGHUP handler needs the main thread, and TestClient runs the app in
# another one
answer = TestClient(app).post("/v1/routers/tickets", json={"features": [0, 0, 0, 1] + [0] * 8})
print(frozen, answer.json()["route"])
"""


def test_the_worker_app_answers_and_freezes_what_it_loaded(ticket_dir):
    settings = {"routers": {"tickets": str(ticket_dir)}, "executor": None,
                "max_body_bytes": 1 << 20, "max_batch": 100, "workers": 1}
    env = dict(os.environ, TENSORCODE_SERVE_SETTINGS=json.dumps(settings),
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=300, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    frozen, route = done.stdout.split()
    assert int(frozen) > 1000 and float(route) == 1.0

"""Serving the distilled ticket router over HTTP on the loopback interface.

Three servers, each in its own process under uvicorn with the same settings (one worker,
no access log), measured by the same client in alternating rounds: ``tensorcode serve``
of the saved router (the baseline); a minimal Starlette app that answers a constant JSON
document (the HTTP stack's own limit: single requests should reach at least 0.8x its
rate); and a minimal FastAPI app (Starlette when FastAPI is not installed; the note says
which) that parses the body with ``request.json()`` and calls the reference executor.
Workloads:

- single requests from one client: p50 and p99 latency (microseconds, client side);
- single requests from 8 concurrent clients: requests per second, and the server
  process's CPU time per request over that phase (``/proc``; what a request costs the
  server, which load from other processes on a shared machine changes far less);
- the batch endpoint at 1,000 cases per request: cases per second, with the features
  sent as JSON integers 0/1, again as floats printed with 17 significant digits, and (to
  ``tensorcode serve`` alone) as a safetensors body of one float64 tensor, timed in
  turn with the JSON bodies on the same connection; for that body also the server
  process's and the client thread's CPU time per batch, which say whose share the
  wall time is.

The clients are raw keep-alive sockets with prepared request bytes in threads of this
process, so they cost as little as a Python client can; on a small machine they share
the CPUs with the server, which the figures include.

In process, alternated the same way and timed in CPU time of the thread, where a
request's time goes: one single request
through the service's ASGI callable against the constant Starlette app's, and the
stages of a batch of 1,000 (reading the body through orjson against the strict reader
and as a safetensors body, the plan's batch call, rendering the answers) and a whole
batch request through the ASGI callable with each body.
"""

from __future__ import annotations

import functools
import json
import math
import os
import pathlib
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from .harness import Row, module_available

SUITE = "serve"
ROOT = pathlib.Path(__file__).resolve().parents[1]
CLIENTS = 8
BATCH = 1000
#: the slow-clients row: servers whose open-file limit is 256, held by 300 slow
#: connections while 20 normal requests are sent (10 s at most)
SLOW_OPEN_FILES = 256
SLOW_CONNECTIONS = 300
SLOW_NORMAL = 20
SLOW_BUDGET_S = 10.0
FEATURES = [0.0, 0.0, 0.0, 1.0] + [0.0] * 8

PEER_APP = '''
import numpy as np
from {framework} import {cls}
from starlette.requests import Request
from starlette.responses import JSONResponse
from tensorcode.distill import Distillation

program = Distillation.load({directory!r}, executor="reference").program


def answer(route, covered):
    if covered == 0.0:
        return {{"route": None, "escalated": True, "reason": "abstained"}}
    return {{"route": route, "escalated": False, "reason": None}}


async def one(request: Request):
    body = await request.json()
    out = program({{"features": np.asarray(body["features"], dtype=np.float64)}})
    return JSONResponse(answer(float(out["route"]), float(out["covered"])))


async def batch(request: Request):
    body = await request.json()
    out = program.batch({{"features": np.asarray([c["features"] for c in body],
                                                 dtype=np.float64)}})
    return JSONResponse([answer(r, c) for r, c in zip(out["route"].tolist(),
                                                      out["covered"].tolist())])

app = {cls}()
app.add_route("/v1/routers/tickets", one, methods=["POST"])
app.add_route("/v1/routers/tickets/batch", batch, methods=["POST"])
app.add_route("/readyz", lambda request: JSONResponse({{"status": "ready"}}), methods=["GET"])
'''


CONSTANT_APP = '''
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ANSWER = {"route": 1.0, "escalated": False, "reason": None, "path": "program"}
# a batch's answers, prepared once: 1,000 such documents
ANSWERS = ("[" + ",".join(['{"route":1.0,"escalated":false,"reason":null,'
                           '"path":"program"}'] * 1000) + "]").encode()


async def one(request):
    await request.body()
    return JSONResponse(ANSWER)


async def batch(request):
    await request.body()
    return Response(ANSWERS, media_type="application/json")


async def ready(request):
    return JSONResponse({"status": "ready"})

app = Starlette(routes=[Route("/v1/routers/tickets", one, methods=["POST"]),
                        Route("/v1/routers/tickets/batch", batch, methods=["POST"]),
                        Route("/readyz", ready, methods=["GET"])])
'''


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Client:
    """One keep-alive connection sending prepared requests and reading whole answers."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def send(self, request: bytes) -> bytes:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            self.buffer = rest
            self._fill()
            rest = self.buffer
        self.buffer = rest[length:]
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"the server answered {head[:40]!r}")
        return rest[:length]

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()


def _request(path: str, body: bytes, content_type: str = "application/json") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _batch_rows() -> list[list[int]]:
    """The benchmark's 1,000 cases: the bits of their index as the 12 features."""
    return [[(i >> b) & 1 for b in range(12)] for i in range(BATCH)]


def _safetensors_body(rows: list[list[int]]) -> bytes:
    """The cases as a safetensors batch body: one float64 tensor ``[cases, 12]``."""
    import numpy as np
    from safetensors.numpy import save

    return save({"features": np.asarray(rows, dtype=np.float64)})


def _start(command: list[str], port: int, cwd: str, log: pathlib.Path,
           open_files: int | None = None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    limit = None if open_files is None else functools.partial(_limit_open_files, open_files)
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, preexec_fn=limit)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
                probe.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
                if probe.recv(64).startswith(b"HTTP/1.1 200"):
                    return process
        except OSError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server was not ready within 180 s")


def _limit_open_files(count: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (count, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def _answered_beside_slow_clients(port: int) -> float:
    """The share of normal requests answered 200 while ``SLOW_CONNECTIONS`` connections
    hold a request's headers and 5 of its 1,000 body bytes (each normal request on a new
    connection, 2 s at most; ``SLOW_BUDGET_S`` in all)."""
    slow = []
    answered = attempted = 0
    try:
        for _ in range(SLOW_CONNECTIONS):
            try:
                client = socket.create_connection(("127.0.0.1", port), timeout=2)
                slow.append(client)
                client.sendall(b"POST /v1/routers/tickets HTTP/1.1\r\nHost: b\r\n"
                               b"Content-Length: 1000\r\n\r\n{\"fea")
            except OSError:
                pass
        single = _request("/v1/routers/tickets", json.dumps({"features": FEATURES}).encode())
        deadline = time.monotonic() + SLOW_BUDGET_S
        while attempted < SLOW_NORMAL and time.monotonic() < deadline:
            attempted += 1
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as client:
                    client.sendall(single)
                    answered += client.recv(64).startswith(b"HTTP/1.1 200")
            except OSError:
                pass
    finally:
        for client in slow:
            client.close()
    return answered / max(attempted, 1)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=20)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds the process ``pid`` has run (Linux ``/proc``): the scheduler's count
    in nanoseconds of its threads, else user and system time in clock ticks."""
    total = 0
    try:
        for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
            total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(port: int, quick: bool, pid: int | None = None, binary: bool = False
             ) -> dict[str, float]:
    from tensorcode.serve.binary import MEDIA_TYPE

    single = _request("/v1/routers/tickets",
                      json.dumps({"features": [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]}).encode())
    rows = _batch_rows()
    batch = _request("/v1/routers/tickets/batch",
                     json.dumps([{"features": r} for r in rows]).encode())
    # the same cases with each number nudged by a few units of 2**-50: floats printed
    # with 16-17 digits
    floats = _request("/v1/routers/tickets/batch", json.dumps(
        [{"features": [v + 2.0 ** -50 * (1 + (i * 7 + j) % 13) for j, v in enumerate(r)]}
         for i, r in enumerate(rows)]).encode())
    tensors = _request("/v1/routers/tickets/batch", _safetensors_body(rows), MEDIA_TYPE)
    latency_n, per_client, batches = (200, 100, 20) if quick else (1000, 500, 50)

    client = Client(port)
    for _ in range(50):
        client.send(single)
    samples = []
    for _ in range(latency_n):
        start = time.perf_counter()
        client.send(single)
        samples.append(time.perf_counter() - start)
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(0.99 * len(samples)))]

    # the batch bodies in turn on one connection: cases per second, and per batch the
    # server process's CPU time and this client thread's (sending, reading the answer)
    figures = dict.fromkeys(["batch", "floats", "binary", "batch_server_cpu",
                             "binary_server_cpu", "binary_client_cpu"], math.nan)
    bodies = {"batch": batch, "binary": tensors, "floats": floats}
    if not binary:
        del bodies["binary"]
    readable = pid is not None and os.path.exists(f"/proc/{pid}/stat")
    for name, body in bodies.items():
        expected = client.send(body)
        assert len(json.loads(expected)) == BATCH
        cpu_before = _cpu_seconds(pid) if readable and pid is not None else math.nan
        client_before = time.thread_time()
        start = time.perf_counter()
        for _ in range(batches):
            answers = client.send(body)
        figures[name] = batches * BATCH / (time.perf_counter() - start)
        figures[f"{name}_client_cpu"] = (time.thread_time() - client_before) / batches * 1e6
        if readable and pid is not None:
            figures[f"{name}_server_cpu"] = (_cpu_seconds(pid) - cpu_before) / batches * 1e6
        assert answers == expected
    client.close()

    clients = [Client(port) for _ in range(CLIENTS)]
    barrier = threading.Barrier(CLIENTS + 1)
    failures: list[BaseException] = []

    def load(c: Client) -> None:
        try:
            barrier.wait()
            for _ in range(per_client):
                c.send(single)
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=load, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    readable = pid is not None and os.path.exists(f"/proc/{pid}/stat")
    cpu_before = _cpu_seconds(pid) if readable and pid is not None else 0.0
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    rate = CLIENTS * per_client / (time.perf_counter() - start)
    cpu = (_cpu_seconds(pid) - cpu_before) / (CLIENTS * per_client) * 1e6 \
        if readable and pid is not None else math.nan
    for c in clients:
        c.close()
    if failures:
        raise failures[0]
    return {"p50": p50 * 1e6, "p99": p99 * 1e6, "rate": rate, "cpu": cpu, **figures}


def _asgi_call(app, path: str, body: bytes, content_type: str = "application/json"):
    """One request through an ASGI callable, with the messages uvicorn would send."""
    headers = [(b"host", b"127.0.0.1"), (b"content-type", content_type.encode()),
               (b"content-length", str(len(body)).encode())]
    message = {"type": "http.request", "body": body, "more_body": False}

    async def receive():
        return message

    async def send(_):
        pass

    async def call():
        await app({"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                   "method": "POST", "scheme": "http", "path": path,
                   "raw_path": path.encode(), "query_string": b"", "root_path": "",
                   "headers": headers, "client": ("127.0.0.1", 1),
                   "server": ("127.0.0.1", 8000), "state": {}}, receive, send)
    return call


def _in_process(directory: pathlib.Path, quick: bool) -> list[Row]:
    """Per-request and per-stage costs measured in this process, alternated in rounds."""
    import asyncio

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tensorcode.distill.inputs import _strict_document, check_batch, read_batch
    from tensorcode.serve import create_app
    from tensorcode.serve.answers import render_batch
    from tensorcode.serve.binary import MEDIA_TYPE

    app = create_app({"tickets": directory})
    served = app.state.service.routers.get("tickets")
    answer = {"route": 1.0, "escalated": False, "reason": None, "path": "program"}

    async def constant(request):
        await request.body()
        return JSONResponse(answer)

    constant_app = Starlette(routes=[Route("/v1/routers/tickets", constant,
                                           methods=["POST"])])
    single = json.dumps({"features": [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]}).encode()
    rows = _batch_rows()
    body = json.dumps([{"features": r} for r in rows]).encode()
    binary = _safetensors_body(rows)
    batch_call = _asgi_call(app, "/v1/routers/tickets/batch", body)
    binary_call = _asgi_call(app, "/v1/routers/tickets/batch", binary, MEDIA_TYPE)
    ours_call = _asgi_call(app, "/v1/routers/tickets", single)
    constant_call = _asgi_call(constant_app, "/v1/routers/tickets", single)
    stacked = served.read_batch(body, 1 << 22, BATCH)
    columns, reasons = served.decide_columns(stacked)
    program = served.distillation.program
    limit = 1 << 22
    loop = asyncio.new_event_loop()

    def requests(call, n=200):
        async def many():
            for _ in range(n):
                await call()
        return lambda: loop.run_until_complete(many())

    stages = {
        "ours": (requests(ours_call), 200),
        "constant": (requests(constant_call), 200),
        "orjson read": (lambda: read_batch(body, served.inputs, limit, BATCH), 1),
        "strict read": (lambda: check_batch(_strict_document(body, limit), served.inputs), 1),
        "safetensors read": (lambda: served.read_safetensors_batch(binary, limit, BATCH), 1),
        "plan": (lambda: program.batch(stacked), 1),
        "decide": (lambda: served.decide_columns(stacked), 1),
        "render": (lambda: render_batch(served.outputs, columns, BATCH, {}), 1),
        "json batch request": (requests(batch_call, 1), 1),
        "safetensors batch request": (requests(binary_call, 1), 1),
    }
    times: dict[str, list[float]] = {name: [] for name in stages}
    try:
        for fn, _ in stages.values():
            fn()
        for _ in range(5 if quick else 15):
            for name, (fn, per) in stages.items():
                start = time.thread_time()
                for _ in range(3):
                    fn()
                times[name].append((time.thread_time() - start) / 3 / per * 1e6)
    finally:
        loop.close()
        app.state.service.close()

    def median(name: str) -> float:
        return statistics.median(times[name])

    note = ("in process, CPU time of the measuring thread (load from other processes "
            "falls out), median of alternated rounds")
    escalated = f"; {len(reasons)} of {BATCH} cases escalate" if reasons else ""
    return [
        Row(SUITE, "single request through the ASGI app", "tensorcode", median("ours"),
            note=note + "; body read, decode, validation, compiled call, metrics, answer"),
        Row(SUITE, "single request through the ASGI app", "Starlette constant",
            median("constant"), note=note + "; Starlette's routing, Request, JSONResponse "
                                            "of a constant"),
        Row(SUITE, "batch of 1000: read the body", "tensorcode", median("orjson read"),
            note=note + "; orjson objects, then NumPy (what the service does)"),
        Row(SUITE, "batch of 1000: read the body", "strict reader", median("strict read"),
            note=note + "; the package's strict reader and validator"),
        Row(SUITE, "batch of 1000: read the body", "safetensors body",
            median("safetensors read"),
            note=note + f"; {len(binary):,} bytes, one float64 tensor [1000, 12] "
                        "(safetensors.deserialize, the strict header check, the "
                        "contract's rules, NumPy views)"),
        Row(SUITE, "batch of 1000: plan's batch call", "tensorcode", median("plan"),
            note=note),
        Row(SUITE, "batch of 1000: decide (plan call + claims)", "tensorcode",
            median("decide"), note=note + escalated),
        Row(SUITE, "batch of 1000: render the answers", "tensorcode", median("render"),
            note=note),
        Row(SUITE, "batch of 1000 through the ASGI app", "JSON body", median(
            "json batch request"), note=note + f"; {len(body):,} bytes, the whole request "
                                               "without uvicorn"),
        Row(SUITE, "batch of 1000 through the ASGI app", "safetensors body", median(
            "safetensors batch request"), note=note + f"; {len(binary):,} bytes"),
    ]


def run(quick: bool) -> list[Row]:
    from tensorcode.distill import tickets

    work = tempfile.mkdtemp(prefix="tensorcode-bench-serve-")
    directory = pathlib.Path(work) / "tickets"
    tickets.run_example(directory)
    framework, cls = ("fastapi", "FastAPI") if module_available("fastapi") else (
        "starlette.applications", "Starlette")
    peer_name = f"{cls} + reference"
    (pathlib.Path(work) / "peer_app.py").write_text(
        PEER_APP.format(framework=framework, cls=cls, directory=str(directory)))
    (pathlib.Path(work) / "constant_app.py").write_text(CONSTANT_APP)
    servers: dict[str, tuple[subprocess.Popen, int]] = {}
    try:
        port = _free_port()
        servers["tensorcode"] = (_start(
            [sys.executable, "-c", ("import sys; from tensorcode.cli import main; "
                                    "sys.exit(main())"), "serve", str(directory), "--port",
             str(port)], port, work, pathlib.Path(work) / "tensorcode.log"), port)
        for name, module in (("constant", "constant_app"), ("peer", "peer_app")):
            port = _free_port()
            servers[name] = (_start(
                [sys.executable, "-m", "uvicorn", f"{module}:app", "--port", str(port),
                 "--no-access-log", "--log-level", "warning"], port, work,
                pathlib.Path(work) / f"{name}.log"), port)
        # the same client against each server in turn, round after round, so that load
        # from elsewhere on a shared machine falls on all of them alike
        rounds = 3 if quick else 5
        measured: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        for _ in range(rounds):
            for name, (process, port) in servers.items():
                measured[name].append(_measure(port, quick, process.pid,
                                               binary=name != "peer"))
        # slow clients: more held connections than the server may open files
        answered = {}
        for name, command in (
                ("tensorcode", [sys.executable, "-c", ("import sys; from tensorcode.cli import "
                                                       "main; sys.exit(main())"), "serve",
                                str(directory)]),
                ("constant", [sys.executable, "-m", "uvicorn", "constant_app:app",
                              "--no-access-log", "--log-level", "warning"])):
            port = _free_port()
            process = _start([*command, "--port", str(port)], port, work,
                             pathlib.Path(work) / f"slow-{name}.log", SLOW_OPEN_FILES)
            try:
                answered[name] = 100 * _answered_beside_slow_clients(port)
            finally:
                _stop(process)
    finally:
        for process, _ in servers.values():
            _stop(process)

    def median(name: str, key: str) -> float:
        return statistics.median(m[key] for m in measured[name])

    note = (f"loopback, 1 uvicorn worker, {os.cpu_count()} CPUs shared with the clients, "
            f"median of {rounds} alternated rounds")
    constant_note = ("minimal Starlette app answering a constant JSON document (reads the "
                     "body, parses nothing): the HTTP stack's own limit; target: tensorcode "
                     ">= 0.8x its rate")
    constant_batch_note = ("the same minimal Starlette app's batch route: reads the body, "
                           "parses nothing, sends 1,000 prepared answers of the same size: "
                           "the HTTP stack's own limit for this batch")
    peer_note = f"minimal {cls} app, request.json(), reference executor"
    rows = []
    for key, workload, unit, lower in [
            ("p50", "single request p50", "us", True),
            ("p99", "single request p99", "us", True),
            ("rate", f"single requests, {CLIENTS} clients", "req/s", False),
            ("cpu", f"server CPU per single request, {CLIENTS} clients", "us", True),
            ("batch", f"batch endpoint, {BATCH} cases", "cases/s", False),
            ("floats", f"batch endpoint, {BATCH} cases of 17-digit floats", "cases/s",
             False),
            ("binary", f"batch endpoint, {BATCH} cases as a safetensors body", "cases/s",
             False),
            ("batch_server_cpu", f"server CPU per batch of {BATCH}, JSON integers", "us",
             True),
            ("binary_server_cpu", f"server CPU per batch of {BATCH}, safetensors body",
             "us", True),
            ("binary_client_cpu", f"client CPU per batch of {BATCH}, safetensors body",
             "us", True)]:
        ours = median("tensorcode", key)
        extra_note = ""
        if key == "rate":
            extra_note = f"; {ours / median('constant', key):.2f}x the constant app's rate"
        elif key == "cpu":
            extra_note = ("; the server process's CPU time over the 8-client phase per "
                          "request (load from other processes mostly falls out)")
        elif key == "batch":
            extra_note = ("; target >= 1,000,000 cases/s; numbers written as JSON "
                          "integers 0/1")
        elif key == "floats":
            extra_note = "; the same cases as floats of 17 significant digits"
        elif key == "binary":
            extra_note = ("; target >= 1,000,000 cases/s; Content-Type: "
                          "application/vnd.safetensors, one float64 tensor [1000, 12]; "
                          "JSON answers; timed in turn with the JSON bodies")
        elif key.endswith("_cpu"):
            extra_note = ("; the server process's CPU time (/proc) and the client "
                          "thread's (sending the body, reading the whole answer) per "
                          "batch over that phase")
        rows.append(Row(SUITE, workload, "tensorcode", ours, unit, lower_is_better=lower,
                        baseline=True, note=note + extra_note))
        batch_key = key in ("batch", "floats", "binary") or key.endswith("_cpu")
        rows.append(Row(SUITE, workload, "Starlette constant", median("constant", key),
                        unit, lower_is_better=lower,
                        note=constant_batch_note if batch_key else constant_note))
        if key.startswith("binary") or key.endswith("_cpu"):
            continue  # the peer reads JSON only; its CPU figures would say nothing new
        rows.append(Row(SUITE, workload, peer_name, median("peer", key), unit,
                        lower_is_better=lower, note=peer_note))
    slow_workload = (f"requests answered beside {SLOW_CONNECTIONS} slow connections, "
                     f"open-file limit {SLOW_OPEN_FILES}")
    slow_note = ("each slow connection sent headers and 5 of 1,000 body bytes; "
                 f"{SLOW_NORMAL} normal requests on new connections, 2 s each at most")
    rows.append(Row(SUITE, slow_workload, "tensorcode", answered["tensorcode"], "%",
                    lower_is_better=False, baseline=True,
                    note=slow_note + "; tensorcode serve's connection cap (128 here) "
                    "closes the longest-waiting connection for a new one"))
    rows.append(Row(SUITE, slow_workload, "Starlette constant", answered["constant"], "%",
                    lower_is_better=False,
                    note=slow_note + "; the minimal Starlette app under uvicorn's own "
                    "protocol, which accepts until the open-file limit"))
    return rows + _in_process(directory, quick)

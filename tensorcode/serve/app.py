"""The ASGI application: routers over HTTP, built on Starlette.

Endpoints (all JSON except ``/metrics``):

- ``POST /v1/routers/{name}``: one object of inputs -> the outputs, ``escalated`` and
  ``reason`` (``null`` when the program answered);
- ``POST /v1/routers/{name}/batch``: an array of cases -> the answers, in order, through
  the plan's batch path; with ``Content-Type: application/vnd.safetensors`` the cases
  come as one tensor per input (``serve.binary``) and the answers are the same JSON;
- ``GET /v1/routers``, ``GET /healthz``, ``GET /readyz``, ``GET /metrics``;
- ``POST /admin/reload`` with ``Authorization: Bearer <admin token>``.

A request is refused with a 4xx JSON error ``{"error": {"kind", "field", "message"}}``
before the program runs; a refused request is counted as an error, never as an
escalation. The compiled call runs on the event loop (it takes microseconds, far less
than a thread hand-off); loading artifacts and synchronous fallbacks run in threads.
The app holds no state that needs its lifespan, so it works mounted inside another
Starlette or FastAPI application; call ``app.state.service.close()`` at shutdown to sync
the escalation log (it is also synced at interpreter exit).
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import logging
import math
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from time import perf_counter
from typing import Any

import numpy as np

from ..distill.inputs import InputError, read_document
from ..distill.router import REFUSED, path_of
from ..errors import TensorCodeError
from ..extras import require
from .answers import dumps, render_batch
from .binary import is_safetensors
from .escalations import EscalationLog
from .metrics import UNKNOWN, Metrics, reason_class
from .reload import Routers, Source
from .rolling import read_state
from .served import ServedRouter, answer_document, json_value

LOGGER = logging.getLogger("tensorcode.serve")

#: request bodies larger than this are refused (413) unless ``max_body_bytes`` says otherwise
MAX_BODY_BYTES = 4 << 20
#: the most cases one batch request may hold
MAX_BATCH = 10_000

#: the ``fallback_error`` of an escalated answer when no teacher is configured
NO_FALLBACK = "no fallback is configured"

#: seconds between two log lines about escalation records that could not be written
LOG_FAILURE_REPORT_S = 10.0

#: the prefix of the router endpoints' paths, which ``answer_hot`` serves
ROUTERS_PREFIX = "/v1/routers/"
JSON_CONTENT_TYPE = (b"content-type", b"application/json")

#: HTTP status for each kind of refused input
STATUS = {"json": 400, "safetensors": 400, "not_object": 400, "too_large": 413,
          "too_many": 413}

Fallback = Callable[[ServedRouter, Mapping[str, np.ndarray]], Any]


class Service:
    """What the endpoints share: the routers, the fallback, the log, the metrics."""

    def __init__(self, routers: Routers, fallback: Fallback | None = None,
                 escalation_log: EscalationLog | None = None, admin_token: str | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES, max_batch: int = MAX_BATCH,
                 rolling_reloads: str | os.PathLike | None = None) -> None:
        if fallback is not None and not callable(fallback):
            raise TensorCodeError(f"the fallback must be callable as fallback(router, inputs) "
                                  f"(sync or async), got {type(fallback).__name__}")
        if admin_token is not None and (not isinstance(admin_token, str) or len(admin_token) < 16):
            raise TensorCodeError("the admin token must be text of at least 16 characters")
        self.routers = routers
        self.fallback = fallback
        self.log = escalation_log
        self.admin_token = admin_token
        self.max_body_bytes = int(max_body_bytes)
        self.max_batch = int(max_batch)
        self.rolling = rolling_reloads
        self.metrics = Metrics(rolling_reloads)
        self.last_reloads: dict[str, dict[str, Any]] = {}
        self._lost_records = 0
        self._last_log_report = -math.inf
        self._async_fallback = fallback is not None and (
            inspect.iscoroutinefunction(fallback)
            or inspect.iscoroutinefunction(type(fallback).__call__))

    async def reload(self, names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Reload routers in a worker thread (loading compiles; serving goes on)."""
        anyio = require("anyio")
        outcomes = await anyio.to_thread.run_sync(self.routers.reload, names)
        self.last_reloads.update(outcomes)
        for name, outcome in outcomes.items():
            self.metrics.reloads.labels(name, outcome["outcome"]).inc()
            log = LOGGER.warning if outcome["outcome"] == "failed" else LOGGER.info
            log("reload of router %s: %s%s", name, outcome["outcome"],
                f" ({outcome['reason']})" if outcome.get("reason") else "")
        return outcomes

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

    def _append(self, record: dict[str, Any], router: str) -> None:
        """Append to the escalation log; a failed write (a full disk, an I/O error) loses
        that record, never the answer: it is counted, and logged at most every
        ``LOG_FAILURE_REPORT_S`` seconds with the count since the last report."""
        assert self.log is not None
        try:
            self.log.append(record)
        except (OSError, TensorCodeError) as error:
            self.metrics.log_failures.labels(router).inc()
            self._lost_records += 1
            now = time.monotonic()
            if now - self._last_log_report >= LOG_FAILURE_REPORT_S:
                LOGGER.error("escalation log %s: a record was not written (%s); %d lost "
                             "since the last report, the answers still went out",
                             self.log.path, error, self._lost_records)
                self._last_log_report = now
                self._lost_records = 0

    def unanswered(self, served: ServedRouter, reasons: Mapping[int, str]
                   ) -> dict[int, bytes]:
        """What ``escalate`` answers for each of a batch's escalated cases when there is
        neither a teacher nor a log (nothing to wait for or record per case): each
        reason's document rendered once and counted once per reason."""
        assert self.fallback is None and self.log is None
        name = served.name
        rendered: dict[str, bytes] = {}
        counts: dict[str, int] = {}
        for reason in reasons.values():
            counts[reason] = counts.get(reason, 0) + 1
        for reason, count in counts.items():
            path = path_of(reason)
            self.metrics.escalations.labels(name, reason_class(reason)).inc(count)
            self.metrics.paths.labels(name, path).inc(count)
            document: dict[str, Any] = dict.fromkeys(served.outputs)
            document.update(escalated=True, reason=reason, path=path, answered_by=None,
                            fallback_error=NO_FALLBACK)
            rendered[reason] = dumps(document)
        return {i: rendered[reason] for i, reason in reasons.items()}

    async def escalate(self, served: ServedRouter, case: Mapping[str, np.ndarray],
                       reason: str | None) -> dict[str, Any]:
        """The answer for a case the program did not claim: the fallback's (or none),
        after the case is appended to the escalation log."""
        name = served.name
        self.metrics.escalations.labels(name, reason_class(reason)).inc()
        target = None
        failure = None
        if self.fallback is not None:
            try:
                if self._async_fallback:
                    produced = await self.fallback(served, case)
                else:
                    anyio = require("anyio")
                    produced = await anyio.to_thread.run_sync(self.fallback, served, case)
                if inspect.isawaitable(produced):
                    produced = await produced
                target = {k: json_value(produced[k]) for k in served.outputs}
            except Exception as error:  # the teacher failing is an answer, not a crash
                failure = f"{type(error).__name__}: {error}"
                self.metrics.errors.labels(name, "fallback").inc()
        if self.log is not None:
            self._append({"time": time.time(), "router": name,
                          "artifact_sha256": served.artifact_sha256,
                          "inputs": {k: v.tolist() for k, v in case.items()},
                          "target": target, "reason": reason,
                          "answered_by": "fallback" if target is not None else None}, name)
        path = path_of(reason)
        self.metrics.paths.labels(name, path).inc()
        document: dict[str, Any] = {k: (None if target is None else target[k])
                                    for k in served.outputs}
        document.update(escalated=True, reason=reason, path=path,
                        answered_by="fallback" if target is not None else None)
        if failure is not None:
            document["fallback_error"] = failure
        elif self.fallback is None:
            document["fallback_error"] = NO_FALLBACK
        return document


def create_app(routers: Routers | Mapping[str, Source] | Iterable[str | os.PathLike],
               fallback: Fallback | None = None,
               escalation_log: EscalationLog | str | os.PathLike | None = None,
               admin_token: str | None = None, *, max_body_bytes: int = MAX_BODY_BYTES,
               max_batch: int = MAX_BATCH, executor: str | None = None,
               reload_on_sighup: bool = False,
               rolling_reloads: str | os.PathLike | None = None) -> Any:
    """A Starlette application serving ``routers``.

    ``routers``: directories written by ``Distillation.save`` (named after the
    directory), a mapping of names to directories or ``Distillation`` objects, or a
    ``Routers``. ``fallback``: ``None``, a ``TeacherFallback``, or any callable
    ``fallback(router, inputs) -> {output: value}`` (async or not) for escalated cases.
    ``escalation_log``: an ``EscalationLog`` or a path for one. ``admin_token``: the
    bearer token ``POST /admin/reload`` requires (without one, reload over HTTP is off).
    ``reload_on_sighup`` installs a SIGHUP handler while the app's lifespan runs.
    ``rolling_reloads`` (set by ``tensorcode serve --workers N``) is the supervisor's
    record of rolling reloads: ``POST /admin/reload`` then asks the supervisor to replace
    every worker (202) and ``GET /admin/reload`` and ``/metrics`` report the outcomes.
    """
    starlette_app = require("starlette.applications")
    require("prometheus_client")
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    held = routers if isinstance(routers, Routers) else Routers(routers, executor=executor)
    if escalation_log is not None and not isinstance(escalation_log, EscalationLog):
        escalation_log = EscalationLog(escalation_log)
    service = Service(held, fallback, escalation_log, admin_token, max_body_bytes, max_batch,
                      rolling_reloads)
    metrics = service.metrics

    def refuse(error: InputError, router: str) -> Response:
        metrics.errors.labels(router, error.kind).inc()
        metrics.paths.labels(router, REFUSED).inc()
        return _error(JSONResponse, STATUS.get(error.kind, 422), error.kind, str(error),
                      error.field, path=REFUSED)

    def unknown(name: str) -> Response:
        metrics.errors.labels(UNKNOWN, "unknown_router").inc()
        return _error(JSONResponse, 404, "unknown_router",
                      f"no router named {name!r}; serving {held.names()}", None)

    async def answer_one(name: str, scope: Any, receive: Any) -> Any:
        """``POST /v1/routers/{name}``: the answer's bytes, a refusal's response, or
        ``None`` when the client left before its body was read."""
        served = held.get(name)
        if served is None:
            return unknown(name)
        try:
            body = await _receive_body(scope, receive, service.max_body_bytes)
        except InputError as error:
            return refuse(error, name)
        if body is None:
            return None
        start = perf_counter()
        fast = served.single_answer
        answer = None if fast is None else fast.answer(body)
        if answer is not None:
            metrics.served(name, "single").record(1, 1, perf_counter() - start)
            return answer
        try:  # the general path: the shared validator, which refuses with its message
            case = served.check(read_document(body, service.max_body_bytes))
        except InputError as error:
            return refuse(error, name)
        decision, reason = served.answer(case)
        if decision is None:
            document = await service.escalate(served, case, reason)
        else:
            document = answer_document(decision)
        answer = dumps(document)
        metrics.served(name, "single").record(1, decision is not None,
                                              perf_counter() - start)
        return answer

    async def answer_batch(name: str, scope: Any, receive: Any) -> Any:
        """``POST /v1/routers/{name}/batch``: as ``answer_one``, for an array of cases
        answered through the plan's batch path in one call."""
        served = held.get(name)
        if served is None:
            return unknown(name)
        try:
            body = await _receive_body(scope, receive, service.max_body_bytes)
            if body is None:
                return None
            start = perf_counter()
            read = (served.read_safetensors_batch if _sends_safetensors(scope)
                    else served.read_batch)
            stacked = read(body, service.max_body_bytes, service.max_batch)
        except InputError as error:
            return refuse(error, name)
        columns, reasons = served.decide_columns(stacked)
        count = len(next(iter(stacked.values()))) if stacked else 0
        escalated: dict[int, bytes] = {}
        if reasons and service.fallback is None and service.log is None:
            escalated = service.unanswered(served, reasons)
        elif reasons:
            pending = [(i, service.escalate(served, {k: v[i] for k, v in stacked.items()},
                                            reason)) for i, reason in reasons.items()]
            done = await asyncio.gather(*(job for _, job in pending))
            escalated = {i: dumps(document) for (i, _), document in zip(pending, done)}
        answers = render_batch(served.outputs, columns, count, escalated)
        metrics.served(name, "batch").record(count, count - len(escalated),
                                             perf_counter() - start)
        return answers

    def internal(error: Exception, path: str) -> Response:
        LOGGER.error("unhandled error serving %s", path, exc_info=error)
        metrics.errors.labels(UNKNOWN, "internal").inc()
        return _error(JSONResponse, 500, "internal",
                      f"the server failed ({type(error).__name__}); see its log", None)

    async def answer_hot(scope: Any, receive: Any, send: Any) -> bool:
        """The two router endpoints, answered as bare ASGI before Starlette's routing
        (whose routing, ``Request``, ``Response`` and middleware cost several times the
        compiled call); ``False`` for any other request, which Starlette serves."""
        path = _route_path(scope)
        if not path.startswith(ROUTERS_PREFIX):
            return False
        name = path[len(ROUTERS_PREFIX):]
        handler = answer_one
        if name.endswith("/batch"):
            name, handler = name[:-6], answer_batch
        if not name or "/" in name:
            return False
        try:
            outcome = await handler(name, scope, receive)
        except Exception as error:  # what Starlette's handler would answer: a logged 500
            outcome = internal(error, path)
        if type(outcome) is bytes:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", str(len(outcome)).encode()),
                                    JSON_CONTENT_TYPE]})
            await send({"type": "http.response.body", "body": outcome})
        elif outcome is not None:
            await outcome(scope, receive, send)
        return True

    async def route_one(request: Request) -> Response:
        """Starlette's route for what ``answer_hot`` answers (reached only when the app
        is called through its router directly)."""
        return _response(await answer_one(request.path_params["name"], request.scope,
                                          request.receive))

    async def route_batch(request: Request) -> Response:
        return _response(await answer_batch(request.path_params["name"], request.scope,
                                            request.receive))

    def _response(outcome: Any) -> Response:
        if outcome is None:
            raise ClientDisconnect()
        if type(outcome) is bytes:
            return Response(outcome, media_type="application/json")
        return outcome

    async def list_routers(request: Request) -> Response:
        return JSONResponse({"routers": [r.describe() for r in held.all()]})

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        return JSONResponse({"status": "ready", "routers": held.names()})

    async def metrics_endpoint(request: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    def unauthorized(request: Request) -> Response | None:
        """The refusal of an admin request without the token, or ``None``."""
        if service.admin_token is None:
            return _error(JSONResponse, 403, "reload_disabled",
                          "reload over HTTP is off: the service has no admin token", None)
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode(), service.admin_token.encode()):
            response = _error(JSONResponse, 401, "unauthorized",
                              "send Authorization: Bearer <admin token>", None)
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        return None

    async def reload_status(request: Request) -> Response:
        refusal = unauthorized(request)
        if refusal is not None:
            return refusal
        rolling = None if service.rolling is None else read_state(service.rolling)
        return Response(dumps({"routers": service.last_reloads, "rolling": rolling}),
                        media_type="application/json")

    async def admin_reload(request: Request) -> Response:
        refusal = unauthorized(request)
        if refusal is not None:
            return refusal
        if service.rolling is not None:  # several workers: the supervisor replaces them all
            state = read_state(service.rolling)
            os.kill(os.getppid(), signal.SIGHUP)
            return Response(dumps({
                "rolling": "started", "reloads_so_far": state["counts"],
                "message": "the workers are being replaced one by one; GET /admin/reload "
                           "reports the outcome"}), status_code=202,
                media_type="application/json")
        try:
            body = await _read_body(request, 64 << 10)
            names = _reload_names(read_document(body) if body.strip() else {})
            outcomes = await service.reload(names)
        except InputError as error:
            return _error(JSONResponse, STATUS.get(error.kind, 422), error.kind, str(error),
                          error.field)
        except TensorCodeError as error:
            return _error(JSONResponse, 404, "unknown_router", str(error), "routers")
        failed = [name for name, o in outcomes.items() if o["outcome"] == "failed"]
        if not failed:
            return Response(dumps({"routers": outcomes}), media_type="application/json")
        return _error(JSONResponse, 422, "reload_failed",
                      f"the reload of {failed} was refused; still serving the previous "
                      f"artifact: {outcomes[failed[0]]['reason']}", "routers",
                      routers=outcomes)

    async def http_error(request: Request, error: Exception) -> Response:
        status = getattr(error, "status_code", 500)
        detail = getattr(error, "detail", "error")
        return _error(JSONResponse, status, "http", str(detail), None)

    async def client_left(request: Request, error: Exception) -> Response:
        """A client that left, or was timed out, before its body arrived: nothing reaches
        it, and it is no fault of the server's (not an ``internal`` error)."""
        return Response(status_code=400)

    async def internal_error(request: Request, error: Exception) -> Response:
        return internal(error, request.url.path)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        installed = False
        if reload_on_sighup and hasattr(signal, "SIGHUP"):
            loop.add_signal_handler(signal.SIGHUP,
                                    lambda: asyncio.ensure_future(service.reload()))
            installed = True
        try:
            yield
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGHUP)
            aclose = getattr(service.fallback, "aclose", None)
            if aclose is not None:
                await aclose()
            service.close()

    app = _application_class(starlette_app.Starlette)(
        routes=[
            Route("/v1/routers", list_routers, methods=["GET"]),
            Route("/v1/routers/{name}", route_one, methods=["POST"]),
            Route("/v1/routers/{name}/batch", route_batch, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/admin/reload", admin_reload, methods=["POST"]),
            Route("/admin/reload", reload_status, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, ClientDisconnect: client_left,
                            Exception: internal_error},
        lifespan=lifespan)
    app.state.service = service
    app.answer_hot = answer_hot
    return app


def _application_class(starlette: type) -> Any:
    """Starlette with the router endpoints answered before its middleware and routing
    (``answer_hot``); everything else (and a mounted app's lifespan) is Starlette's."""
    class ServiceApplication(starlette):
        answer_hot: Any = None

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if (scope["type"] == "http" and scope["method"] == "POST"
                    and self.answer_hot is not None
                    and await self.answer_hot(scope, receive, send)):
                return
            await super().__call__(scope, receive, send)
    return ServiceApplication


def _route_path(scope: Any) -> str:
    """The path below the app's mount point (what Starlette's routing matches)."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path != root and path[len(root)] == "/":
        return path[len(root):]
    return path


def _sends_safetensors(scope: Any) -> bool:
    """Whether the request's ``Content-Type`` is the safetensors batch body's (any
    other, or none, is read as JSON)."""
    for key, value in scope["headers"]:
        if key == b"content-type":
            return is_safetensors(value)
    return False


def _error(response: Callable[..., Any], status: int, kind: str, message: str,
           field: str | None, **extra: Any) -> Any:
    """The one error body, ``{"error": {"kind", "field", "message"}}`` (plus ``extra``
    keys beside ``error``). Text a caller sent may hold lone surrogates (a JSON key
    ``"\\ud800"``), which UTF-8 cannot carry: they are written as ``\\ud800`` text, so
    the body always renders and a refusal is never a 500."""
    return response({"error": {"kind": kind, "field": _renderable(field),
                                "message": _renderable(message)}, **extra},
                    status_code=status)


def _renderable(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


async def _receive_body(scope: Any, receive: Any, limit: int) -> bytes | None:
    """The body from ASGI messages, refused (``too_large``) as soon as it passes
    ``limit`` bytes; ``None`` when the client disconnected first."""
    for key, value in scope["headers"]:
        if key == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise InputError(f"the body has {value.decode('latin-1')} bytes, more than "
                                 f"the limit of {limit}", None, "too_large")
            break
    message = await receive()
    if message["type"] != "http.request":
        return None
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False) and len(body) <= limit:
        return body
    chunks = [body]
    size = len(body)
    while True:
        if size > limit:
            raise InputError(f"the body is larger than the limit of {limit} bytes", None,
                             "too_large")
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        chunks.append(chunk)


async def _read_body(request: Any, limit: int) -> bytes:
    """The body, refused (``too_large``) as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise InputError(f"the body has {declared} bytes, more than the limit of {limit}",
                         None, "too_large")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise InputError(f"the body is larger than the limit of {limit} bytes", None,
                             "too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def _reload_names(document: Any) -> list[str] | None:
    if not isinstance(document, dict) or set(document) - {"routers"}:
        raise InputError('the reload body is empty or {"routers": ["name", ...]}', None,
                         "not_object")
    names = document.get("routers")
    if names is None:
        return None
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise InputError("routers: expected a list of router names", "routers", "type")
    return names

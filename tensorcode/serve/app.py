"""The ASGI application: routers over HTTP, built on Starlette.

Endpoints (all JSON except ``/metrics``):

- ``POST /v1/routers/{name}``: one object of inputs -> the outputs, ``escalated`` and
  ``reason`` (``null`` when the program answered);
- ``POST /v1/routers/{name}/batch``: an array of cases -> the answers, in order, through
  the plan's batch path;
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
import json
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import numpy as np

from ..distill.inputs import InputError, read_document
from ..errors import TensorCodeError
from ..extras import require
from .escalations import EscalationLog
from .metrics import UNKNOWN, Metrics, reason_class
from .reload import Routers, Source
from .served import ServedRouter, claimed_template, json_value

LOGGER = logging.getLogger("tensorcode.serve")

#: request bodies larger than this are refused (413) unless ``max_body_bytes`` says otherwise
MAX_BODY_BYTES = 4 << 20
#: the most cases one batch request may hold
MAX_BATCH = 10_000

#: HTTP status for each kind of refused input
STATUS = {"json": 400, "not_object": 400, "too_large": 413, "too_many": 413}

Fallback = Callable[[ServedRouter, Mapping[str, np.ndarray]], Any]


class Service:
    """What the endpoints share: the routers, the fallback, the log, the metrics."""

    def __init__(self, routers: Routers, fallback: Fallback | None = None,
                 escalation_log: EscalationLog | None = None, admin_token: str | None = None,
                 max_body_bytes: int = MAX_BODY_BYTES, max_batch: int = MAX_BATCH) -> None:
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
        self.metrics = Metrics()
        self._async_fallback = fallback is not None and (
            inspect.iscoroutinefunction(fallback)
            or inspect.iscoroutinefunction(type(fallback).__call__))

    async def reload(self, names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Reload routers in a worker thread (loading compiles; serving goes on)."""
        anyio = require("anyio")
        outcomes = await anyio.to_thread.run_sync(self.routers.reload, names)
        for name, outcome in outcomes.items():
            self.metrics.reloads.labels(name, outcome["outcome"]).inc()
            log = LOGGER.warning if outcome["outcome"] == "failed" else LOGGER.info
            log("reload of router %s: %s%s", name, outcome["outcome"],
                f" ({outcome['reason']})" if outcome.get("reason") else "")
        return outcomes

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

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
            self.log.append({"time": time.time(), "router": name,
                             "artifact_sha256": served.artifact_sha256,
                             "inputs": {k: v.tolist() for k, v in case.items()},
                             "target": target, "reason": reason,
                             "answered_by": "fallback" if target is not None else None})
        document: dict[str, Any] = {k: (None if target is None else target[k])
                                    for k in served.outputs}
        document.update(escalated=True, reason=reason,
                        answered_by="fallback" if target is not None else None)
        if failure is not None:
            document["fallback_error"] = failure
        elif self.fallback is None:
            document["fallback_error"] = "no fallback is configured"
        return document


def create_app(routers: Routers | Mapping[str, Source] | Iterable[str | os.PathLike],
               fallback: Fallback | None = None,
               escalation_log: EscalationLog | str | os.PathLike | None = None,
               admin_token: str | None = None, *, max_body_bytes: int = MAX_BODY_BYTES,
               max_batch: int = MAX_BATCH, executor: str | None = None,
               reload_on_sighup: bool = False) -> Any:
    """A Starlette application serving ``routers``.

    ``routers``: directories written by ``Distillation.save`` (named after the
    directory), a mapping of names to directories or ``Distillation`` objects, or a
    ``Routers``. ``fallback``: ``None``, a ``TeacherFallback``, or any callable
    ``fallback(router, inputs) -> {output: value}`` (async or not) for escalated cases.
    ``escalation_log``: an ``EscalationLog`` or a path for one. ``admin_token``: the
    bearer token ``POST /admin/reload`` requires (without one, reload over HTTP is off).
    ``reload_on_sighup`` installs a SIGHUP handler while the app's lifespan runs.
    """
    starlette_app = require("starlette.applications")
    require("prometheus_client")
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    held = routers if isinstance(routers, Routers) else Routers(routers, executor=executor)
    if escalation_log is not None and not isinstance(escalation_log, EscalationLog):
        escalation_log = EscalationLog(escalation_log)
    service = Service(held, fallback, escalation_log, admin_token, max_body_bytes, max_batch)
    metrics = service.metrics

    def refuse(error: InputError, router: str) -> Response:
        metrics.errors.labels(router, error.kind).inc()
        return _error(JSONResponse, STATUS.get(error.kind, 422), error.kind, str(error),
                      error.field)

    def unknown(name: str) -> Response:
        metrics.errors.labels(UNKNOWN, "unknown_router").inc()
        return _error(JSONResponse, 404, "unknown_router",
                      f"no router named {name!r}; serving {held.names()}", None)

    async def route_one(request: Request) -> Response:
        name = request.path_params["name"]
        served = held.get(name)
        if served is None:
            return unknown(name)
        try:
            body = await _read_body(request, service.max_body_bytes)
            start = time.perf_counter()
            case = served.check(read_document(body, service.max_body_bytes))
        except InputError as error:
            return refuse(error, name)
        answer, reason = served.answer(case)
        if answer is None:
            document = await service.escalate(served, case, reason)
        else:
            document = {k: json_value(v) for k, v in answer.items()}
            document["escalated"] = False
            document["reason"] = None
        bound = metrics.served(name, "single")
        bound.calls.inc()
        bound.requests.inc()
        bound.latency.observe(time.perf_counter() - start)
        return JSONResponse(document)

    async def route_batch(request: Request) -> Response:
        name = request.path_params["name"]
        served = held.get(name)
        if served is None:
            return unknown(name)
        try:
            body = await _read_body(request, service.max_body_bytes)
            start = time.perf_counter()
            documents = read_document(body, service.max_body_bytes)
            if isinstance(documents, list) and len(documents) > service.max_batch:
                raise InputError(f"the batch has {len(documents)} cases, more than the limit "
                                 f"of {service.max_batch}", None, "too_many")
            stacked = served.check_batch(documents, may_hold_booleans=(
                b"true" in body or b"false" in body))
        except InputError as error:
            return refuse(error, name)
        rows, reasons = served.decide_batch(stacked)
        names = list(served.outputs)
        template = claimed_template(served.outputs)
        pieces: list[str] = [""] * len(rows)
        pending = []
        for i, row in enumerate(rows):
            if reasons[i] is not None:
                case = {k: v[i] for k, v in stacked.items()}
                pending.append((i, service.escalate(served, case, reasons[i])))
            elif template is not None:  # the common case, without a dict per answer
                pieces[i] = template % row
            else:
                answer = dict(zip(names, row), escalated=False, reason=None)
                pieces[i] = _dumps(answer)
        if pending:
            done = await asyncio.gather(*(job for _, job in pending))
            for (i, _), document in zip(pending, done):
                pieces[i] = _dumps(document)
        bound = metrics.served(name, "batch")
        bound.calls.inc(len(rows))
        bound.requests.inc()
        bound.latency.observe(time.perf_counter() - start)
        return Response(("[" + ",".join(pieces) + "]").encode("utf-8"),
                        media_type="application/json")

    async def list_routers(request: Request) -> Response:
        return JSONResponse({"routers": [r.describe() for r in held.all()]})

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        return JSONResponse({"status": "ready", "routers": held.names()})

    async def metrics_endpoint(request: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    async def admin_reload(request: Request) -> Response:
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
        try:
            body = await _read_body(request, 64 << 10)
            names = _reload_names(read_document(body) if body.strip() else {})
            outcomes = await service.reload(names)
        except InputError as error:
            return _error(JSONResponse, STATUS.get(error.kind, 422), error.kind, str(error),
                          error.field)
        except TensorCodeError as error:
            return _error(JSONResponse, 404, "unknown_router", str(error), "routers")
        failed = any(o["outcome"] == "failed" for o in outcomes.values())
        return JSONResponse({"routers": outcomes}, status_code=422 if failed else 200)

    async def http_error(request: Request, error: Exception) -> Response:
        status = getattr(error, "status_code", 500)
        detail = getattr(error, "detail", "error")
        return _error(JSONResponse, status, "http", str(detail), None)

    async def internal_error(request: Request, error: Exception) -> Response:
        LOGGER.exception("unhandled error serving %s", request.url.path)
        metrics.errors.labels(UNKNOWN, "internal").inc()
        return _error(JSONResponse, 500, "internal",
                      f"the server failed ({type(error).__name__}); see its log", None)

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

    app = starlette_app.Starlette(
        routes=[
            Route("/v1/routers", list_routers, methods=["GET"]),
            Route("/v1/routers/{name}", route_one, methods=["POST"]),
            Route("/v1/routers/{name}/batch", route_batch, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/admin/reload", admin_reload, methods=["POST"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: internal_error},
        lifespan=lifespan)
    app.state.service = service
    return app


def _dumps(document: Any) -> str:
    return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _error(response: Callable[..., Any], status: int, kind: str, message: str,
           field: str | None) -> Any:
    return response({"error": {"kind": kind, "field": field, "message": message}},
                    status_code=status)


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

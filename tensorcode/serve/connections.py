"""What one client may hold: read timeouts, a connection cap, and draining at shutdown.

``tensorcode serve`` runs uvicorn with ``GuardedProtocol``, uvicorn's httptools HTTP/1.1
protocol plus the bounds uvicorn does not have:

- **Header timeout.** uvicorn's ``timeout_keep_alive`` applies only between two requests
  on a connection; a new connection that sends nothing, or trickles a header line every
  few seconds, stays open for ever. Here a request's headers must arrive in full within
  ``header_timeout`` seconds of the connection opening (or of the request's first byte on
  a kept-alive connection), or the client gets ``408`` and the connection is closed.
- **Body timeout.** Nothing in uvicorn bounds the time to send a body: a client that
  declares 1,000 bytes and sends 5 holds its connection (and the request's task) for as
  long as it likes. Here the whole body must arrive within ``body_timeout`` seconds of the
  headers, or the application sees the client leave and the client gets ``408``.
- **A connection cap below the open-file limit.** uvicorn's ``limit_concurrency`` answers
  503 only once a request's headers have arrived and never stops accepting, so it does
  not bound open files: past ``RLIMIT_NOFILE`` ``accept()`` fails and every client,
  slow or not, is refused. Here at most ``max_connections`` connections are open; a new
  one past the cap closes the connection that has been waiting longest on its client
  (reading headers, reading a body, or idle between requests; one that was sending a
  request gets ``503`` with ``Retry-After``), so slow clients cannot shut normal ones
  out. Only when every open connection has a request the service is answering is the
  newcomer itself answered ``503`` (``Retry-After: 1``) and closed: the server is
  overloaded, which the client may retry, and waiting would only hold its file open.
- **Draining.** At shutdown (a stop, or a worker retired by a rolling reload) uvicorn
  closes idle keep-alive connections at once, racing a client that is sending its next
  request on one: the client sees a reset. Here the listening socket is closed first (the
  other workers, and the new one, accept from then on), a request in flight is answered
  with ``Connection: close``, the next request on an idle connection is answered with
  ``Connection: close``, and an idle connection that sends nothing is closed at its
  keep-alive timeout, as it would have been anyway.

Deadlines are checked by one sweep per server every ``SWEEP_S`` seconds over connections
kept in the order their wait began, so a request pays a few dictionary operations, not a
timer of its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..errors import TensorCodeError
from ..extras import require

_httptools_impl: Any = require("uvicorn.protocols.http.httptools_impl", "tensorcode serve")

LOGGER = logging.getLogger("tensorcode.serve")

#: open files kept for what a worker opens besides client connections (its listening
#: socket, the event loop, the supervisor's pipe, log and metrics files, the teacher's
#: connections, modules imported late): a worker at rest holds 16
RESERVED_FILES = 128
#: the fewest files an explicit ``--max-connections`` must leave for those
MIN_RESERVED_FILES = 64
#: the cap when the open-file limit is unlimited
UNLIMITED_CAP = 65_536
#: seconds between two sweeps for expired deadlines
SWEEP_S = 0.25
#: seconds a refused connection has to send its request before it is closed unanswered,
#: and how many may wait so at once (past that, refused connections are closed at once)
REFUSAL_WAIT_S = 2.0
MAX_REFUSING = 32
#: seconds between two log lines counting the connections closed for a limit
REPORT_S = 10.0

# where a connection is: the phases that wait on the client have deadlines or an order
HEADERS, BODY, APP, IDLE = "headers", "body", "app", "idle"


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds ``GuardedProtocol`` enforces (``tensorcode serve`` flags of the same
    names); seconds for the timeouts."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1024 - RESERVED_FILES

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and value > 0):
                raise TensorCodeError(f"--{name.replace('_', '-')} must be a positive "
                                      f"number of seconds, got {value!r}")
        if not (isinstance(self.max_connections, int) and self.max_connections >= 1):
            raise TensorCodeError(f"--max-connections must be at least 1, got "
                                  f"{self.max_connections!r}")


def open_file_limit() -> int | None:
    """The process's soft ``RLIMIT_NOFILE`` (``None``: unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def connection_cap(requested: int | None, limit: int | None = None) -> int:
    """``requested`` checked against the open-file limit, or the default cap: the limit
    less ``RESERVED_FILES``. A cap that leaves fewer than ``MIN_RESERVED_FILES`` files for
    the service itself is refused: past the limit ``accept()`` fails for every client."""
    limit = open_file_limit() if limit is None else limit
    if limit is None:
        return UNLIMITED_CAP if requested is None else requested
    if requested is None:
        if limit - RESERVED_FILES < 16:
            raise TensorCodeError(
                f"the open-file limit of {limit} leaves too few connections after the "
                f"{RESERVED_FILES} files the service keeps for itself; raise it (ulimit -n) "
                "or set --max-connections")
        return limit - RESERVED_FILES
    most = limit - MIN_RESERVED_FILES
    if requested > most:
        raise TensorCodeError(
            f"--max-connections {requested} leaves too few of the {limit} files this process "
            f"may open (ulimit -n) for the service's own files; at most {most}, or raise "
            "the limit")
    return requested


def error_response(status: int, kind: str, message: str,
                   default_headers: list[tuple[bytes, bytes]],
                   retry_after: bool = False) -> bytes:
    """A complete ``Connection: close`` response with the service's error body."""
    body = json.dumps({"error": {"kind": kind, "field": None, "message": message}}).encode()
    phrase = {408: b"Request Timeout", 503: b"Service Unavailable"}[status]
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, phrase)]
    lines += [name + b": " + value + b"\r\n" for name, value in default_headers]
    lines += [b"content-type: application/json\r\n",
              b"content-length: %d\r\n" % len(body), b"connection: close\r\n"]
    if retry_after:
        lines.append(b"retry-after: 1\r\n")
    return b"".join(lines) + b"\r\n" + body


OVERLOADED = ("the server has as many connections as it may hold, all with requests in "
              "progress; retry shortly")


async def _overloaded(scope: Any, receive: Any, send: Any) -> None:
    """The ASGI answer to a connection refused at the cap."""
    body = json.dumps({"error": {"kind": "overloaded", "field": None,
                                 "message": OVERLOADED}}).encode()
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", b"1"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """One server's connections in the order their wait on the client began, its sweep,
    and whether it is draining."""

    def __init__(self, limits: ConnectionLimits, keep_alive: float) -> None:
        self.limits = limits
        self.keep_alive = keep_alive
        self.waiting: dict[str, OrderedDict[GuardedProtocol, float]] = {
            HEADERS: OrderedDict(), BODY: OrderedDict(), IDLE: OrderedDict()}
        self.refused: OrderedDict[GuardedProtocol, float] = OrderedDict()
        self.draining = False
        self.sweeping: asyncio.TimerHandle | None = None
        self.closed: dict[str, int] = {}
        self.reported = time.monotonic()

    def start_sweeping(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.sweeping is None:
            self.sweeping = loop.call_later(SWEEP_S, self.sweep, loop)

    def sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close every connection past its deadline; runs while any connection is open."""
        self.sweeping = None
        now = time.monotonic()
        for phase, timeout in ((HEADERS, self.limits.header_timeout),
                               (BODY, self.limits.body_timeout)):
            waiting = self.waiting[phase]
            while waiting:
                protocol, since = next(iter(waiting.items()))
                if since + timeout > now:
                    break
                protocol.close_slow(408, "timeout", _late(phase, timeout))
        while self.refused:
            protocol, since = next(iter(self.refused.items()))
            if since + REFUSAL_WAIT_S > now:
                break
            self.refused.pop(protocol)
            protocol.transport.abort()
        if self.closed and now - self.reported >= REPORT_S:
            LOGGER.warning("closed connections for the server's limits in the last %.0f s: %s",
                           now - self.reported, ", ".join(f"{count} {why}" for why, count
                                                          in sorted(self.closed.items())))
            self.closed = {}
            self.reported = now
        if any(self.waiting.values()) or self.refused or self.closed:
            self.start_sweeping(loop)

    def count(self, why: str) -> None:
        self.closed[why] = self.closed.get(why, 0) + 1

    def oldest_waiting(self) -> GuardedProtocol | None:
        """The connection whose wait on its client began first (``None``: every open
        connection has a request the service is answering)."""
        oldest, first = None, float("inf")
        for waiting in self.waiting.values():
            if waiting:
                protocol, since = next(iter(waiting.items()))
                if since < first:
                    oldest, first = protocol, since
        return oldest


def _late(phase: str, timeout: float) -> str:
    part = "headers" if phase == HEADERS else "body"
    return (f"the request's {part} did not arrive within {timeout:g} s "
            f"(--{'header' if phase == HEADERS else 'body'}-timeout); send the whole "
            "request at once")


def guard_of(server_state: Any, config: Any) -> Guard:
    """The server's ``Guard``, made by its first connection."""
    guard: Guard | None = getattr(server_state, "tensorcode_guard", None)
    if guard is None:
        limits = getattr(config, "connection_limits", None) or ConnectionLimits(
            max_connections=connection_cap(None))
        guard = Guard(limits, float(config.timeout_keep_alive))
        server_state.tensorcode_guard = guard
    return guard


class GuardedProtocol(_httptools_impl.HttpToolsProtocol):
    """uvicorn's httptools protocol with read timeouts, a connection cap and draining
    (see the module's docstring). The limits are the uvicorn ``Config``'s
    ``connection_limits`` attribute (a ``ConnectionLimits``)."""

    timeout_keep_alive_task: asyncio.TimerHandle | None  # uvicorn's keep-alive timer

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.guard = guard_of(server_state, config)
        self.phase: str | None = None
        self.refused = False

    # -- where the connection is -------------------------------------------------------

    def _enter(self, phase: str) -> None:
        if self.phase is not None and self.phase != APP:
            self.guard.waiting[self.phase].pop(self, None)
        self.phase = phase
        if phase != APP:
            self.guard.waiting[phase][self] = time.monotonic()

    def _leave(self) -> None:
        if self.phase is not None and self.phase != APP:
            self.guard.waiting[self.phase].pop(self, None)
        self.phase = None

    # -- uvicorn's protocol, with the transitions --------------------------------------

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        guard = self.guard
        guard.start_sweeping(self.loop)
        if len(self.connections) <= guard.limits.max_connections:
            self._enter(HEADERS)  # its first request's headers are due from now
            return
        victim = guard.oldest_waiting()
        if victim is not None:
            guard.count("closed at the connection cap")
            victim.close_slow(503, "overloaded", "the server is at its connection limit and "
                              "closed the connection that waited longest; retry", True)
            self._enter(HEADERS)
        elif len(guard.refused) < MAX_REFUSING:
            guard.count("refused with 503")
            self.refused = True
            self.app = _overloaded
            guard.refused[self] = time.monotonic()
        else:
            guard.count("refused unanswered")
            transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._leave()
        if self.refused:
            self.guard.refused.pop(self, None)

    def data_received(self, data: bytes) -> None:
        if self.phase == IDLE:  # the next request's first byte: its headers are due
            self._enter(HEADERS)
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.phase == APP:  # a pipelined request while the previous is answered
            self._enter(HEADERS)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if self.guard.draining and self.cycle is not None:
            self.cycle.keep_alive = False
        if self.phase is not None:
            self._enter(BODY)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        if self.phase is None:
            return
        cycle = self.cycle
        if cycle is not None and cycle.response_complete and not self.pipeline:
            # answered before its body was read (a refusal): idle from now, with the
            # keep-alive timeout the body's bytes kept cancelling
            self._enter(IDLE)
            if self.timeout_keep_alive_task is None and not self.transport.is_closing():
                self.timeout_keep_alive_task = self.loop.call_later(
                    self.timeout_keep_alive, self.timeout_keep_alive_handler)
        else:
            self._enter(APP)

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if self.phase == APP and not pipelined and not self.transport.is_closing():
            self._enter(IDLE)  # uvicorn's keep-alive timeout closes it if nothing comes

    def shutdown(self) -> None:
        """Drain instead of closing: a response in flight, and the next one on an idle
        connection, carries ``Connection: close``; an idle connection that sends nothing
        is closed at its keep-alive timeout, a slow one at its read deadline."""
        self.guard.draining = True
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False

    # -- closing -----------------------------------------------------------------------

    def close_slow(self, status: int, kind: str, message: str,
                   retry_after: bool = False) -> None:
        """Close a connection waiting on its client: with an error response when it was
        sending a request and no response is under way, silently when it was idle or had
        sent nothing (as at a keep-alive timeout)."""
        phase = self.phase
        self._leave()
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if kind == "timeout":
            self.guard.count(f"{phase} timeout")
        cycle = self.cycle
        if phase == BODY and cycle is not None and not self.pipeline:
            if cycle.response_started and not cycle.response_complete:
                cycle.keep_alive = False  # the service is already answering: close after
                return
            if not cycle.response_started:
                cycle.disconnected = True  # the application sees the client leave
                cycle.message_event.set()
                transport.write(error_response(status, kind, message,
                                               self.server_state.default_headers,
                                               retry_after))
        elif (phase == HEADERS and self.scope is not None
              and (cycle is None or cycle.response_complete)):
            transport.write(error_response(status, kind, message,
                                           self.server_state.default_headers, retry_after))
        transport.close()


__all__ = ["ConnectionLimits", "GuardedProtocol", "connection_cap", "open_file_limit"]

"""The service's Prometheus metrics, each labelled by router.

Every application gets its own ``CollectorRegistry`` (two apps in one process, as in
tests or when mounted twice, never collide). Labels only take values the service
chooses: router names it serves (anything else counts under ``(unknown)``), the reason
class of an escalation and the kind of an error, never text a caller sent, so a caller
cannot grow the series without bound. Under several worker processes
(``PROMETHEUS_MULTIPROC_DIR`` set) the exposition aggregates every worker.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from typing import Any

from ..extras import require
from .rolling import OUTCOMES, read_state

UNKNOWN = "(unknown)"
#: seconds: 50 us to 2.5 s, dense where a compiled call and a loopback request land
LATENCY_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                   0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    """Counters and a histogram for one application; ``exposition()`` renders them."""

    def __init__(self, rolling_reloads: str | os.PathLike | None = None) -> None:
        prometheus = require("prometheus_client")
        self._prometheus = prometheus
        self.registry = prometheus.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = prometheus.Counter(
            "tensorcode_router_requests", "HTTP requests answered, by router and endpoint",
            ["router", "endpoint"], registry=r)
        self.calls = prometheus.Counter(
            "tensorcode_router_calls", "Cases answered (a batch counts each case)",
            ["router"], registry=r)
        self.escalations = prometheus.Counter(
            "tensorcode_router_escalations", "Cases the program did not claim, by reason "
            "(abstained, error)", ["router", "reason"], registry=r)
        self.errors = prometheus.Counter(
            "tensorcode_router_errors", "Requests or cases refused or failed, by kind",
            ["router", "kind"], registry=r)
        self.latency = prometheus.Histogram(
            "tensorcode_router_latency_seconds", "Time from the request body read to the "
            "answer, by router and endpoint", ["router", "endpoint"], registry=r,
            buckets=LATENCY_BUCKETS)
        self.paths = prometheus.Counter(
            "tensorcode_router_paths", "Cases by the path that answered them: program, "
            "fallback_abstained, fallback_error, refused (a refused request counts once)",
            ["router", "path"], registry=r)
        self.log_failures = prometheus.Counter(
            "tensorcode_router_escalation_log_failures", "Escalation records that could not "
            "be written (a full disk, an I/O error); the requests were answered",
            ["router"], registry=r)
        self._served: dict[tuple[str, str], Tally] = {}
        self._rolling = None if rolling_reloads is None else _RollingReloads(rolling_reloads)
        if self._rolling is not None:
            r.register(self._rolling)
        self.reloads = prometheus.Counter(
            "tensorcode_router_reloads", "Reload attempts by outcome (reloaded, unchanged, "
            "failed)", ["router", "outcome"], registry=r)

    def served(self, router: str, endpoint: str) -> Tally:
        """The tally a request to ``router``'s ``endpoint`` counts in, made once."""
        key = (router, endpoint)
        tally = self._served.get(key)
        if tally is None:
            tally = Tally(self.calls.labels(router), self.requests.labels(router, endpoint),
                          self.latency.labels(router, endpoint),
                          self.paths.labels(router, "program"),
                          eager=bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR")))
            self._served[key] = tally
        return tally

    def fold(self) -> None:
        """Add every tally's counts to its Prometheus series (before each exposition)."""
        for tally in list(self._served.values()):
            tally.fold()

    def exposition(self) -> tuple[bytes, str]:
        """``(body, content type)`` of the Prometheus text format."""
        self.fold()
        prometheus = self._prometheus
        registry = self.registry
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            multiprocess = require("prometheus_client.multiprocess", "serving metrics")
            registry = prometheus.CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            if self._rolling is not None:
                registry.register(self._rolling)
        return prometheus.generate_latest(registry), prometheus.CONTENT_TYPE_LATEST


class Tally:
    """A router endpoint's answered requests, counted in plain numbers.

    Updating four Prometheus children per request (each behind its own lock, the
    histogram's bucket found by a loop in Python) costs more than the compiled call, so
    the service counts here and ``fold`` adds the counts to the series: before every
    exposition in this process, and after every request when several worker processes
    share the metrics (``eager``: another worker may answer the scrape). Requests are
    counted on the event loop; ``fold`` runs there too (the ``/metrics`` endpoint)."""

    __slots__ = ("_bounds", "_calls_child", "_latency_child", "_program_child",
                 "_requests_child", "buckets", "calls", "eager", "program", "requests",
                 "seconds")

    def __init__(self, calls: Any, requests: Any, latency: Any, program: Any,
                 eager: bool = False) -> None:
        self._calls_child = calls
        self._requests_child = requests
        self._latency_child = latency
        self._program_child = program
        self._bounds = tuple(latency._upper_bounds)  # the histogram's own, +Inf last
        self.eager = eager
        self.calls = 0
        self.requests = 0
        self.program = 0
        self.seconds = 0.0
        self.buckets = [0] * len(self._bounds)

    def record(self, calls: int, program: int, seconds: float) -> None:
        """One request that answered ``calls`` cases, ``program`` of them by the program,
        ``seconds`` from its body read to its answer."""
        self.calls += calls
        self.program += program
        self.requests += 1
        self.seconds += seconds
        self.buckets[bisect_left(self._bounds, seconds)] += 1  # the first bound >= it
        if self.eager:
            self.fold()

    def fold(self) -> None:
        """Move the counts into the Prometheus children."""
        calls, program, requests, seconds = self.calls, self.program, self.requests, \
            self.seconds
        buckets = self.buckets
        self.calls = self.program = self.requests = 0
        self.seconds = 0.0
        self.buckets = [0] * len(buckets)
        if calls:
            self._calls_child.inc(calls)
        if program:
            self._program_child.inc(program)
        if requests:
            self._requests_child.inc(requests)
            # what Histogram.observe does per observation, once per bucket
            self._latency_child._sum.inc(seconds)
            for value, count in zip(self._latency_child._buckets, buckets):
                if count:
                    value.inc(count)


class _RollingReloads:
    """``tensorcode_server_reloads_total{outcome}``: the rolling reloads of the workers,
    read at each scrape from the supervisor's record (see ``serve.rolling``)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = path

    def collect(self) -> Any:
        core = require("prometheus_client.core", "serving metrics")
        family = core.CounterMetricFamily(
            "tensorcode_server_reloads", "Rolling reloads of the worker processes by "
            "outcome (reloaded, failed, interrupted)", labels=["outcome"])
        counts = read_state(self.path)["counts"]
        for outcome in OUTCOMES:
            family.add_metric([outcome], float(counts.get(outcome, 0)))
        yield family


def reason_class(reason: str | None) -> str:
    """``abstained`` or ``error`` (the detail stays in the log, not in a label)."""
    return "abstained" if reason == "abstained" else "error"


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
        self._served: dict[tuple[str, str], Served] = {}
        self._rolling = None if rolling_reloads is None else _RollingReloads(rolling_reloads)
        if self._rolling is not None:
            r.register(self._rolling)
        self.reloads = prometheus.Counter(
            "tensorcode_router_reloads", "Reload attempts by outcome (reloaded, unchanged, "
            "failed)", ["router", "outcome"], registry=r)

    def served(self, router: str, endpoint: str) -> Served:
        """The children a request to ``router``'s ``endpoint`` updates, bound once (a
        ``labels`` lookup costs more than the compiled call)."""
        key = (router, endpoint)
        bound = self._served.get(key)
        if bound is None:
            bound = Served(self.calls.labels(router), self.requests.labels(router, endpoint),
                           self.latency.labels(router, endpoint),
                           self.paths.labels(router, "program"))
            self._served[key] = bound
        return bound

    def exposition(self) -> tuple[bytes, str]:
        """``(body, content type)`` of the Prometheus text format."""
        prometheus = self._prometheus
        registry = self.registry
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            multiprocess = require("prometheus_client.multiprocess", "serving metrics")
            registry = prometheus.CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            if self._rolling is not None:
                registry.register(self._rolling)
        return prometheus.generate_latest(registry), prometheus.CONTENT_TYPE_LATEST


class Served:
    """A router endpoint's calls, requests, latency and program-path children."""

    __slots__ = ("calls", "latency", "program", "requests")

    def __init__(self, calls: Any, requests: Any, latency: Any, program: Any) -> None:
        self.calls = calls
        self.requests = requests
        self.latency = latency
        self.program = program


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


"""Serving distilled routers over HTTP: an ASGI application and what it needs.

``create_app(routers, fallback=None, escalation_log=None, admin_token=None)`` builds a
Starlette application (mountable in a FastAPI or Starlette service) that answers router
calls through the compiled plan, sends what the program does not claim to an optional
teacher, appends every escalation to a JSON-lines log that ``tensorcode repair`` reads,
exports Prometheus metrics and swaps in new artifacts without dropping a request.

The HTTP parts need the ``serve`` extra (``pip install 'tensorcode[serve]'``); names
are loaded on first use, so ``tensorcode.serve.escalations`` (what ``tensorcode repair``
reads) works without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .app import Service, create_app
    from .escalations import EscalationLog, read_escalations
    from .fallback import TeacherFallback
    from .served import ServedRouter, load_router

_LAZY = {
    "create_app": ".app", "Service": ".app",
    "EscalationLog": ".escalations", "read_escalations": ".escalations",
    "TeacherFallback": ".fallback",
    "ServedRouter": ".served", "load_router": ".served",
}

__all__ = [
    "EscalationLog",
    "ServedRouter",
    "Service",
    "TeacherFallback",
    "create_app",
    "load_router",
    "read_escalations",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tensorcode.serve' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name], __name__), name)

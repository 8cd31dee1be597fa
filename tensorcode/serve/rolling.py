"""Rolling reloads of several worker processes, and their outcomes for everyone to read.

With ``tensorcode serve --workers N`` a SIGHUP to the parent replaces the workers one by
one (uvicorn's supervisor): each new worker loads and validates the artifacts and must
answer its readiness check within ``--ready-timeout`` seconds before the old one is
retired; one that is not ready ends the reload and the remaining old workers keep
serving. SIGHUPs that arrive while a reload runs are served by one more reload after it,
and a stop (SIGTERM, SIGINT) drops any queued reload. The supervisor here records the
outcome of every such reload (``reloaded``, ``failed`` with the reason, ``interrupted``
by a shutdown) in a small JSON state file that the workers read for ``/metrics`` and
``GET /admin/reload``, so the outcome is not only a line in the parent's log.

A retired worker drains rather than drops its connections (``serve.connections``): it
stops accepting (the new worker already listens on the shared socket), answers what is
in flight and the next request on each idle connection with ``Connection: close``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from ..extras import require
from ..files import atomic_write_bytes

LOGGER = logging.getLogger("tensorcode.serve")

#: the environment variable naming the state file (set by ``tensorcode serve``)
STATE = "TENSORCODE_SERVE_RELOADS"
#: the outcomes a rolling reload can have
OUTCOMES = ("reloaded", "failed", "interrupted")
#: reloads kept in the state file's history
HISTORY = 20
#: the state file is tiny; anything larger is not ours
MAX_STATE_BYTES = 1 << 20


def read_state(path: str | os.PathLike | None) -> dict[str, Any]:
    """The recorded rolling reloads: ``{"counts": {outcome: n}, "history": [...]}``
    (empty before the first, or when the file cannot be read)."""
    empty: dict[str, Any] = {"counts": dict.fromkeys(OUTCOMES, 0), "history": []}
    if path is None:
        return empty
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return empty
    try:
        state = json.loads(raw) if len(raw) <= MAX_STATE_BYTES else None
    except ValueError:
        state = None
    if not (isinstance(state, dict) and isinstance(state.get("counts"), dict)
            and isinstance(state.get("history"), list)):
        return empty
    return state


def record(path: str | os.PathLike, outcome: dict[str, Any]) -> None:
    """Append ``outcome`` to the state file (written atomically)."""
    state = read_state(path)
    counts = {name: int(state["counts"].get(name, 0)) for name in OUTCOMES}
    counts[outcome["outcome"]] += 1
    history = [*state["history"], outcome][-HISTORY:]
    atomic_write_bytes(Path(path), json.dumps({"counts": counts, "history": history},
                                              indent=1).encode("utf-8"))


def supervisor(config: Any, sockets: list[Any], state: str | os.PathLike) -> Any:
    """uvicorn's multi-worker supervisor that records every rolling reload in ``state``
    (making it installs the parent's signal handlers)."""
    recording = supervisor_class()
    made = recording(config, sockets=sockets)
    made.state = state
    return made


def supervisor_class() -> Any:
    """The supervisor's class: uvicorn's, with queued SIGHUPs folded into one reload and
    every rolling reload's outcome recorded in the instance's ``state`` file."""
    supervisors: Any = require("uvicorn.supervisors", "tensorcode serve --workers")

    hup = getattr(signal, "SIGHUP", None)
    stops = {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGBREAK")
             if hasattr(signal, name)}

    class RecordingSupervisor(supervisors.Multiprocess):
        state: str | os.PathLike

        def handle_signals(self) -> None:
            """A stop goes before queued reloads, and the SIGHUPs queued while a rolling
            reload ran are served by one more reload (it starts after all of them)."""
            queue = self.signal_queue  # appended to by the signal handler: only removes
            if hup is not None:
                extra = queue.count(hup) - (0 if any(sig in stops for sig in queue) else 1)
                for _ in range(max(extra, 0)):
                    queue.remove(hup)
            super().handle_signals()

        def restart_all(self) -> None:
            started, clock = time.time(), time.monotonic()
            before = [process.pid for process in self.processes]
            super().restart_all()
            replaced = sum(process.pid != pid for process, pid in zip(self.processes, before))
            timeout = self.config.timeout_worker_healthcheck
            if replaced == len(before):
                outcome, reason = "reloaded", None
            elif self.should_exit.is_set():
                outcome, reason = "interrupted", "the server is shutting down"
            else:
                outcome = "failed"
                reason = (f"new worker {replaced + 1} of {len(before)} was not ready within "
                          f"{timeout} s (--ready-timeout) or exited while starting (see the "
                          f"log); {len(before) - replaced} previous worker(s) keep serving")
            entry = {"outcome": outcome, "reason": reason, "started": started,
                     "seconds": round(time.monotonic() - clock, 3), "workers": len(before),
                     "replaced": replaced, "ready_timeout": timeout}
            record(self.state, entry)
            (LOGGER.info if outcome == "reloaded" else LOGGER.error)(
                "rolling reload: %s (%d of %d workers replaced)%s", outcome, replaced,
                len(before), f": {reason}" if reason else "")

    return RecordingSupervisor


__all__ = ["OUTCOMES", "STATE", "read_state", "record", "supervisor", "supervisor_class"]

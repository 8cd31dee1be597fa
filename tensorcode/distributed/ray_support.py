"""The one place this package talks to Ray's runtime: importing it, waiting on results
with a deadline, and turning Ray's failures into ``WorkerError`` naming the worker.

A worker that raised, died (its process exited, its node went away) or did not answer
in time is reported, never waited on forever: every ``ray.get`` here carries a timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from ..errors import TensorCodeError, WorkerError
from ..extras import require

#: seconds a call waits for its workers unless told otherwise
DEFAULT_TIMEOUT_S = 600.0


def require_initialized() -> ModuleType:
    """``ray`` once ``ray.init(...)`` has connected this process to a cluster; the
    caller owns the cluster (its size, its address), so nothing here starts one."""
    ray = require("ray", "tensorcode.distributed")
    if not ray.is_initialized():
        raise TensorCodeError("Ray is not initialized in this process; call ray.init() "
                              "(a local instance) or ray.init(address=...) (a cluster) first")
    return ray


def check_timeout(timeout_s: Any) -> float:
    if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 0:
        raise TensorCodeError(f"timeout_s must be a positive number of seconds, got "
                              f"{timeout_s!r}")
    return float(timeout_s)


def gather(refs: Sequence[Any], names: Sequence[str], timeout_s: float) -> list[Any]:
    """The results of ``refs`` (one per worker, named by ``names``), waiting at most
    ``timeout_s`` seconds in all. A failure raises ``WorkerError`` naming the first
    worker that failed and what it failed with; the other results are dropped
    (``settle``)."""
    ray = require("ray", "tensorcode.distributed")
    exceptions = require("ray.exceptions", "tensorcode.distributed")

    _ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    if pending:
        _cancel(ray, pending)
    results = []
    try:
        for ref, name in zip(refs, names):
            if ref in pending:
                raise WorkerError(f"{name} did not answer within {timeout_s:g} s; it may be "
                                  "stuck or starved of CPUs (raise timeout_s, or check the "
                                  "cluster)")
            try:
                results.append(ray.get(ref, timeout=timeout_s))
            except exceptions.RayActorError as error:
                if getattr(error, "actor_init_failed", False):  # raised in its constructor
                    raise WorkerError(f"{name} failed while starting: {_last_line(error)}"
                                      ) from error
                raise WorkerError(f"{name} died: {_first_line(error)}") from error
            except exceptions.WorkerCrashedError as error:
                raise WorkerError(f"{name} crashed: {_first_line(error)}") from error
            except exceptions.RayTaskError as error:
                cause = error.as_instanceof_cause()
                raise WorkerError(f"{name} failed: {type(cause).__name__}: "
                                  f"{_cause_message(error)}") from cause
            except exceptions.RayError as error:
                raise WorkerError(f"{name} failed in Ray: {_first_line(error)}") from error
    except WorkerError:
        settle(ray, refs)
        raise
    return results


def settle(ray: ModuleType, refs: Sequence[Any]) -> None:
    """Account for every result of a batch being abandoned after one worker failed:
    stop the tasks still running and read the errors of those that ended, so Ray does
    not log each one again as an unhandled error beside the ``WorkerError`` raised."""
    ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=0)
    _cancel(ray, pending)
    for ref in ready:
        with contextlib.suppress(Exception):
            ray.get(ref, timeout=0)


def _cancel(ray: ModuleType, refs: Sequence[Any]) -> None:
    """Stop tasks that overran (best effort: a task already finished, or an actor's
    method, which ``DataParallel`` ends by killing the actor, cannot be cancelled)."""
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)


def _cause_message(error: Any) -> str:
    cause = getattr(error, "cause", None)
    return str(cause) if cause is not None else _first_line(error)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _last_line(error: BaseException) -> str:
    """The exception line that ends a remote traceback (``ValueError: ...``)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__

"""The routers a service holds, and swapping in new artifacts while it serves.

A request looks its router up once and keeps that object to the end, so replacing the
mapping entry is the whole swap: requests in flight finish on the old router, the next
ones get the new. A reload loads and validates the new artifact completely
(``load_router``) before the swap; anything wrong leaves the old router serving and the
outcome says why. A reload may change the program, not the contract: new input or output
names or shapes would break every client, so they are refused.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..distill.result import Distillation
from ..errors import TensorCodeError
from .served import ServedRouter, load_router

Source = str | os.PathLike | Distillation


class Routers:
    """Name -> ``ServedRouter``; ``reload`` re-reads the directories they came from."""

    def __init__(self, sources: Mapping[str, Source] | Iterable[str | os.PathLike],
                 executor: str | None = None) -> None:
        if not isinstance(sources, Mapping):
            listed = [Path(s) for s in sources]
            names = [p.resolve().name for p in listed]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise TensorCodeError(f"two router directories share the name(s) "
                                      f"{duplicates}; pass a mapping of names to directories")
            sources = dict(zip(names, listed))
        if not sources:
            raise TensorCodeError("serve at least one router: a directory written by "
                                  "Distillation.save")
        self.executor = executor
        self._lock = threading.Lock()  # one reload at a time; reads never take it
        self._routers: dict[str, ServedRouter] = {
            str(name): load_router(str(name), source, executor)
            for name, source in sources.items()}

    def get(self, name: str) -> ServedRouter | None:
        return self._routers.get(name)

    def names(self) -> list[str]:
        return list(self._routers)

    def all(self) -> list[ServedRouter]:
        return list(self._routers.values())

    def reload(self, names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Reload the named routers (all by default) from their directories; returns
        ``{name: {"outcome": reloaded|unchanged|failed, "artifact_sha256", "reason"}}``."""
        wanted = list(self._routers) if names is None else list(names)
        unknown = [n for n in wanted if n not in self._routers]
        if unknown:
            raise TensorCodeError(f"no router named {unknown}; serving {list(self._routers)}")
        outcomes: dict[str, dict[str, Any]] = {}
        with self._lock:
            for name in wanted:
                outcomes[name] = self._reload_one(name)
        return outcomes

    def _reload_one(self, name: str) -> dict[str, Any]:
        old = self._routers[name]
        if old.directory is None:
            return {"outcome": "failed", "artifact_sha256": old.artifact_sha256,
                    "reason": "this router was given in memory, not loaded from a directory"}
        try:
            new = load_router(name, old.directory, self.executor)
            _same_contract(old, new)
        except Exception as error:  # any failure leaves the old router serving
            return {"outcome": "failed", "artifact_sha256": old.artifact_sha256,
                    "reason": f"{type(error).__name__}: {error}; still serving "
                              f"{old.artifact_sha256[:12]}"}
        if new.artifact_sha256 == old.artifact_sha256:
            return {"outcome": "unchanged", "artifact_sha256": old.artifact_sha256,
                    "reason": None}
        self._routers = {**self._routers, name: new}  # one reference swap
        return {"outcome": "reloaded", "artifact_sha256": new.artifact_sha256,
                "previous_sha256": old.artifact_sha256, "reason": None}


def _same_contract(old: ServedRouter, new: ServedRouter) -> None:
    for part in ("inputs", "outputs"):
        if getattr(old, part) != getattr(new, part):
            raise TensorCodeError(f"the new artifact's {part} {getattr(new, part)} differ from "
                                  f"the served {getattr(old, part)}; a reload keeps the "
                                  "contract (serve it under a new name instead)")

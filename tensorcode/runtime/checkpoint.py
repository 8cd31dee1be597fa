"""Checkpoints are pure state: named snapshots of a module's parameters.

``named_snapshot`` copies a module's payloads under structured paths (``0.weights``),
the form that survives code changes and maps onto foreign layouts; ``named_restore``
builds a new table from one and touches no graph. A restore validates everything
before building anything, so a bad snapshot changes nothing.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import ArtifactError, DTypeError, ShapeError
from .parameters import Parameters


def named_snapshot(parameters: Parameters, module: Any) -> dict[str, np.ndarray]:
    """``{path: copy of payload}`` for ``module``'s parameters, in visit order."""
    return {path: np.array(parameters.of(symbol), copy=True)
            for path, symbol in module.named_parameters()}


def named_restore(parameters: Parameters, module: Any,
                  snapshot: Mapping[str, Any]) -> Parameters:
    """A new table equal to ``parameters`` with ``module``'s slots taken from
    ``snapshot``; a missing path, an extra path, or a wrong shape or dtype raises and
    nothing is built."""
    named = dict(module.named_parameters())
    missing = [p for p in named if p not in snapshot]
    extra = [p for p in snapshot if p not in named]
    if missing or extra:
        details = []
        if missing:
            details.append(f"missing paths {missing}")
        if extra:
            details.append(f"unexpected paths {extra}")
        raise ArtifactError("snapshot does not match the module: " + "; ".join(details) +
                            f"; the module has {list(named)}", field="snapshot")
    updates = {}
    for path, symbol in named.items():
        value = np.asarray(snapshot[path])
        expected = parameters.of(symbol)
        if value.shape != expected.shape:
            raise ShapeError(f"snapshot path {path!r}: expected shape {list(expected.shape)}, "
                             f"got {list(value.shape)}")
        if value.dtype != expected.dtype:
            raise DTypeError(f"snapshot path {path!r}: expected {expected.dtype}, got "
                             f"{value.dtype}")
        updates[symbol] = value
    return parameters.replace(updates)


__all__ = ["named_snapshot", "named_restore"]

"""How an entry becomes a plan: the top of the plans layer.

``Entry.lower`` (``network.py``) checks the backend and the ``approximate`` default, then
calls ``lower`` here: a plain entry is optimized, scheduled and handed to a ``Plan``; an
entry lowered with an optimizer becomes a ``StepPlan`` (``step.py``). A network sits
below the plans lowered from it (``Plan.load`` rebuilds networks), so the network module
does not import this one: ``compiler/plans/__init__.py`` installs ``lower`` as the
lowering ``Entry.lower`` calls.
"""

from __future__ import annotations

from typing import Any

from ..backends.counters import count
from ..lower.schedule import build
from .network import Entry
from .plan import Plan
from .step import lower_step


def lower(entry: Entry, backend: str, approximate: bool, optimizer: Any) -> Plan:
    """``entry.lower(backend, approximate, optimizer)`` once its arguments are checked: a
    ``Plan``, or a ``StepPlan`` when ``optimizer`` is given."""
    if optimizer is not None:
        return lower_step(entry, backend, approximate, optimizer)
    graph, sources = entry.optimized()
    schedule = build(graph, sources)
    count("plans_lowered")
    return Plan(entry, schedule, backend, entry.origins(), approximate)


__all__ = ["lower"]

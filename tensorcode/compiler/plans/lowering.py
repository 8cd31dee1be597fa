"""How an entry becomes a plan: ``lower(entry, ...)``, the top of the plans layer.

``lower`` checks the backend and the ``approximate`` default, then optimizes and
schedules a plain entry and hands it to a ``Plan``; an entry lowered with an optimizer
becomes a ``StepPlan`` (``step.py``). ``Entry.lower`` (``network.py``) is a thin call into
it: a network sits below the plans lowered from it (``Plan.load`` rebuilds networks), so
that call imports this module when it runs, the one import against the plans' order.
"""

from __future__ import annotations

import os
from typing import Any

from ..backends import DEFAULT_BACKEND, check_backend
from ..backends.counters import count
from ..lower.schedule import build
from .network import Entry
from .plan import Plan
from .step import lower_step


def lower(entry: Entry, backend: str = DEFAULT_BACKEND, approximate: bool | None = None,
          optimizer: Any = None) -> Plan:
    """Optimize, schedule and compile ``entry``: a ``Plan`` for ``backend`` (``"llvm"``,
    ``"numba"`` or ``"reference"``). ``approximate`` (default: on unless the environment
    sets ``TENSORCODE_EXACT_MATH=1``) lets the compiled backends evaluate float32 ``tanh``,
    ``exp`` and ``sigmoid`` as vectorizable approximations within the ulp bounds of
    ``backends/numba/approx.py``; float64 and the reference backend are always exact.

    With ``optimizer`` (an optimizer that offers a fused rule: ``tc.optim.Sgd``, ``Adam``,
    ``AdamW`` or a ``RuleOptimizer``), the entry's roots must be a loss and its gradients
    (``adjoints.roots()``), and the result is a ``StepPlan`` (``step.py``): one call
    computes the loss and the gradients and updates the parameters and the optimizer's
    state in place."""
    check_backend(backend)  # before any work
    if approximate is None:
        approximate = os.environ.get("TENSORCODE_EXACT_MATH", "") not in ("1", "true", "yes")
    if optimizer is not None:
        return lower_step(entry, backend, bool(approximate), optimizer)
    graph, sources = entry.optimized()
    schedule = build(graph, sources)
    count("plans_lowered")
    return Plan(entry, schedule, backend, entry.origins(), bool(approximate))


__all__ = ["lower"]

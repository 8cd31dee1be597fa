"""What a guide example returns (``GuideResult``) and the examples in the guide's order
(``GUIDE``): the types the examples, their plates and the demo share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GuideResult:
    """What one guide example produced: ``lines`` to print, ``data`` for its plate
    (curves, samples, surfaces), and ``claims`` the tests check (named numbers)."""

    name: str
    title: str
    lines: list[str]
    data: dict[str, Any] = field(default_factory=dict)
    claims: dict[str, Any] = field(default_factory=dict)


#: guide example modules in the order the guide tells them
GUIDE: list[str] = [
    "spec_and_state",
    "learning_rates",
    "two_optimizers",
    "xor",
    "noisy_sine",
    "two_moons",
    "named_checkpoint",
]


__all__ = ["GuideResult", "GUIDE"]

"""``Tape``: the recorder users hold, which seals into a ``Network``.

Recording is the trace layer's (``trace/tape.py``'s ``Recorder``); sealing builds a
``Network``, which belongs to this layer, so the user's class lives here and the layers
below record through a ``Recorder`` without knowing networks exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..trace.tape import Recorder
from .network import Network


class Tape(Recorder):
    """A ``Recorder`` (``broadcast`` is its recording mode) that ``into_network()``
    seals into an immutable ``Network``."""

    def into_network(self) -> Network:
        """Seal the recording into an immutable ``Network``."""
        self._check_open()
        network = Network(self)
        self._network = network
        return network

    @staticmethod
    def record(fn: Callable[[Tape], Any]) -> tuple[Network, Any]:
        """Run ``fn(tape)`` on a fresh tape and seal it: ``(network, fn's result)``."""
        tape = Tape()
        result = fn(tape)
        return tape.into_network(), result


__all__ = ["Tape"]

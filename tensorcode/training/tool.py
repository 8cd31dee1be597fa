"""The ``Tool`` protocol: what ``Trainer.from_tool`` needs from an owned tool.

A tool owns its operations and knows how to train itself: which operations hold its
trainable parameters, which loss its predictions are trained on, how its modules switch
between training and evaluation, and how it predicts from inputs (using its operations,
so the prediction can be traced).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..ops.base import Operation


@runtime_checkable
class Tool(Protocol):
    """What a ``Trainer`` trains: operations holding the parameters, the objective
    its supervised predictions use, and its training-mode policy."""

    #: the operations holding the tool's trainable parameters, by stable name
    operations: Mapping[str, Operation]
    #: the loss name its supervised predictions are trained on ("cross_entropy", ...)
    objective: str

    def set_training(self, training: bool) -> None:
        """Apply the tool's training-mode policy to its operations."""

    def predict(self, inputs: Any) -> Any:
        """The output to supervise, computed by calling the tool's operations."""


__all__ = ["Tool"]

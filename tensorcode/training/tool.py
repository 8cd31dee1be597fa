"""The ``Tool`` protocol: what ``Trainer.from_tool`` needs from an owned tool.

A tool owns its operations and knows how to train itself: which operations hold its
trainable parameters, which loss its predictions are trained on, how its modules switch
between training and evaluation, and how it predicts from inputs (using its operations,
so the prediction can be traced).

Optional hooks the trainer uses when a tool has them: ``output(inputs)`` (the supervised
output, used instead of ``predict`` when the tool's predictions are richer than one
tensor), ``check_target(inputs, target)`` (the target in its loss's form, or
``TrainingError``) and ``losses`` (loss callables its objective names). The owned tools
in ``tensorcode.tools`` derive from ``tensorcode.tools.Tool``, which provides all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..operations.base import Operation


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

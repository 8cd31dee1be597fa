"""The exception hierarchy.

Every error TensorCode raises for bad input is a ``TensorCodeError`` so a caller can
catch the library's complaints in one place, and a subclass that says which stage
rejected the input. Messages say what was wrong and what to do about it.
"""

from __future__ import annotations

from typing import Any


class TensorCodeError(Exception):
    """Base class of every error TensorCode raises on purpose."""


class ShapeError(TensorCodeError):
    """Shapes do not fit an op's rule (names the op and the shapes)."""


class DTypeError(TensorCodeError):
    """Two dtypes met that do not mix silently; cast with ``.astype``."""


class FeedError(TensorCodeError):
    """A feed names an unknown or non-input symbol, or has the wrong type."""


class SourceLocated(Exception):
    """Mixin for errors that point into a source text (a program, an edit reply).

    ``line`` and ``column`` are 1-based; ``excerpt`` is the offending source line with a
    caret under the column. The message reads ``line L, column C: what was wrong``. It
    derives from ``Exception`` so its ``__init__`` can pass the message on; combine it
    with a ``TensorCodeError`` subclass (it comes first in the bases).
    """

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 excerpt: str | None = None) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.excerpt = excerpt
        text = message
        if line is not None:
            where = f"line {line}" + (f", column {column}" if column is not None else "")
            text = f"{where}: {message}"
        if excerpt:
            text = f"{text}\n{excerpt}"
        super().__init__(text)


class CompileError(SourceLocated, TensorCodeError):
    """A program or graph could not be compiled (with its place in the source, if any)."""


class LoweringError(CompileError):
    """The front end accepted a program but a backend failed to lower it to a plan: a
    TensorCode limitation, not a mistake in the program (``executor="reference"`` runs it).
    Distillation reports it as such instead of telling the author the program did not
    compile."""


class BackendError(TensorCodeError, ValueError):
    """A backend name that is not one of ``tensorcode.compiler.backends.BACKENDS``."""


class ArtifactError(TensorCodeError):
    """A file (checkpoint, plan, algorithm, patch, experience) failed validation.

    ``path`` names the file and ``field`` the part of it that was wrong.
    """

    def __init__(self, message: str, path: Any = None, field: str | None = None) -> None:
        self.path = None if path is None else str(path)
        self.field = field
        parts = []
        if self.path is not None:
            parts.append(self.path)
        if field is not None:
            parts.append(f"field {field!r}")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class PatchError(TensorCodeError):
    """An edit statement or weight patch is malformed or does not apply."""


class DistillationError(TensorCodeError):
    """No distillation attempt produced a usable program; ``attempts`` holds every
    attempt as the JSON-ready dict ``Distillation.attempts`` holds (``number``,
    ``phase``, ``stage``, ``prompt``, ``reply``, ``source``, ``parameters``, ``error``,
    ``design``, ``abstains``, ``note``)."""

    def __init__(self, message: str, attempts: list | None = None) -> None:
        self.attempts = list(attempts or [])
        super().__init__(message)


class TrainingError(TensorCodeError):
    """A training step cannot proceed: nondifferentiable, disconnected or nonfinite."""


class CacheError(TensorCodeError):
    """The plan cache directory cannot be trusted or used (owner, mode, not writable);
    plans are then compiled in memory instead."""


class WorkerError(TensorCodeError):
    """A distributed worker failed, died or did not answer in time; names the worker
    and carries the underlying error as ``__cause__``."""


class RandomError(TensorCodeError, ValueError):
    """A random draw's argument is out of range (a dropout ``p``, a temperature, a
    ``top_k`` or ``top_p``), or a plan that draws random numbers was run without a
    generator."""


class MissingExtraError(TensorCodeError, ImportError):
    """An optional extra (matplotlib for ``plot``, starlette for ``serve``, Ray for
    ``distributed``, PyTorch for ``torch``) is not installed; the message names the
    extra and the ``pip install`` line. Raised only by ``tensorcode.extras.require``.

    It is an ``ImportError`` too, so code that guards an optional import the usual way
    (``except ImportError``) catches it; ``name`` is the module that could not be
    imported and ``extra`` the extra that provides it."""

    def __init__(self, message: str, name: str, extra: str) -> None:
        super().__init__(message, name=name)
        self.extra = extra


class StaleWeightsError(TensorCodeError):
    """State derived from a model's weights (a calibration, an index) no longer matches
    them: the weights changed since it was made. Refit or rebuild it."""


__all__ = [
    "TensorCodeError", "ShapeError", "DTypeError", "FeedError", "CompileError",
    "LoweringError", "BackendError", "ArtifactError", "PatchError", "DistillationError",
    "TrainingError",
    "CacheError",
    "WorkerError",
    "RandomError",
    "StaleWeightsError",
    "MissingExtraError",
]

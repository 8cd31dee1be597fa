"""The documented import path of ``record_backward`` before the compiler was cut into
layers; the code lives in ``trace.autodiff`` and ``trace.backward``.

Deprecated: importing it warns; it is removed in release 0.2.0."""

import warnings

from .trace.autodiff import gradients
from .trace.backward import record_backward

warnings.warn("tensorcode.compiler.autodiff is deprecated (removed in 0.2.0): import "
              "tensorcode.compiler.trace.autodiff (gradients) and "
              "tensorcode.compiler.trace.backward (record_backward) instead",
              DeprecationWarning, stacklevel=2)

__all__ = ["gradients", "record_backward"]

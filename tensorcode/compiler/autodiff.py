"""The documented import path of ``record_backward`` before the compiler was cut into
layers; the code lives in ``trace.autodiff`` and ``trace.backward``."""

from .trace.autodiff import gradients
from .trace.backward import record_backward

__all__ = ["gradients", "record_backward"]

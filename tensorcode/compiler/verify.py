"""The documented import path of ``verify`` before the compiler was cut into layers; the
code lives in ``core.verify``."""

from .core.verify import verify

__all__ = ["verify"]

"""Checkpoints (``tc.checkpoint``), importable as ``import tensorcode.checkpoint``.

Implemented in ``tensorcode.runtime.checkpoint``; this module is the public address and
re-exports exactly that module's ``__all__``.
"""

from .runtime.checkpoint import *  # noqa: F403  (the public names: runtime.checkpoint.__all__)
from .runtime.checkpoint import __all__  # noqa: F401

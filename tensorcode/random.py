"""Randomness (``tc.random``), importable as ``import tensorcode.random`` the way
``jax.random`` is: the ``Generator``, sampling and the recorded random draws.

Implemented in ``tensorcode.runtime.random``; this module is the public address and
re-exports exactly that module's ``__all__``.
"""

from .runtime.random import *  # noqa: F403  (the public names: runtime.random.__all__)
from .runtime.random import __all__  # noqa: F401

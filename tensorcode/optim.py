"""Optimizers (``tc.optim``), importable as ``import tensorcode.optim`` the way
``torch.optim`` is.

The optimizers are implemented in ``tensorcode.runtime.optim`` (with the runtime's other
state: checkpoints and the generator); this module is their public address and re-exports
exactly that module's ``__all__``, so the two never list different names.
"""

from .runtime.optim import *  # noqa: F403  (the public names: runtime.optim.__all__)
from .runtime.optim import __all__  # noqa: F401

"""Initializers (``tc.init``), importable as ``import tensorcode.init``.

``tc.init`` is the short spelling of ``tc.nn.init`` (PyTorch's home for initializers,
``torch.nn.init``): the initializers are defined once, in ``tensorcode.nn.init``, and this
module re-exports exactly that module's ``__all__``, so ``tc.init.xavier is
tc.nn.init.xavier``.
"""

from .nn.init import *  # noqa: F403  (the public names: nn.init.__all__)
from .nn.init import __all__  # noqa: F401

"""The documented import path of the op registry before the compiler was cut into layers;
the registry is ``core.registry``.

Deprecated: importing it warns; it is removed in release 0.2.0."""

import warnings

from .core.registry import *  # noqa: F403

warnings.warn("tensorcode.compiler.primitives is deprecated (removed in 0.2.0): import "
              "tensorcode.compiler.core.registry instead",
              DeprecationWarning, stacklevel=2)

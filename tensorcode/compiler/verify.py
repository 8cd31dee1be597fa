"""The documented import path of ``verify`` before the compiler was cut into layers; the
code lives in ``core.verify``.

Deprecated: importing it warns; it is removed in release 0.2.0."""

import warnings

from .core.verify import verify

warnings.warn("tensorcode.compiler.verify is deprecated (removed in 0.2.0): import "
              "tensorcode.compiler.core.verify instead",
              DeprecationWarning, stacklevel=2)

__all__ = ["verify"]

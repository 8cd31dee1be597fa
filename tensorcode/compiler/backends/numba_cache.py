"""The documented import path of ``plans_directory`` before the Numba backend became a
package; the code lives in ``backends.plan_directory``.

Deprecated: importing it warns; it is removed in release 0.2.0."""

import warnings

from .plan_directory import plans_directory

warnings.warn("tensorcode.compiler.backends.numba_cache is deprecated (removed in 0.2.0): import "
              "tensorcode.compiler.backends.plan_directory instead",
              DeprecationWarning, stacklevel=2)

__all__ = ["plans_directory"]

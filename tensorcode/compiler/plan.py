"""The documented import path of ``Plan``, ``Entry`` and the compile counters before the
compiler was cut into layers; the code lives in ``plans.plan`` and ``backends``.

Deprecated: importing it warns; it is removed in release 0.2.0."""

import warnings

from .plans.plan import Entry, Plan, cache_dir, compile_stats

warnings.warn("tensorcode.compiler.plan is deprecated (removed in 0.2.0): import "
              "tensorcode.compiler.plans.plan instead",
              DeprecationWarning, stacklevel=2)

__all__ = ["Entry", "Plan", "cache_dir", "compile_stats"]

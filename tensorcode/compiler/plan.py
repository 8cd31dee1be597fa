"""The documented import path of ``Plan``, ``Entry`` and the compile counters before the
compiler was cut into layers; the code lives in ``plans.plan`` and ``backends``."""

from .plans.plan import Entry, Plan, cache_dir, compile_stats

__all__ = ["Entry", "Plan", "cache_dir", "compile_stats"]

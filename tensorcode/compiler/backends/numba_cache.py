"""The documented import path of ``plans_directory`` before the Numba backend became a
package; the code lives in ``backends.plan_directory``."""

from .plan_directory import plans_directory

__all__ = ["plans_directory"]

"""The documented import path of the op registry before the compiler was cut into layers;
the registry is ``core.registry``."""

from .core.registry import *  # noqa: F403

"""Deprecated: the former name of ``tensorcode.operations.vec`` (removed in the next minor
release); importing it warns (through ``tensorcode.ops``) and re-exports that module."""

from ..operations.vec import *  # noqa: F403  (the public names: operations.vec.__all__)
from ..operations.vec import __all__  # noqa: F401

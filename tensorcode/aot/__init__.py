"""Plans ahead of time: a plan or a router as a shared library with a C header.

``Plan.export(dir)`` and ``Distillation.export(dir)`` (or ``tensorcode export PATH -o
DIR``) write ``lib<name>.so``, ``<name>.h`` and ``manifest.json`` (``export.py``);
``load(dir)`` opens one with ctypes after checking every file's hash (``load.py``),
importing neither llvmlite nor numba. See ``docs/embedding.md``.
"""

from __future__ import annotations

from .load import Loaded, load

__all__ = ["Loaded", "load"]

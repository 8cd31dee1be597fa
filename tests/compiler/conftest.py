"""The compiler's tests share small graphs (``compiler_graphs``) and a few programs
across layers (the llvm backend's tests reuse the random ops' program): this directory
and each layer directory are on the path, so a test imports them by module name."""

from __future__ import annotations

import pathlib
import sys

_HERE = pathlib.Path(__file__).resolve().parent
for _directory in [_HERE, *sorted(p for p in _HERE.iterdir() if p.is_dir() and p.name[0] != "_")]:
    if str(_directory) not in sys.path:
        sys.path.insert(0, str(_directory))

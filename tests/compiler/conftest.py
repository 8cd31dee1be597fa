"""The compiler's tests share small graphs (``compiler_graphs``): the layer directories
below import it by name, so this directory is on the path for them."""

from __future__ import annotations

import pathlib
import sys

_HERE = str(pathlib.Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

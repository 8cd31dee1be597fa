"""The constants of an exported library's C interface, in one place: what the renderer
writes into the header and the loader reads back (kept apart from the renderer, so the
loader imports only these)."""

from __future__ import annotations

import re

#: a library's name: the file ``lib<name>.so``, the header ``<name>.h`` and the prefix
#: of every C symbol
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,47}\Z")
#: the dtype codes of the C interface
DTYPE_CODES = {"float32": 1, "float64": 2, "int32": 3, "int64": 4}
#: the status codes of the C interface (the header names them ``<NAME>_OK`` ...)
STATUS = {"OK": 0, "ERROR_ARGUMENT": 1, "ERROR_MEMORY": 2, "ERROR_INPUT": 3}

__all__ = ["DTYPE_CODES", "NAME_PATTERN", "STATUS"]

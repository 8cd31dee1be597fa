"""The artifact toolkit: every file TensorCode writes or reads goes through here.

- ``atomic``: atomic writes of files and directory artifacts (old or new, never half).
- ``strict_json``: strict, bounded JSON (no duplicate keys, NaN/Infinity, deep nesting,
  oversized files or out-of-range integers).
- ``fields``: the validating reader that names the file and the field path.
- ``header``: the one check of a file's ``format`` and ``version`` fields.
- ``tensorfile``: every safetensors read and write, validated and checksummed.

This package sits below the compiler: it imports nothing from the compiler, the runtime
or the products, so any of them may use it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - the names below, loaded on first use
    from .atomic import (
                         atomic_write,
                         atomic_write_bytes,
                         atomic_write_json,
                         atomic_write_text,
                         fsync_directory,
                         remove_stale_temporaries,
                         replace_directory,
    )
    from .fields import Fields, at, describe, is_int
    from .header import check_header
    from .strict_json import (
                         DEFAULT_LIMITS,
                         MAX_JSON_BYTES,
                         JsonLimits,
                         decode,
                         dumps,
                         parse_json,
                         read_json,
    )
    from .tensorfile import TensorFile, load_tensors, read_tensors, save_tensors, write_tensors

#: public name -> the module of this package defining it: a name is imported on first
#: use (PEP 562), so a reader of JSON manifests (``tensorcode.aot``'s loader) does not
#: pay for the safetensors and atomic-write modules
_HOMES = {
    **dict.fromkeys(("atomic_write", "atomic_write_bytes", "atomic_write_json",
                     "atomic_write_text", "fsync_directory", "remove_stale_temporaries",
                     "replace_directory"), "atomic"),
    **dict.fromkeys(("Fields", "at", "describe", "is_int"), "fields"),
    "check_header": "header",
    **dict.fromkeys(("DEFAULT_LIMITS", "MAX_JSON_BYTES", "JsonLimits", "decode", "dumps",
                     "parse_json", "read_json"), "strict_json"),
    **dict.fromkeys(("TensorFile", "read_tensors", "write_tensors", "save_tensors",
                     "load_tensors"), "tensorfile"),
}


def __getattr__(name: str) -> Any:
    """Load a public name on first use and keep it as a module attribute."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_json", "atomic_write_text",
           "fsync_directory", "replace_directory", "remove_stale_temporaries", "Fields", "at",
           "describe", "is_int", "check_header",
           "JsonLimits", "DEFAULT_LIMITS", "MAX_JSON_BYTES", "decode", "dumps", "parse_json",
           "read_json", "TensorFile", "read_tensors", "write_tensors", "save_tensors",
           "load_tensors"]

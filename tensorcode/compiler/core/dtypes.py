"""The dtypes the compiler supports, in one table: names, the short names of the textual
form, NumPy's dtype objects and the NumPy scalar types as generated source.

Every other module asks this one (``DTYPES``, ``FLOAT_DTYPES``, ``canonical_dtype``, ...)
instead of spelling a table of its own; ``tests/test_architecture.py`` searches the
compiler for a second one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import DTypeError

#: dtypes a node may carry, with the short names the textual form uses.
DTYPES: dict[str, str] = {
    "float32": "f32",
    "float64": "f64",
    "int32": "i32",
    "int64": "i64",
}
SHORT_DTYPES = {short: name for name, short in DTYPES.items()}
FLOAT_DTYPES = frozenset({"float32", "float64"})
INT_DTYPES = frozenset({"int32", "int64"})
#: each dtype's NumPy dtype object (comparing against it costs no string)
NUMPY: dict[str, np.dtype] = {name: np.dtype(name) for name in DTYPES}
#: the name of each of those dtype objects (a dict lookup where ``dtype.name`` costs
#: microseconds); a byte-swapped or otherwise different dtype is not in it
NAME_OF_NUMPY: dict[np.dtype, str] = {dtype: name for name, dtype in NUMPY.items()}
#: each dtype's NumPy scalar type as generated source (``np.float32``)
NUMPY_SOURCE: dict[str, str] = {name: f"np.{name}" for name in DTYPES}


def canonical_dtype(dtype: Any) -> str:
    """Return the dtype's canonical name, or raise ``DTypeError`` for unsupported ones."""
    if type(dtype) is str and dtype in DTYPES:  # already canonical: every Type the passes
        return dtype  # build, where asking NumPy would cost microseconds each
    try:
        name = np.dtype(dtype).name
    except TypeError as error:
        raise DTypeError(f"{dtype!r} is not a dtype; use one of {sorted(DTYPES)}") from error
    if name not in DTYPES:
        raise DTypeError(f"dtype {name} is not supported; use one of {sorted(DTYPES)}")
    return name


__all__ = ["DTYPES", "SHORT_DTYPES", "FLOAT_DTYPES", "INT_DTYPES", "NUMPY", "NAME_OF_NUMPY",
           "NUMPY_SOURCE", "canonical_dtype"]

"""The content hash that pins a patch to the exact tensors it was made from.

``tensor_sha256(array)`` is the SHA-256 hex digest of this byte string::

    b"tensorcode.tensor.v1\\n"
    + dtype name (NumPy's canonical name: "float32", "int64", "bool") + b"\\n"
    + shape as decimal sizes joined by "," (empty for a scalar)      + b"\\n"
    + the elements in C (row-major) order, each in little-endian byte order

so two tensors hash alike exactly when they have the same dtype, the same shape and
bit-identical elements (``-0.0`` and ``0.0`` differ; NaNs with different payloads
differ), whatever the memory layout or byte order they were stored with. The header
keeps a ``float32[2, 2]`` from colliding with an ``int32[4]`` of the same bytes.
"""

from __future__ import annotations

import hashlib

import numpy as np

HASH_VERSION = "tensorcode.tensor.v1"


def canonical_bytes(array: np.ndarray) -> bytes:
    """The elements of ``array`` in C order and little-endian byte order."""
    array = np.asarray(array)
    little = array.dtype.newbyteorder("<") if array.dtype.byteorder not in ("|", "=", "<") \
        else array.dtype
    if array.dtype.byteorder == "=" and not np.little_endian:  # pragma: no cover
        little = array.dtype.newbyteorder("<")
    return np.ascontiguousarray(array, dtype=little).tobytes(order="C")


def tensor_sha256(array: np.ndarray) -> str:
    """SHA-256 (hex) over dtype name, shape and little-endian C-order bytes."""
    array = np.asarray(array)
    header = (f"{HASH_VERSION}\n{array.dtype.name}\n"
              f"{','.join(str(int(n)) for n in array.shape)}\n").encode("ascii")
    digest = hashlib.sha256(header)
    little = array.dtype.byteorder == "<" or (array.dtype.byteorder in ("=", "|")
                                              and np.little_endian)
    if little and array.flags.c_contiguous:
        digest.update(array.reshape(-1).view(np.uint8).data)  # no copy
    else:
        digest.update(canonical_bytes(array))
    return digest.hexdigest()


__all__ = ["tensor_sha256", "canonical_bytes", "HASH_VERSION"]

"""Safetensors files, written atomically and read with validation.

The format is the public one (an 8-byte little-endian header length, a JSON header of
``name -> {dtype, shape, data_offsets}`` plus ``__metadata__``, then the raw bytes), so
``safetensors.numpy.load_file`` reads what this writes and this reads what it writes.
Writing here instead of through ``safetensors.numpy.save_file`` lets one pass over the
bytes both write and checksum them, straight from the arrays with no intermediate copy;
reading here checks every header field and bound before any array is made, and hashes
the bytes it already read. Nothing in a file is ever evaluated or unpickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import struct
import uuid
from typing import Any, BinaryIO, Callable, Mapping

import numpy as np

from ..errors import ArtifactError

#: NumPy dtype name <-> safetensors dtype code
DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64",
          "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "uint16": "U16",
          "uint32": "U32", "uint64": "U64", "bool": "BOOL"}
_NUMPY = {code: name for name, code in DTYPES.items()}
#: a header larger than this is refused before it is parsed
MAX_HEADER_BYTES = 100 * 1024 * 1024
_CHUNK = 1 << 24


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> Any:
    """Write ``path`` through a temp file in the same directory: ``write(file)``, fsync,
    ``os.replace``, fsync the directory. The file is complete or absent, never partial.
    Returns what ``write`` returned."""
    path = pathlib.Path(path)
    temp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(temp, "wb") as handle:
            result = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            temp.unlink()
        except FileNotFoundError:
            pass
        raise
    fsync_directory(path.parent)
    return result


def fsync_directory(directory: str | os.PathLike) -> None:
    """Make a rename or unlink in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _header(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None) -> bytes:
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, array in tensors.items():
        if array.dtype.name not in DTYPES:
            raise TypeError(f"tensor {name!r}: dtype {array.dtype} has no safetensors code")
        nbytes = array.size * array.itemsize
        header[name] = {"dtype": DTYPES[array.dtype.name], "shape": list(array.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)  # align the data section to 8 bytes
    return struct.pack("<Q", len(text)) + text


def write_tensors(handle: BinaryIO, tensors: Mapping[str, np.ndarray],
                  metadata: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Write a safetensors file to ``handle``; returns the SHA-256 of the whole file and
    of its data section (the tensor bytes alone)."""
    arrays = {name: _little_endian(contiguous(a)) for name, a in tensors.items()}
    header = _header(arrays, metadata)
    whole, data = hashlib.sha256(header), hashlib.sha256()
    handle.write(header)
    for array in arrays.values():
        view = memoryview(array.reshape(-1)).cast("B")
        for start in range(0, len(view), _CHUNK):
            chunk = view[start:start + _CHUNK]
            handle.write(chunk)
            whole.update(chunk)
            data.update(chunk)
    return whole.hexdigest(), data.hexdigest()


def contiguous(array: np.ndarray) -> np.ndarray:
    """``array`` in C order (0-d arrays stay 0-d, unlike ``np.ascontiguousarray``)."""
    array = np.asarray(array)
    return array if array.flags.c_contiguous else np.array(array, order="C")


def _little_endian(array: np.ndarray) -> np.ndarray:
    if array.dtype.byteorder == ">":
        return array.astype(array.dtype.newbyteorder("<"))
    return array


def read_tensors(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, str], str, str]:
    """``(tensors, metadata, file_sha256, data_sha256)`` from a safetensors file, every
    header field validated; the arrays are views into one private buffer. Raises
    ``ArtifactError`` naming the file and the field on any defect."""
    path = pathlib.Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            raw = bytearray(size)
            view = memoryview(raw)
            got = 0
            while got < size:
                n = handle.readinto(view[got:])
                if not n:
                    break
                got += n
    except OSError as error:
        raise ArtifactError(f"cannot read the tensor file: {error.strerror or error}",
                            path=path) from error
    if got != size:
        raise ArtifactError(f"the file shrank while it was read ({got} of {size} bytes)",
                            path=path)
    if size < 8:
        raise ArtifactError(f"truncated: {size} bytes is shorter than the 8-byte header "
                            "length", path=path, field="header")
    (length,) = struct.unpack("<Q", raw[:8])
    if length > MAX_HEADER_BYTES or 8 + length > size:
        raise ArtifactError(f"header length {length} does not fit the file's {size} bytes "
                            "(truncated or not a safetensors file)", path=path, field="header")
    whole = hashlib.sha256(view).hexdigest()
    data_view = view[8 + length:]
    data_digest = hashlib.sha256(data_view).hexdigest()
    try:
        header = json.loads(bytes(raw[8:8 + length]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ArtifactError(f"the header is not valid JSON: {error}", path=path,
                            field="header") from error
    if not isinstance(header, dict):
        raise ArtifactError("the header must be a JSON object", path=path, field="header")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in metadata.items()):
        raise ArtifactError("__metadata__ must map strings to strings", path=path,
                            field="__metadata__")
    spans = []
    for name, entry in header.items():
        field = f"tensor {name}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise ArtifactError("expected {dtype, shape, data_offsets}", path=path, field=field)
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in _NUMPY:
            raise ArtifactError(f"unknown dtype {dtype!r}", path=path, field=field + ".dtype")
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ArtifactError(f"bad shape {shape!r}", path=path, field=field + ".shape")
        if not (isinstance(offsets, list) and len(offsets) == 2 and
                all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
            raise ArtifactError(f"bad data_offsets {offsets!r}", path=path,
                                field=field + ".data_offsets")
        itemsize = np.dtype(_NUMPY[dtype]).itemsize
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if offsets[1] - offsets[0] != count * itemsize:
            raise ArtifactError(f"data_offsets {offsets} hold {offsets[1] - offsets[0]} bytes, "
                                f"shape {shape} of {dtype} needs {count * itemsize}",
                                path=path, field=field + ".data_offsets")
        spans.append((offsets[0], offsets[1], name, _NUMPY[dtype], shape, count))
    spans.sort()
    cursor = 0
    for begin, end, name, *_ in spans:
        if begin != cursor:
            raise ArtifactError(f"data_offsets leave a gap or overlap at byte {cursor}",
                                path=path, field=f"tensor {name}.data_offsets")
        cursor = end
    if cursor != len(data_view):
        raise ArtifactError(f"the data section holds {len(data_view)} bytes but the header "
                            f"describes {cursor} (truncated or padded)", path=path,
                            field="data")
    base = 8 + length
    tensors = {}
    for begin, _end, name, dtype, shape, count in spans:
        tensors[name] = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"),
                                      count=count, offset=base + begin).reshape(shape)
    return tensors, metadata, whole, data_digest


__all__ = ["atomic_write", "fsync_directory", "write_tensors", "read_tensors", "DTYPES",
           "MAX_HEADER_BYTES"]

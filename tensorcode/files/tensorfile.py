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
import math
import os
import pathlib
import queue
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO

import numpy as np

from ..errors import ArtifactError
from .atomic import atomic_write
from .strict_json import JsonLimits, decode

#: NumPy dtype name <-> safetensors dtype code
DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64",
          "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "uint16": "U16",
          "uint32": "U32", "uint64": "U64", "bool": "BOOL"}
_NUMPY = {code: name for name, code in DTYPES.items()}
#: a header larger than this is refused before it is parsed
MAX_HEADER_BYTES = 100 * 1024 * 1024
#: the most dimensions a stored tensor may have (NumPy's own limit is 64)
MAX_RANK = 32
#: the most elements a stored tensor may describe, counting only its non-zero
#: dimensions (so a ``[0, 2**70]`` shape cannot pass as empty)
MAX_ELEMENTS = 2 ** 48


def shape_problem(shape: Any) -> str | None:
    """Why ``shape`` cannot describe a stored tensor (``None`` when it can): a list of
    at most ``MAX_RANK`` non-negative ints whose non-zero dimensions multiply to at most
    ``MAX_ELEMENTS``. Every reader of stored shapes (tensor files, experiences) asks
    this before NumPy sees the shape."""
    if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return f"bad shape {shape!r:.80}: expected a list of non-negative integers"
    if len(shape) > MAX_RANK:
        return f"shape has {len(shape)} dimensions, more than the {MAX_RANK} allowed"
    if math.prod(d for d in shape if d) > MAX_ELEMENTS:
        return f"shape {shape!r:.80} describes more than {MAX_ELEMENTS} elements"
    return None
_CHUNK = 1 << 20  # small enough that a chunk is still in cache when it is hashed


#: a 64-character stand-in a manifest may carry for the SHA-256 of the data section;
#: ``write_tensors(..., digest="data")`` fills it in once the bytes are written
DATA_DIGEST_PLACEHOLDER = "sha256-of-the-data-section-follows-" + "0" * 29
_HASH_IN_THREAD_BYTES = 1 << 22


class _Hasher:
    """SHA-256 fed chunk by chunk; above a few MiB a worker thread hashes while the
    caller reads or writes the next chunk (hashlib and file I/O release the GIL).

    The queue is unbounded: its items are views of the caller's arrays, never copies,
    so a writer that outruns the hash costs no memory and can go on to flush and fsync
    while the worker finishes (``start_tensors``). A ``deferred`` worker starts only at
    ``start()``: a writer whose next step is an fsync (which waits on the disk, not the
    CPU) lets the hash run then, instead of taking CPU from its own writes."""

    def __init__(self, first: bytes = b"", threaded: bool = False, deferred: bool = False
                 ) -> None:
        self._hash = hashlib.sha256(first)
        self._queue: queue.Queue[memoryview | None] | None = None
        self._started = False
        if threaded:
            self._queue = queue.Queue()
            self._thread = threading.Thread(target=self._work, args=(self._queue,), daemon=True)
            if not deferred:
                self.start()

    def start(self) -> None:
        """Start the worker (a deferred one; a no-op otherwise)."""
        if self._queue is not None and not self._started:
            self._started = True
            self._thread.start()

    def _work(self, chunks: queue.Queue[memoryview | None]) -> None:
        """The worker: hashes chunks until the ``None`` that ends the stream."""
        while True:
            chunk = chunks.get()
            if chunk is None:
                return
            self._hash.update(chunk)

    def update(self, chunk: memoryview) -> None:
        if self._queue is None:
            self._hash.update(chunk)
        else:
            self._queue.put(chunk)

    def hexdigest(self) -> str:
        if self._queue is not None:
            self.start()
            self._queue.put(None)
            self._thread.join()
            self._queue = None
        return self._hash.hexdigest()

    def abandon(self) -> None:
        if self._queue is not None:
            if self._started:
                self._queue.put(None)
                self._thread.join()
            self._queue = None


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


def _chunks(array: np.ndarray):
    view = array.reshape(-1).data.cast("B")
    for start in range(0, len(view), _CHUNK):
        yield view[start:start + _CHUNK]


def start_tensors(handle: BinaryIO, tensors: Mapping[str, np.ndarray],
                  metadata: Mapping[str, str] | None = None) -> Callable[[], str]:
    """Write a safetensors file to ``handle`` and return a function giving the SHA-256 of
    the whole file once the hash has caught up: the caller flushes and fsyncs the file
    in between, so the disk and the hash work at the same time (a large file's hash
    starts in a thread once the bytes are written: while the fsync waits on the disk,
    not while the writes need the CPU). Call the function even when the fsync fails (it
    ends the hashing thread)."""
    arrays = {name: _little_endian(contiguous(a)) for name, a in tensors.items()}
    header = _header(arrays, metadata)
    total = sum(a.nbytes for a in arrays.values())
    hasher = _Hasher(header, threaded=total >= _HASH_IN_THREAD_BYTES, deferred=True)
    try:
        handle.write(header)
        for array in arrays.values():
            for chunk in _chunks(array):
                handle.write(chunk)
                hasher.update(chunk)
    except BaseException:
        hasher.abandon()
        raise
    hasher.start()
    return hasher.hexdigest


def write_tensors(handle: BinaryIO, tensors: Mapping[str, np.ndarray],
                  metadata: Mapping[str, str] | None = None, digest: str = "file") -> str:
    """Write a safetensors file to ``handle`` (seekable) and return the SHA-256 of the
    whole file (``digest="file"``) or of its data section alone (``"data"``). With
    ``"data"``, a ``DATA_DIGEST_PLACEHOLDER`` in the metadata is replaced by that digest
    after the bytes are written (same length, so no offset moves)."""
    if digest not in ("file", "data"):
        raise ValueError(f"digest must be 'file' or 'data', got {digest!r}")
    arrays = {name: _little_endian(contiguous(a)) for name, a in tensors.items()}
    header = _header(arrays, metadata)
    total = sum(a.nbytes for a in arrays.values())
    hasher = _Hasher(header if digest == "file" else b"",
                     threaded=total >= _HASH_IN_THREAD_BYTES)
    try:
        handle.write(header)
        for array in arrays.values():
            for chunk in _chunks(array):
                handle.write(chunk)
                hasher.update(chunk)
    except BaseException:
        hasher.abandon()
        raise
    result = hasher.hexdigest()
    placeholder = DATA_DIGEST_PLACEHOLDER.encode()
    if digest == "data" and placeholder in header:
        handle.flush()
        handle.seek(0)
        handle.write(header.replace(placeholder, result.encode()))
        handle.seek(0, os.SEEK_END)
    return result


def _little_endian(array: np.ndarray) -> np.ndarray:
    if array.dtype.byteorder == ">":
        return array.astype(array.dtype.newbyteorder("<"))
    return array


def contiguous(array: np.ndarray) -> np.ndarray:
    """``array`` in C order (0-d arrays stay 0-d, unlike ``np.ascontiguousarray``)."""
    array = np.asarray(array)
    return array if array.flags.c_contiguous else np.array(array, order="C")


def _signature(info: os.stat_result) -> tuple[int, int, int, int]:
    """What identifies a file's contents without reading them: its device, inode, size
    and modification time (what a writer in place or a truncation changes)."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class TensorFile:
    """A safetensors file whose header has been read and validated; ``read`` then
    streams the tensors into arrays (the caller's, where given) while hashing them.

    ``entries`` maps each name to ``(dtype name, shape)`` in file order."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = pathlib.Path(path)
        path = self.path
        try:
            with open(path, "rb") as handle:
                info = os.fstat(handle.fileno())  # the file read here, whatever the path
                size = info.st_size              # names later
                prefix = handle.read(8)
                if len(prefix) < 8:
                    raise ArtifactError(f"truncated: {size} bytes is shorter than the 8-byte "
                                        "header length", path=path, field="header")
                (length,) = struct.unpack("<Q", prefix)
                if length > MAX_HEADER_BYTES or 8 + length > size:
                    raise ArtifactError(f"header length {length} does not fit the file's "
                                        f"{size} bytes (truncated or not a safetensors file)",
                                        path=path, field="header")
                text = handle.read(length)
        except OSError as error:
            raise ArtifactError(f"cannot read the tensor file: {error.strerror or error}",
                                path=path) from error
        self.header_bytes = prefix + text
        self.data_size = size - 8 - length
        #: the file whose header this is, as it was read: ``(device, inode, size,
        #: modification time in ns)``; a map is made only of this file, unchanged
        self.signature: tuple[int, int, int, int] = _signature(info)
        try:
            header = decode(text, JsonLimits(max_bytes=MAX_HEADER_BYTES, max_depth=8))
        except ValueError as error:
            raise ArtifactError(f"the header is not valid JSON: {error}", path=path,
                                field="header") from error
        if not isinstance(header, dict):
            raise ArtifactError("the header must be a JSON object", path=path, field="header")
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ArtifactError("__metadata__ must map strings to strings", path=path,
                                field="__metadata__")
        self.metadata: dict[str, str] = metadata
        spans = []
        for name, entry in header.items():
            field = f"tensor {name}"
            if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
                raise ArtifactError("expected {dtype, shape, data_offsets}", path=path,
                                    field=field)
            dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
            if not isinstance(dtype, str) or dtype not in _NUMPY:
                raise ArtifactError(f"unknown dtype {dtype!r:.80}: expected one of "
                                    f"{sorted(_NUMPY)}", path=path, field=field + ".dtype")
            problem = shape_problem(shape)
            if problem is not None:
                raise ArtifactError(problem, path=path, field=field + ".shape")
            if not (isinstance(offsets, list) and len(offsets) == 2 and
                    all(isinstance(o, int) and not isinstance(o, bool) and o >= 0
                        for o in offsets)):
                raise ArtifactError(f"bad data_offsets {offsets!r:.80}: expected two "
                                    "non-negative integers", path=path,
                                    field=field + ".data_offsets")
            itemsize = np.dtype(_NUMPY[dtype]).itemsize
            count = math.prod(shape)  # Python ints: a huge shape cannot wrap around
            if offsets[1] - offsets[0] != count * itemsize:
                raise ArtifactError(f"data_offsets {offsets} hold {offsets[1] - offsets[0]} "
                                    f"bytes, shape {shape} of {dtype} needs "
                                    f"{count * itemsize}", path=path,
                                    field=field + ".data_offsets")
            spans.append((offsets[0], offsets[1], name, _NUMPY[dtype], tuple(shape)))
        spans.sort()
        cursor = 0
        for begin, end, name, *_ in spans:
            if begin != cursor:
                raise ArtifactError(f"data_offsets leave a gap or overlap at byte {cursor}",
                                    path=path, field=f"tensor {name}.data_offsets")
            cursor = end
        if cursor != self.data_size:
            raise ArtifactError(f"the data section holds {self.data_size} bytes but the "
                                f"header describes {cursor} (truncated or padded)",
                                path=path, field="data")
        self.entries: dict[str, tuple[str, tuple[int, ...]]] = {
            name: (dtype, shape) for _, _, name, dtype, shape in spans}

    def read(self, targets: Mapping[str, np.ndarray] | None = None, digest: str = "file"
             ) -> tuple[dict[str, np.ndarray], str]:
        """Every tensor, read straight into ``targets[name]`` where given (a writable
        C-contiguous array of the entry's shape and dtype) or a new array, and the
        SHA-256 of the whole file (``"file"``) or of the data section (``"data"``)."""
        targets = targets or {}
        path = self.path
        hasher = _Hasher(self.header_bytes if digest == "file" else b"",
                         threaded=self.data_size >= _HASH_IN_THREAD_BYTES)
        result: dict[str, np.ndarray] = {}
        try:
            with open(path, "rb") as handle:
                handle.seek(len(self.header_bytes))
                for name, (dtype, shape) in self.entries.items():
                    array = targets.get(name)
                    if array is None:
                        array = np.empty(shape, dtype=np.dtype(dtype))
                    elif array.shape != shape or array.dtype.name != dtype or \
                            not array.flags.c_contiguous or not array.flags.writeable:
                        raise ValueError(f"target for {name!r} must be a writable C-order "
                                         f"{dtype}{list(shape)}")
                    for chunk in _chunks(array):
                        got = handle.readinto(chunk)
                        if got != len(chunk):
                            raise ArtifactError("the file ended early (truncated while "
                                                "reading)", path=path, field=f"tensor {name}")
                        hasher.update(chunk)
                    result[name] = array
        except OSError as error:
            hasher.abandon()
            raise ArtifactError(f"cannot read the tensor file: {error.strerror or error}",
                                path=path) from error
        except BaseException:
            hasher.abandon()
            raise
        return result, hasher.hexdigest()

    def map_run(self, names: Sequence[str]) -> np.ndarray | None:
        """The tensors ``names`` as one flat copy-on-write memory map of the file, when
        they are of one dtype and lie back to back in the file in exactly this order
        (aligned to their item size); ``None`` otherwise. Nothing is read until used:
        pages come from the operating system's file cache, and a write (after making the
        array writable) changes a private copy of that page, never the file. The file
        must not be truncated in place while the map lives (replacing it atomically, as
        every TensorCode writer does, is safe).

        The map is made of the file whose header was read, unchanged since (same
        identity, size and modification time, checked on the open file before and after
        mapping): a file truncated or replaced since is an ``ArtifactError``, never a map
        past its end (whose pages would end the process with ``SIGBUS`` when read)."""
        dtypes = {self.entries[n][0] for n in names if n in self.entries}
        if len(dtypes) != 1 or len(names) != len(set(names)) or \
                any(n not in self.entries for n in names):
            return None
        kind = np.dtype(dtypes.pop())
        starts = self._starts()
        begin = position = starts[names[0]]
        for name in names:
            if starts[name] != position:
                return None
            position += math.prod(self.entries[name][1]) * kind.itemsize
        if begin % kind.itemsize or position == begin:
            return None
        try:
            with open(self.path, "rb") as handle:
                self._check_unchanged(os.fstat(handle.fileno()))
                mapped: np.ndarray = np.memmap(handle, dtype=kind, mode="c", offset=begin,
                                               shape=((position - begin) // kind.itemsize,))
                self._check_unchanged(os.fstat(handle.fileno()))
        except (OSError, ValueError) as error:  # gone, or shorter than the map (mmap's
            raise ArtifactError(f"cannot map the tensor file: {error}",  # ValueError)
                                path=self.path, field="data") from None
        return mapped.view(np.ndarray)

    def _check_unchanged(self, info: os.stat_result) -> None:
        if _signature(info) != self.signature:
            raise ArtifactError("the tensor file changed since its header was read (it was "
                                "truncated, rewritten in place or replaced); read it again",
                                path=self.path, field="data")

    def _starts(self) -> dict[str, int]:
        """Where each entry's bytes begin in the file."""
        cursor = len(self.header_bytes)
        starts = {}
        for name, (dtype, shape) in self.entries.items():  # file order
            starts[name] = cursor
            cursor += math.prod(shape) * np.dtype(dtype).itemsize
        return starts

    def read_into(self, targets: Mapping[str, np.ndarray]) -> None:
        """Read the named entries straight into ``targets[name]`` (each a writable
        C-contiguous array of the entry's shape and dtype, such as a view of a table's
        flat buffer), skipping the other entries and computing no digest: one copy from
        the file to where the values live. Every target is checked before any byte is
        read; a file that changes underneath and ends early raises ``ArtifactError``."""
        path = self.path
        for name, array in targets.items():
            if name not in self.entries:
                raise ValueError(f"{path} has no tensor {name!r}")
            dtype, shape = self.entries[name]
            if array.shape != shape or array.dtype.name != dtype or \
                    not array.flags.c_contiguous or not array.flags.writeable:
                raise ValueError(f"target for {name!r} must be a writable C-order "
                                 f"{dtype}{list(shape)}")
        offsets = self._starts()
        try:
            with open(path, "rb", buffering=0) as handle:
                for name in sorted(targets, key=offsets.__getitem__):
                    handle.seek(offsets[name])
                    view = targets[name].reshape(-1).data.cast("B")
                    done = 0
                    while done < len(view):
                        got = handle.readinto(view[done:])
                        if not got:
                            raise ArtifactError("the file ended early (truncated while "
                                                "reading)", path=path, field=f"tensor {name}")
                        done += got
        except OSError as error:
            raise ArtifactError(f"cannot read the tensor file: {error.strerror or error}",
                                path=path) from error


def read_tensors(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, str], str, str]:
    """``(tensors, metadata, file_sha256, data_sha256)`` from a safetensors file, every
    header field validated. Raises ``ArtifactError`` naming the file and the field."""
    tensor_file = TensorFile(path)
    tensors, whole = tensor_file.read(digest="file")
    data = hashlib.sha256()
    for array in tensors.values():
        data.update(contiguous(array).reshape(-1).data.cast("B"))
    return tensors, tensor_file.metadata, whole, data.hexdigest()


def save_tensors(path: str | os.PathLike, tensors: Mapping[str, np.ndarray],
                 metadata: Mapping[str, str] | None = None) -> str:
    """Write ``tensors`` to ``path`` as a safetensors file, atomically; returns the
    SHA-256 of the file."""
    return atomic_write(path, lambda handle: write_tensors(handle, tensors, metadata))


def load_tensors(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """``(tensors, metadata)`` of a safetensors file, every header field validated
    (``ArtifactError`` naming the file and the field; a missing file says so)."""
    if not os.path.isfile(path):
        raise ArtifactError("no such file", path=path)
    tensor_file = TensorFile(path)
    tensors, _ = tensor_file.read()
    return tensors, tensor_file.metadata


__all__ = ["write_tensors", "start_tensors", "read_tensors", "save_tensors", "load_tensors",
           "TensorFile", "contiguous", "DTYPES", "MAX_HEADER_BYTES", "DATA_DIGEST_PLACEHOLDER",
           "MAX_RANK", "MAX_ELEMENTS", "shape_problem"]

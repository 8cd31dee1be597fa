"""Batch bodies as safetensors files: the cases' numbers as raw floats, nothing to parse.

Any JSON library that builds a Python object per number spends about 2 µs per case of a
dozen numbers before NumPy sees them, which caps a JSON batch well below a million
cases a second. A safetensors body (``Content-Type: application/vnd.safetensors``)
holds one tensor per input of the router's contract, ``[n, *declared shape]``, float64
or float32 (little-endian, as the format says): the ``safetensors`` library (Rust)
checks the file's structure (header length, a UTF-8 JSON header, offsets that cover the
data exactly and never overlap) and hands over the bytes, which become the arrays the
plan's batch path takes, in microseconds.

The rules are the JSON batch's (``tensorcode.distill.inputs``), from the same homes:
the size limit, exactly the contract's names (``missing``, ``unexpected``), at most
``max_cases`` cases (``too_many``) and finite numbers (``not_finite``, naming the first
case as ``[i].name`` with the message the JSON batch gives for that case). What only a
tensor can get wrong is refused here: a dtype other than F64/F32 (``type``), a shape
other than ``[n, *declared]`` or tensors holding different numbers of cases (``shape``),
and a body that is not a safetensors file (``safetensors``, HTTP 400), including one
whose header repeats a name (the library would keep one of the two silently).
Nothing in a body is evaluated or unpickled: it is bytes, a JSON header and numbers.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import safetensors

from ..distill.inputs import (
    Contract,
    InputError,
    check_count,
    check_names,
    check_size,
    check_value,
    read_document,
)

#: the ``Content-Type`` of a safetensors batch body (parameters after ``;`` are ignored)
MEDIA_TYPE = "application/vnd.safetensors"
_MEDIA_TYPE_BYTES = MEDIA_TYPE.encode()

#: the safetensors dtype codes a batch body may hold, as little-endian NumPy dtypes
DTYPES: dict[str, np.dtype[Any]] = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4")}

_SEND = ("send a safetensors file of one float64 or float32 tensor per input, "
         "[cases, *declared shape]")


def is_safetensors(content_type: bytes) -> bool:
    """Whether a ``Content-Type`` header value names the safetensors batch body
    (case-insensitively, parameters ignored)."""
    return content_type.partition(b";")[0].strip().lower() == _MEDIA_TYPE_BYTES


def read_safetensors_batch(body: bytes, contract: Contract, limit: int,
                           max_cases: int | None = None) -> dict[str, np.ndarray]:
    """A safetensors batch body as ``{name: float64 array [n, *shape]}``, the arrays a
    JSON batch of the same cases reads to; ``InputError`` says what is wrong (see the
    module's docstring for the rules and kinds)."""
    check_size(body, limit)
    try:
        entries = safetensors.deserialize(body)
    except safetensors.SafetensorError as error:
        raise InputError(f"not a safetensors file ({error}); {_SEND}", None,
                         "safetensors") from None
    _refuse_repeated_names(body, limit)
    tensors: dict[str, Any] = dict(entries)
    check_names(tensors, contract)
    count = _count(tensors, contract)
    check_count(count, max_cases)
    stacked = {}
    for name, shape in contract.items():
        entry = tensors[name]
        array = np.frombuffer(entry["data"], dtype=DTYPES[entry["dtype"]])
        if array.dtype != np.float64:
            array = array.astype(np.float64)
        stacked[name] = array.reshape(count, *shape)
    _refuse_non_finite(stacked, contract, count)
    return stacked


def _refuse_repeated_names(body: bytes, limit: int) -> None:
    """Refuse a header that names a tensor twice, which the library reads as its last
    entry: the header is read by the strict JSON reader, which refuses duplicate keys
    (the library has already checked its length and that it is UTF-8 JSON)."""
    (length,) = struct.unpack_from("<Q", body)
    try:
        read_document(body[8:8 + length], limit)
    except InputError as error:
        raise InputError(f"the safetensors header is not strict JSON ({error}); {_SEND}",
                         None, "safetensors") from None


def _count(tensors: dict[str, Any], contract: Contract) -> int:
    """The number of cases every input's tensor holds, after checking each tensor's
    dtype and shape against the contract."""
    count: int | None = None
    first = ""
    for name, shape in contract.items():
        entry = tensors[name]
        if entry["dtype"] not in DTYPES:
            raise InputError(f"{name}: a tensor of dtype {entry['dtype']}; a batch body "
                             f"holds F64 or F32 tensors", name, "type")
        held = tuple(entry["shape"])
        if len(held) != 1 + len(shape) or held[1:] != shape:
            raise InputError(f"{name}: has shape {list(held)}, a batch of n cases needs "
                             f"[n, {', '.join(map(str, shape))}]" if shape else
                             f"{name}: has shape {list(held)}, a batch of n cases needs [n]",
                             name, "shape")
        if count is None:
            count, first = held[0], name
        elif held[0] != count:
            raise InputError(f"{name}: holds {held[0]} cases and {first} {count}; every "
                             f"input's tensor holds the same cases", name, "shape")
    return 0 if count is None else count


def _refuse_non_finite(stacked: dict[str, np.ndarray], contract: Contract,
                       count: int) -> None:
    """Refuse NaN and infinities as the JSON batch does: the first case holding one,
    checked as that case's values would be (the same ``[i].name`` and message)."""
    if all(np.isfinite(array).all() for array in stacked.values()):
        return
    rows = [np.flatnonzero(~np.isfinite(array.reshape(count, -1)).all(axis=1))
            for array in stacked.values()]
    first = min(int(bad[0]) for bad in rows if len(bad))
    for name, shape in contract.items():
        check_value(stacked[name][first], shape, f"[{first}].{name}")
    raise AssertionError("a non-finite row passed the value check")  # pragma: no cover

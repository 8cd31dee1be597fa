"""The patch file: versioned JSON, written atomically, validated field by field on load.

Layout (``format`` "tensorcode.patch", ``version`` 1)::

    {"format": "tensorcode.patch", "version": 1, "hash": "tensorcode.tensor.v1",
     "rationale": "...", "evidence": [{...}], "author": null | "..." | {...},
     "edits": null | "the edit statements",
     "tensors": {"w": {"shape": [3, 4], "dtype": "float32",
                       "base_sha256": "<64 hex>", "edited_sha256": "<64 hex>",
                       "changed": 2, "form": "sparse", "indices": [1, 7],
                       "values": [0.5, -1.25]}, ...}}

Form fields: sparse ``indices`` (ascending flat C-order) and ``values``; dense
``values`` (flat, C order); lowrank ``a`` and ``b`` (nested lists of float64); projection
``direction``, ``strength``, ``axis`` and ``span`` (null or [start, stop]). Floating
values are JSON numbers that round-trip exactly; the non-finite ones are the strings
"nan", "inf" and "-inf". Loading never evaluates, imports or unpickles anything: the
file is JSON (``NaN`` literals and duplicate keys refused) and every field is checked,
with ``ArtifactError`` naming the file and the field.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from ..errors import PatchError
from ..files import Fields, check_header, describe, read_json
from ..files import atomic_write_bytes as write_atomic
from .forms import Dense, Form, LowRank, Projection, Sparse, TensorChange
from .hashing import HASH_VERSION
from .metadata import check_author, check_evidence, check_rationale
from .tensors import SUPPORTED_DTYPES

MAX_ARTIFACT_BYTES = 1 << 30
#: the ``format`` and ``version`` fields of a patch file (also ``FORMAT``/``VERSION``)
FORMAT = "tensorcode.patch"
VERSION = 1
_HEX = re.compile(r"^[0-9a-f]{64}$")
_TOP_FIELDS = {"format", "version", "hash", "rationale", "evidence", "author", "edits",
               "tensors"}
_COMMON = {"shape", "dtype", "base_sha256", "edited_sha256", "changed", "form"}
_FORM_FIELDS = {"sparse": {"indices", "values"}, "dense": {"values"}, "lowrank": {"a", "b"},
                "projection": {"direction", "strength", "axis", "span"}}
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


# -- writing ------------------------------------------------------------------------------

def _encode_values(array: np.ndarray) -> list:
    flat = np.asarray(array).reshape(-1)
    if flat.dtype == np.bool_:
        return [bool(v) for v in flat.tolist()]
    if flat.dtype.kind in "iu":
        return [int(v) for v in flat.tolist()]
    # Below float64, the shortest decimal that reads back to the same float32/float16 (0.13,
    # not 0.12999999523162842): exact through float64, and readable in a review.
    values = [float(str(v)) for v in flat] if flat.dtype.itemsize < 8 else flat.tolist()
    if np.all(np.isfinite(flat)):
        return values
    return [v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
            for v in values]


def _encode_change(change: TensorChange) -> dict[str, Any]:
    form = change.form
    entry: dict[str, Any] = {"shape": list(change.shape), "dtype": change.dtype,
                             "base_sha256": change.base_sha256,
                             "edited_sha256": change.edited_sha256,
                             "changed": change.changed, "form": form.kind}
    if isinstance(form, Sparse):
        entry["indices"] = [int(i) for i in form.indices.tolist()]
        entry["values"] = _encode_values(form.values.astype(change.dtype))
    elif isinstance(form, Dense):
        entry["values"] = _encode_values(form.values.astype(change.dtype))
    elif isinstance(form, LowRank):
        entry["a"] = form.a.tolist()
        entry["b"] = form.b.tolist()
    else:
        entry["direction"] = form.direction.tolist()
        entry["strength"] = form.strength
        entry["axis"] = form.axis
        entry["span"] = list(form.span) if form.span is not None else None
    return entry


class PatchContent(Protocol):
    """What a patch file holds: the fields of a ``Patch`` (``patch.py`` builds on this
    module, so the file format names the fields instead of the class)."""

    @property
    def changes(self) -> Mapping[str, TensorChange]: ...
    @property
    def rationale(self) -> str: ...
    @property
    def evidence(self) -> list[dict[str, Any]]: ...
    @property
    def author(self) -> Any: ...
    @property
    def edits(self) -> str | None: ...


def patch_to_json(patch: PatchContent) -> str:
    """The artifact text: metadata indented, one line per tensor."""
    head = {"format": FORMAT, "version": VERSION, "hash": HASH_VERSION,
            "rationale": patch.rationale, "evidence": patch.evidence, "author": patch.author,
            "edits": patch.edits}
    lines = ["{"]
    for key, value in head.items():
        lines.append(f" {json.dumps(key)}: {json.dumps(value, allow_nan=False)},")
    tensor_lines = [f"  {json.dumps(name)}: "
                    f"{json.dumps(_encode_change(change), allow_nan=False, separators=(',', ':'))}"
                    for name, change in patch.changes.items()]
    if tensor_lines:
        lines.append(' "tensors": {')
        lines.append(",\n".join(tensor_lines))
        lines.append(" }")
    else:
        lines.append(' "tensors": {}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def save_patch(patch: PatchContent, path: str | os.PathLike) -> None:
    write_atomic(path, patch_to_json(patch).encode("utf-8"))


# -- reading ------------------------------------------------------------------------------

class _Reader(Fields):
    """The toolkit's field reader with a patch's own checks: flat value lists in a
    tensor's dtype (with "nan"/"inf" spelled as text) and low-rank factor matrices."""

    def object(self, value: Any, field: str, what: str = "a JSON object") -> dict:
        return super().object(value, field, what)

    def integer(self, value: Any, field: str, low: int | None = 0,
                high: int | None = None) -> int:
        return super().integer(value, field, low, high)

    def number(self, value: Any, field: str, finite: bool = False) -> float:
        return super().number(value, field, finite)

    def values(self, raw: Any, field: str, dtype: np.dtype, count: int | None) -> np.ndarray:
        if not isinstance(raw, list):
            raise self.fail(field, f"expected a list of values, found {describe(raw)}")
        if count is not None and len(raw) != count:
            raise self.fail(field, f"expected {count} values, found {len(raw)}")
        if dtype == np.bool_:
            if not all(isinstance(v, bool) for v in raw):
                raise self.fail(field, "expected true/false values for a bool tensor")
            return np.array(raw, dtype=np.bool_)
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            for position, v in enumerate(raw):
                if not isinstance(v, int) or isinstance(v, bool) or not info.min <= v <= info.max:
                    raise self.fail(f"{field}[{position}]", f"expected an integer in the range "
                                    f"of {dtype.name}, found {describe(v)}")
            return np.array(raw, dtype=dtype)
        numbers = []
        for position, v in enumerate(raw):
            if isinstance(v, str) and v in _NON_FINITE:
                numbers.append(_NON_FINITE[v])
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                numbers.append(float(v))
            else:
                raise self.fail(f"{field}[{position}]", f"expected a number (or \"nan\", "
                                f"\"inf\", \"-inf\"), found {describe(v)}")
        with np.errstate(over="ignore"):
            return np.array(numbers, dtype=np.float64).astype(dtype)

    def matrix(self, raw: Any, field: str) -> np.ndarray:
        if not isinstance(raw, list) or not raw or not all(isinstance(row, list) for row in raw):
            raise self.fail(field, "expected a non-empty list of rows of numbers")
        width = len(raw[0])
        rows = []
        for k, row in enumerate(raw):
            if len(row) != width:
                raise self.fail(f"{field}[{k}]", f"expected {width} numbers like row 0, "
                                f"found {len(row)}")
            rows.append([self.number(v, f"{field}[{k}][{j}]") for j, v in enumerate(row)])
        return np.array(rows, dtype=np.float64).reshape(len(raw), width)


def _change(reader: _Reader, name: str, raw: Any) -> TensorChange:
    where = f"tensors.{name}"
    entry = reader.object(raw, where)
    form = entry.get("form")
    if not isinstance(form, str) or form not in _FORM_FIELDS:
        raise reader.fail(f"{where}.form", f"expected one of {sorted(_FORM_FIELDS)}, found "
                          f"{describe(form)}")
    reader.keys(entry, where, _COMMON | _FORM_FIELDS[form])
    shape_raw = entry["shape"]
    if not isinstance(shape_raw, list) or len(shape_raw) > 32:
        raise reader.fail(f"{where}.shape",
                          f"expected a list of sizes, found {describe(shape_raw)}")
    shape = tuple(reader.integer(n, f"{where}.shape[{k}]", 0)
                  for k, n in enumerate(shape_raw))
    size = math.prod(shape)  # Python ints: a huge shape cannot wrap around
    if size > MAX_ARTIFACT_BYTES:
        raise reader.fail(f"{where}.shape", f"a tensor of {size} elements is beyond what a "
                          "patch describes")
    if not isinstance(entry["dtype"], str) or entry["dtype"] not in SUPPORTED_DTYPES:
        raise reader.fail(f"{where}.dtype", f"expected one of {list(SUPPORTED_DTYPES)}, found "
                          f"{describe(entry['dtype'])}")
    dtype = np.dtype(entry["dtype"])
    hashes = []
    for key in ("base_sha256", "edited_sha256"):
        value = entry[key]
        if not isinstance(value, str) or not _HEX.match(value):
            raise reader.fail(f"{where}.{key}", f"expected 64 lowercase hex digits, found "
                              f"{describe(value)}")
        hashes.append(value)
    changed = reader.integer(entry["changed"], f"{where}.changed", 0, size)
    built: Form
    try:
        if form == "sparse":
            indices_raw = entry["indices"]
            if not isinstance(indices_raw, list):
                raise reader.fail(f"{where}.indices", f"expected a list of flat indices, found "
                                  f"{describe(indices_raw)}")
            indices = np.array([reader.integer(i, f"{where}.indices[{k}]", 0, max(size - 1, 0))
                                for k, i in enumerate(indices_raw)], dtype=np.int64)
            values = reader.values(entry["values"], f"{where}.values", dtype, len(indices_raw))
            built = Sparse(indices, values)
        elif form == "dense":
            values = reader.values(entry["values"], f"{where}.values", dtype, size)
            built = Dense(values.reshape(shape))
        elif form == "lowrank":
            built = LowRank(reader.matrix(entry["a"], f"{where}.a"),
                            reader.matrix(entry["b"], f"{where}.b"))
        else:
            direction = entry["direction"]
            if not isinstance(direction, list):
                raise reader.fail(f"{where}.direction", "expected a list of numbers")
            direction = [reader.number(v, f"{where}.direction[{k}]")
                         for k, v in enumerate(direction)]
            strength = reader.number(entry["strength"], f"{where}.strength")
            axis = reader.integer(entry["axis"], f"{where}.axis", 0, 1)
            span = entry["span"]
            if span is not None:
                if not isinstance(span, list) or len(span) != 2:
                    raise reader.fail(f"{where}.span", "expected null or [start, stop]")
                span = tuple(reader.integer(v, f"{where}.span[{k}]") for k, v in enumerate(span))
            built = Projection(np.array(direction, dtype=np.float64), strength, axis, span)
        built.check(name, shape, dtype)
    except PatchError as error:
        raise reader.fail(where, str(error)) from None
    return TensorChange(shape, dtype.name, hashes[0], hashes[1], changed, built)


def load_patch(path: str | os.PathLike) -> dict[str, Any]:
    """Read a patch artifact: the keyword arguments of ``Patch(...)`` (``Patch.load``
    makes the patch), every field validated first."""
    reader = _Reader(path)
    document = reader.object(read_json(path, MAX_ARTIFACT_BYTES, what="patch file"),
                             "(top level)")
    check_header(document, FORMAT, VERSION, path)
    reader.keys(document, "(top level)", _TOP_FIELDS)
    if document["hash"] != HASH_VERSION:
        raise reader.fail("hash", f"expected {HASH_VERSION!r}, found {describe(document['hash'])}")
    tensors = reader.object(document["tensors"], "tensors")
    changes = {name: _change(reader, name, raw) for name, raw in tensors.items()}
    edits = document["edits"]
    if edits is not None and not isinstance(edits, str):
        raise reader.fail("edits", f"expected null or text, found {describe(edits)}")
    checked = {}
    for field, check in (("rationale", check_rationale), ("evidence", check_evidence),
                         ("author", check_author)):
        try:
            checked[field] = check(document[field])
        except PatchError as error:
            raise reader.fail(field, str(error)) from None
    return {"changes": changes, "edits": edits, **checked}


__all__ = ["patch_to_json", "save_patch", "load_patch", "MAX_ARTIFACT_BYTES", "FORMAT",
           "VERSION", "PatchContent"]

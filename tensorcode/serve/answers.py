"""Answers as JSON bytes: orjson for documents, column-wise rendering for batches.

A batch of 1,000 answers written one dict at a time costs more than everything else a
batch request does; here each scalar output column is rendered by one orjson call over
its float64 array, split into the numbers' texts, and the answers are joined around
them in one ``bytes.join``. Escalated cases, whose documents vary, are rendered one by
one and put in their places.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..distill.router import PROGRAM
from ..extras import installed

#: the serve extra's JSON writer; without it the stdlib writes the same JSON more slowly
orjson: Any = installed("orjson")


def dumps(document: Any) -> bytes:
    """A document as JSON text in UTF-8 (NumPy numbers included). Its numbers are
    finite: every answer is checked before it is rendered."""
    if orjson is not None:
        return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                      default=lambda value: value.tolist()).encode("utf-8")


def number_texts(column: np.ndarray) -> list[bytes]:
    """The JSON text of each number of a 1-d float64 array (all finite)."""
    if orjson is not None:
        text = orjson.dumps(column, option=orjson.OPT_SERIALIZE_NUMPY)
    else:
        text = json.dumps(column.tolist(), allow_nan=False, separators=(",", ":")).encode()
    return text[1:-1].split(b",") if len(column) else []


def render_batch(outputs: Mapping[str, tuple[int, ...]], columns: Mapping[str, np.ndarray],
                 count: int, escalated: Mapping[int, bytes]) -> bytes:
    """The JSON array of ``count`` answers: each claimed case's outputs from ``columns``
    (``[count, *shape]`` arrays) with ``"escalated": false, "reason": null, "path":
    "program"``, and the prepared document at each index of ``escalated``."""
    names = list(outputs)
    if count == 0:
        return b"[]"
    if any(outputs[name] != () for name in names):  # array outputs: one dict each
        pieces = []
        for i in range(count):
            if i in escalated:
                pieces.append(escalated[i])
            else:
                answer: dict[str, Any] = {name: columns[name][i].tolist() for name in names}
                answer.update(escalated=False, reason=None, path=PROGRAM)
                pieces.append(dumps(answer))
        return b"[" + b",".join(pieces) + b"]"
    tail = b',"escalated":false,"reason":null,"path":"' + PROGRAM.encode() + b'"}'
    if len(names) == 1:
        rendered = _render_few_values(names[0], columns[names[0]], count, escalated, tail)
        if rendered is not None:
            return rendered
    width = 2 * len(names) + 1  # per answer: a label and a number per output, the tail
    parts: list[bytes] = [b""] * (count * width)
    for j, name in enumerate(names):
        label = (b"{" if j == 0 else b",") + json.dumps(name).encode("utf-8") + b":"
        parts[2 * j::width] = [label] * count
        column = np.ascontiguousarray(columns[name], dtype=np.float64)
        if escalated:  # their values are meaningless, maybe not finite; replaced below
            column = np.where(np.isfinite(column), column, 0.0)
        parts[2 * j + 1::width] = number_texts(column)
    parts[width - 1::width] = [tail + b","] * count
    for i, document in escalated.items():
        parts[i * width:(i + 1) * width] = [document + b","] + [b""] * (width - 1)
    rendered = b"".join(parts)
    return b"[" + rendered[:-1] + b"]"


def _render_few_values(name: str, column: np.ndarray, count: int,
                       escalated: Mapping[int, bytes], tail: bytes) -> bytes | None:
    """The batch's answers for one scalar output that takes few distinct values (a
    router's route, a class): each distinct answer is rendered once and the answers are
    picked from those, by the bits of the float64 (so ``-0.0`` stays apart from
    ``0.0``); ``None`` when the values are too many for that to pay."""
    bits = np.ascontiguousarray(column, dtype=np.float64).view(np.int64)
    if escalated:  # their values are meaningless, maybe not finite; replaced below
        bits = bits.copy()
        bits[list(escalated)] = 0
    few = max(1, count // 16)
    # the distinct values of a sample, most often all of them: no sort of the whole column
    distinct = np.unique(bits[:64])
    if len(distinct) > few:
        return None
    which = np.minimum(np.searchsorted(distinct, bits), len(distinct) - 1)
    missed = distinct[which] != bits
    if missed.any():  # values the sample did not hold: add them and look up again
        distinct = np.union1d(distinct, np.unique(bits[missed]))
        if len(distinct) > few:
            return None
        which = np.searchsorted(distinct, bits)
    label = b"{" + json.dumps(name).encode("utf-8") + b":"
    answers = np.empty(len(distinct), dtype=object)
    answers[:] = [label + text + tail for text in number_texts(distinct.view(np.float64))]
    pieces = answers[which].tolist()
    for i, document in escalated.items():
        pieces[i] = document
    return b"[" + b",".join(pieces) + b"]"

__all__ = ["dumps", "number_texts", "render_batch"]

"""Why a patch was made: rationale, evidence records and author, checked to be plain,
bounded JSON data so they save and load unchanged and can never carry anything else."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import PatchError

MAX_METADATA_DEPTH = 16
MAX_METADATA_CHARS = 4_000_000


def _check_json(value: Any, where: str, depth: int = 0) -> Any:
    """A deep copy of ``value`` if it is plain JSON data, else ``PatchError``."""
    if depth > MAX_METADATA_DEPTH:
        raise PatchError(f"{where} nests deeper than {MAX_METADATA_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            raise PatchError(f"{where} holds the non-finite number {value}; JSON cannot")
        return float(value)
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise PatchError(f"{where} has the non-string key {key!r}; JSON keys are text")
            result[key] = _check_json(item, f"{where}.{key}", depth + 1)
        return result
    if isinstance(value, (list, tuple)):
        return [_check_json(item, f"{where}[{k}]", depth + 1) for k, item in enumerate(value)]
    raise PatchError(f"{where} holds a {type(value).__name__}; only JSON data (text, numbers, "
                     "true/false, null, lists, objects) can be recorded")


def _check_size(value: Any, where: str) -> None:
    if len(json.dumps(value)) > MAX_METADATA_CHARS:
        raise PatchError(f"{where} is larger than {MAX_METADATA_CHARS} characters of JSON")


def check_rationale(rationale: Any) -> str:
    """The rationale, checked to be text within ``MAX_METADATA_CHARS``."""
    if not isinstance(rationale, str):
        raise PatchError(f"rationale must be text, got {type(rationale).__name__}")
    if len(rationale) > MAX_METADATA_CHARS:
        raise PatchError(f"rationale is longer than {MAX_METADATA_CHARS} characters")
    return rationale


def check_evidence(evidence: Any) -> list[dict[str, Any]]:
    """A list of JSON objects, e.g. ``[{"source": "forward:3"}]``."""
    if isinstance(evidence, (str, bytes, Mapping)) or not isinstance(evidence, (list, tuple)):
        raise PatchError(f"evidence must be a list of records (JSON objects), got "
                         f"{type(evidence).__name__}")
    records = []
    for position, record in enumerate(evidence):
        if not isinstance(record, Mapping):
            raise PatchError(f"evidence[{position}] must be a JSON object such as "
                             f'{{"source": "forward:3"}}, got {type(record).__name__}')
        records.append(_check_json(record, f"evidence[{position}]"))
    _check_size(records, "evidence")
    return records


def check_author(author: Any) -> str | dict[str, Any] | None:
    """``None``, a description, or a JSON object describing who wrote the edits."""
    if author is None or isinstance(author, str):
        if isinstance(author, str) and len(author) > MAX_METADATA_CHARS:
            raise PatchError("author description is too long")
        return author
    if isinstance(author, Mapping):
        checked = _check_json(author, "author")
        _check_size(checked, "author")
        return checked
    raise PatchError(f"author must be None, text or a JSON object, got {type(author).__name__}")


__all__ = ["check_rationale", "check_evidence", "check_author"]

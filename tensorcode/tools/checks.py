"""Checks the tools share: config values, supplied choices and distribution targets.

Config problems raise ``ConfigError`` naming the key; malformed inputs ``TypeError`` or
``ValueError`` naming the field, except numeric vectors (observations, states,
features), which raise the package's errors as tensors do: ``ShapeError`` for a wrong
length, ``DTypeError`` for values that are not numbers, ``TrainingError`` for NaN or
infinity; malformed targets ``TrainingError`` naming the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import DTypeError, ShapeError, TrainingError
from ..training.losses import DISTRIBUTION_TOLERANCE, check_distribution
from .base import ConfigError
from .scorer import item_bucket


def positive(config: Mapping[str, Any], key: str, optional: bool = False) -> int | None:
    """``config[key]`` as a positive int (``None`` allowed when ``optional``)."""
    value = config[key]
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(key, f"must be a positive integer{' or null' if optional else ''}, "
                          f"got {value!r}")
    return value


def seed(config: Mapping[str, Any]) -> int:
    value = config["seed"]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 32:
        raise ConfigError("seed", f"must be an integer in [0, 2**32), got {value!r}")
    return value


def one_or_batch(inputs: Any, what: str) -> tuple[list[Mapping[str, Any]], bool]:
    """``([input, ...], is_batch)``: one mapping, or a nonempty list of them."""
    if isinstance(inputs, Mapping):
        return [inputs], False
    if isinstance(inputs, (list, tuple)) and inputs and all(
            isinstance(i, Mapping) for i in inputs):
        return list(inputs), True
    raise TypeError(f"{what} inputs are a mapping (or a nonempty list of mappings for a "
                    f"batch), got {type(inputs).__name__}")


def fields(item: Mapping[str, Any], required: Sequence[str], where: str) -> None:
    if len(item) == len(required):
        for key in required:
            if key not in item:
                break
        else:
            return
    missing = [k for k in required if k not in item]
    extra = sorted(set(item) - set(required))
    if missing or extra:
        raise ValueError(f"{where}: expected exactly the keys {list(required)}, "
                         f"missing {missing}, unexpected {extra}")


def text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where} must be a text, got {type(value).__name__}")
    return value


def ids(values: Sequence[Any], where: str) -> list[str]:
    """Distinct, nonempty text ids."""
    for k, value in enumerate(values):
        if not isinstance(value, str) or not value:
            raise TypeError(f"{where}[{k}] must be a nonempty text id, got {value!r}")
    if len(set(values)) != len(values):
        duplicate = next(v for k, v in enumerate(values) if v in values[:k])
        raise ValueError(f"{where}: the id {duplicate!r} appears more than once")
    return list(values)


def query_and_items(item: Mapping[str, Any], query_key: str, list_key: str, where: str
                    ) -> tuple[str, list[str], list[str]]:
    """``(query text, item texts, item ids)`` of one input holding a query text under
    ``query_key`` and a nonempty list of ``{"id", "text"}`` items under ``list_key``
    (a Decision's context and hypotheses, an Investigator's query and candidates).

    It runs on every prediction, so the common case (plain dicts, exactly the keys) is
    checked inline; anything else goes through the same checks that name the field."""
    fields(item, (query_key, list_key), where)
    query = text(item[query_key], f"{where}.{query_key}")
    entries = item[list_key]
    if not isinstance(entries, (list, tuple)) or not entries:
        raise TypeError(f"{where}.{list_key} must be a nonempty list")
    texts, names = [], []
    for j, entry in enumerate(entries):
        if type(entry) is not dict or len(entry) != 2 or "id" not in entry or \
                type(entry.get("text")) is not str:
            if not isinstance(entry, Mapping):
                raise TypeError(f"{where}.{list_key}[{j}] must be {{'id', 'text'}}")
            fields(entry, ("id", "text"), f"{where}.{list_key}[{j}]")
            text(entry["text"], f"{where}.{list_key}[{j}].text")
        texts.append(entry["text"])
        names.append(entry["id"])
    return query, texts, ids(names, f"{where}.{list_key}.id")


def vector(value: Any, size: int, where: str) -> list[float]:
    """A finite numeric vector of ``size`` entries, as a list (what experiences store):
    ``DTypeError`` for values that are not numbers, ``ShapeError`` for another length or
    rank, ``TrainingError`` for NaN or infinity."""
    if isinstance(value, (str, bytes, Mapping)):
        raise DTypeError(f"{where} must be {size} numbers, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except ValueError:
        raise ShapeError(f"{where} must be {size} numbers, got a ragged sequence") from None
    if array.dtype.kind not in "fiu":
        raise DTypeError(f"{where} must be {size} numbers, got {array.dtype} values")
    if array.shape != (size,):
        raise ShapeError(f"{where} must be a vector of {size} numbers, got shape "
                         f"{list(array.shape)}")
    if not np.all(np.isfinite(array)):
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise TrainingError(f"{where}[{bad}] is {array[bad]}: inputs must be finite "
                            "(NaN or infinity is refused)")
    return array.astype(np.float64).tolist()


def choice_target(target: Any, names: Sequence[str], kind: str, allow_distribution: bool
                  ) -> int | np.ndarray:
    """A target naming one of ``names`` (by name or index) as an index, or (when
    ``allow_distribution``) a distribution over them padded with zeros to the scorer's
    item count."""
    n = len(names)
    if isinstance(target, str):
        if target not in names:
            raise TrainingError(f"target {target!r} is not a supplied {kind}; the "
                                f"{kind}s are {list(names)}")
        return list(names).index(target)
    if isinstance(target, (int, np.integer)) and not isinstance(target, (bool, np.bool_)):
        if not 0 <= int(target) < n:
            raise TrainingError(f"target index {int(target)} is out of range for {n} "
                                f"supplied {kind}s")
        return int(target)
    if allow_distribution and isinstance(target, (list, tuple, np.ndarray)):
        values = check_distribution(target, n, f"the distribution over {n} {kind}s")
        padded = np.zeros(item_bucket(n), np.float32)
        padded[:n] = values
        return padded
    accepted = f"a {kind} name, an index" + (", or a distribution" if allow_distribution
                                             else "")
    raise TrainingError(f"a target is {accepted}; got {target!r}")


def stack_targets(targets: list[Any], slots: int) -> Any:
    """One batch target: indices when every target is one, else distributions."""
    if all(isinstance(t, int) for t in targets):
        return targets
    rows = np.zeros((len(targets), slots), np.float32)
    for row, t in enumerate(targets):
        if isinstance(t, int):
            rows[row, t] = 1.0
        else:
            rows[row, :len(t)] = t
    return rows


def finite_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TrainingError(f"{where} must be a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise TrainingError(f"{where} must be finite, got {value!r}")
    return float(value)


__all__ = ["positive", "seed", "one_or_batch", "fields", "text", "ids", "vector",
           "choice_target", "stack_targets", "finite_number", "DISTRIBUTION_TOLERANCE"]

"""PyTorch's optimizer state-dict layout: writing it and checking one before adoption.

A state dict is ``{"state": {index: {key: array}}, "param_groups": [{..., "params":
[...]}]}``. Loading is all-or-nothing, so ``check_state_dict`` validates every field
against the parameter layout and returns the decoded state as plain data; the optimizer
adopts it only after every check has passed. Kept apart from ``optim`` so the update
rules read without the format's bookkeeping.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compiler.plans.tables import Layout
from ..errors import TensorCodeError


@dataclass(frozen=True)
class CheckedState:
    """A validated state dict, decoded onto a layout: the learning rate, the per-slot
    step counts and ``present`` flags, and one flat buffer per state key and dtype."""

    layout: Layout
    lr: float
    steps: np.ndarray
    present: np.ndarray
    buffers: dict[str, dict[str, np.ndarray]]


def state_entries(layout: Layout | None, keys: tuple[str, ...], present: np.ndarray,
                  steps: np.ndarray, payloads: Mapping[str, list[np.ndarray]]
                  ) -> dict[int, dict[str, np.ndarray]]:
    """The ``state`` part of a state dict: one entry per slot that has state, each key a
    NumPy copy and ``step`` a 0-d float32 array like PyTorch's default step tensor."""
    n = 0 if layout is None else len(layout)
    state: dict[int, dict[str, np.ndarray]] = {}
    for k in range(n):
        if not present[k]:
            continue
        entry = {}
        for key in keys:
            if key == "step":
                entry[key] = np.array(steps[k], dtype=np.float32)
            else:
                entry[key] = np.array(payloads[key][k], copy=True)
        state[k] = entry
    return state


def check_state_dict(state_dict: Mapping[str, Any], layout: Layout, owner: str,
                     group_fields: set[str],
                     check_lr: Callable[[Any, str], float],
                     load_group: Callable[[Mapping[str, Any]], Callable[[], None]],
                     keys_for: Callable[[Mapping[str, Any]], tuple[str, ...]]
                     ) -> tuple[CheckedState, Callable[[], None]]:
    """Validate ``state_dict`` for ``owner`` (an optimizer's class name) on ``layout``.

    ``group_fields`` are the optimizer's param-group fields besides ``lr`` and
    ``params``; ``load_group`` validates them and returns the function that adopts them,
    ``keys_for`` names the state keys that group keeps. Returns the decoded state and the
    group's adopt function; raises ``TensorCodeError`` naming the first bad field."""
    if not isinstance(state_dict, Mapping) or set(state_dict) != {"state", "param_groups"}:
        got = sorted(state_dict) if isinstance(state_dict, Mapping) else type(state_dict)
        raise TensorCodeError(f"a state dict has exactly the keys ['param_groups', "
                              f"'state'], got {got}")
    group = _single_group(state_dict["param_groups"], owner, group_fields, len(layout))
    lr = check_lr(group["lr"], "param_groups[0].lr")
    adopt = load_group(group)
    keys = keys_for(group)
    state = state_dict["state"]
    if not isinstance(state, Mapping):
        raise TensorCodeError("state: expected a mapping from parameter index to state")
    n = len(layout)
    steps = np.zeros(n, dtype=np.float64)
    present = np.zeros(n, dtype=np.uint8)
    buffers = {key: {d: np.zeros(size, dtype=d) for d, size in layout.sizes.items()}
               for key in keys if key != "step"}
    for index, entry in state.items():
        k = _int(index)
        if k is None or not 0 <= k < n:
            raise TensorCodeError(f"state: index {index!r} is not a parameter index "
                                  f"0..{n - 1}")
        if not isinstance(entry, Mapping) or set(entry) != set(keys):
            found = sorted(entry) if isinstance(entry, Mapping) else type(entry).__name__
            raise TensorCodeError(f"state[{k}]: expected the keys {sorted(keys)}, got {found}")
        for key in keys:
            if key == "step":
                steps[k] = _step_count(k, entry[key])
            else:
                _place(layout, k, key, np.asarray(entry[key]), buffers[key])
        present[k] = 1
    return CheckedState(layout, lr, steps, present, buffers), adopt


def _single_group(groups: Any, owner: str, group_fields: set[str], n: int
                  ) -> Mapping[str, Any]:
    """The one param group, with exactly the expected fields and ``params`` 0..n-1."""
    if not isinstance(groups, (list, tuple)) or len(groups) != 1:
        raise TensorCodeError("param_groups: TensorCode optimizers hold one param group "
                              f"over every parameter, got {groups!r:.80}")
    group = groups[0]
    expected = {"lr", "params", *group_fields}
    if not isinstance(group, Mapping) or set(group) != expected:
        got = sorted(group) if isinstance(group, Mapping) else type(group).__name__
        missing = sorted(expected - set(group)) if isinstance(group, Mapping) else []
        extra = sorted(set(group) - expected) if isinstance(group, Mapping) else []
        raise TensorCodeError(f"param_groups[0]: expected the fields {sorted(expected)} of "
                              f"{owner}, got {got} (missing {missing}, unexpected {extra})")
    params = group["params"]
    if not isinstance(params, (list, tuple)) or [_int(i) for i in params] != list(range(n)):
        raise TensorCodeError(f"param_groups[0].params: expected the indices "
                              f"{list(range(n))} (one per parameter, in recording order), "
                              f"got {params!r:.120}")
    return group


def _step_count(k: int, step: Any) -> float:
    """A slot's step count: a non-negative whole number, as PyTorch's step tensor holds."""
    value = np.asarray(step)
    if value.shape != () or value.dtype.kind not in "iuf":
        raise TensorCodeError(f"state[{k}].step: expected a number, got "
                              f"{value.dtype}{list(value.shape)}")
    count = float(value)
    if not (count >= 0 and count == math.floor(count) and math.isfinite(count)):
        raise TensorCodeError(f"state[{k}].step: expected a non-negative whole number, "
                              f"got {count}")
    return count


def _place(layout: Layout, k: int, key: str, value: np.ndarray,
           buffers: dict[str, np.ndarray]) -> None:
    """Copy slot ``k``'s state ``key`` into its flat buffer after checking shape and dtype."""
    slot = layout.slots[k]
    if value.shape != slot.shape:
        raise TensorCodeError(f"state[{k}].{key}: parameter {slot.label} has shape "
                              f"{list(slot.shape)}, got {list(value.shape)}")
    if value.dtype.name != slot.dtype:
        raise TensorCodeError(f"state[{k}].{key}: parameter {slot.label} is "
                              f"{slot.dtype}, got {value.dtype.name}")
    buffers[slot.dtype][slot.offset:slot.offset + slot.size] = value.reshape(-1)


def torch_flags(group: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """PyTorch's implementation switches (foreach, fused, capturable, differentiable) mean
    nothing to TensorCode's one CPU loop; they are validated and echoed back unchanged."""
    flags = {}
    for key in current:
        value = group[key]
        if key in ("foreach", "fused"):
            if value is not None and not isinstance(value, bool):
                raise TensorCodeError(f"param_groups[0].{key} must be None, True or False, got "
                                      f"{value!r}")
        elif not isinstance(value, bool):
            raise TensorCodeError(f"param_groups[0].{key} must be True or False, got {value!r}")
        flags[key] = value
    return flags


def _int(value: Any) -> int | None:
    """A parameter index given as an integer or a digit string (JSON keys), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None

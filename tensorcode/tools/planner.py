"""``Planner``: predict each candidate's outcome for a state and rank the candidates.

An input is ``{"state": ..., "candidates": [{"candidate_id": text, "text": text}, ...]}``
(or a list of them). The state is a text, or a vector of ``state_size`` numbers when the
config sets it; a candidate carries a ``text``, or ``features`` (``candidate_size``
numbers) when the config sets that. ``predict_outcomes`` gives the predicted numeric
outcome per candidate and ``plan`` the candidates ranked best first.

A target is ``{"candidate_id": ..., "outcome": number}``: the observed outcome of the one
candidate that was tried. The objective, ``candidate_mse``, is the squared error of that
candidate's prediction only (other candidates were not tried, so they get no gradient).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..compiler.trace.expr import Expr
from ..errors import TrainingError
from ..operations.base import Operation
from . import checks
from .base import Tool
from .scorer import PairScorer, item_bucket


def candidate_mse(output: Expr, target: Expr) -> Expr:
    """Squared error of the tried candidate's prediction, averaged over rows.

    ``target`` is ``[..., 2, n_padded]``: row 0 selects the tried candidate (one-hot),
    row 1 holds its observed outcome at that position."""
    n = output.shape[-1]
    lead = output.shape[:-1]
    selected = target.slice(0, 1, axis=target.ndim - 2).reshape(lead + (n,))
    outcome = target.slice(1, 2, axis=target.ndim - 2).reshape(lead + (n,))
    error = output - outcome
    rows = 1 if not lead else int(np.prod(lead))
    return (selected * error * error).sum() / float(rows)


@dataclass(frozen=True)
class Ranked:
    """One ranked candidate: its id and predicted outcome."""

    candidate_id: str
    outcome: float


class Planner(Tool):
    """Scores candidates for a state (see the module docstring).

    Config: ``state_size`` / ``candidate_size`` (null for texts), ``dim``, ``hidden``,
    ``buckets``, ``seed``."""

    objective: ClassVar[str] = "candidate_mse"
    prediction: ClassVar[str] = "plan"
    losses: ClassVar[dict[str, Any]] = {"candidate_mse": candidate_mse}
    defaults: ClassVar[dict[str, Any]] = {"state_size": None, "candidate_size": None,
                                          "dim": 32, "hidden": 32, "buckets": 4096,
                                          "seed": 0}
    size_keys: ClassVar[tuple[str, ...]] = ("state_size", "candidate_size", "dim", "hidden")

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        checks.positive(config, "state_size", optional=True)
        checks.positive(config, "candidate_size", optional=True)
        for key in ("dim", "hidden", "buckets"):
            checks.positive(config, key)
        checks.seed(config)
        return config

    def build_operations(self) -> Mapping[str, Operation]:
        c = self.config
        return {"scorer": PairScorer(c["state_size"], c["candidate_size"], dim=c["dim"],
                                     hidden=c["hidden"], buckets=c["buckets"], mask="zero",
                                     seed=c["seed"], backend=self.backend)}

    def planned_parameters(self) -> int:
        c = self.config
        return PairScorer.parameter_count(c["state_size"], c["candidate_size"], c["dim"],
                                          c["hidden"], c["buckets"])

    def _parse(self, inputs: Any) -> tuple[list[Any], list[list[Any]], list[list[str]], bool]:
        items, batch = checks.one_or_batch(inputs, "Planner")
        size, csize = self.config["state_size"], self.config["candidate_size"]
        key = "text" if csize is None else "features"
        states, candidates, ids = [], [], []
        for k, item in enumerate(items):
            where = f"inputs[{k}]" if batch else "inputs"
            checks.fields(item, ("state", "candidates"), where)
            states.append(checks.text(item["state"], f"{where}.state") if size is None
                          else checks.vector(item["state"], size, f"{where}.state"))
            supplied = item["candidates"]
            if not isinstance(supplied, (list, tuple)) or not supplied:
                raise TypeError(f"{where}.candidates must be a nonempty list")
            row = []
            for j, c in enumerate(supplied):
                place = f"{where}.candidates[{j}]"
                if not isinstance(c, Mapping):
                    raise TypeError(f"{place} must be {{'candidate_id', '{key}'}}")
                checks.fields(c, ("candidate_id", key), place)
                row.append(checks.text(c["text"], f"{place}.text") if csize is None
                           else checks.vector(c["features"], csize, f"{place}.features"))
            ids.append(checks.ids([c["candidate_id"] for c in supplied],
                                  f"{where}.candidates.candidate_id"))
            candidates.append(row)
        return states, candidates, ids, batch

    def supervised_output(self, inputs: Any) -> Any:
        """Predicted outcomes ``[n_padded]`` (or ``[rows, n_padded]``; padding is 0)."""
        return self._score(self._parse(inputs))

    def _score(self, parsed: tuple) -> Any:
        states, candidates, _, batch = parsed
        scorer = self.operations["scorer"]
        return scorer(states, candidates) if batch else scorer(states[0], candidates[0])

    def item_counts(self, inputs: Any) -> tuple[list[int], bool]:
        _, _, ids, batch = self._parse(inputs)
        return [len(i) for i in ids], batch

    def check_target(self, inputs: Any, target: Any) -> Any:
        _, _, ids, batch = self._parse(inputs)
        targets = target if batch else [target]
        if batch and (not isinstance(target, (list, tuple)) or len(target) != len(ids)):
            raise TrainingError(f"a batch of {len(ids)} inputs needs a list of {len(ids)} "
                                "targets")
        slots = item_bucket(max(len(i) for i in ids))
        rows = np.zeros((len(ids), 2, slots), np.float32)
        for row, (t, row_ids) in enumerate(zip(targets, ids)):
            where = f"targets[{row}]" if batch else "the target"
            if not isinstance(t, Mapping) or set(t) != {"candidate_id", "outcome"}:
                raise TrainingError(f"{where} must be {{'candidate_id': ..., 'outcome': "
                                    f"number}}, got {t!r}")
            if t["candidate_id"] not in row_ids:
                raise TrainingError(f"{where} names candidate {t['candidate_id']!r}, which "
                                    f"was not supplied; the candidates are {row_ids}")
            position = row_ids.index(t["candidate_id"])
            rows[row, 0, position] = 1.0
            rows[row, 1, position] = checks.finite_number(t["outcome"], f"{where}.outcome")
        if not batch:
            return rows[0, :, :item_bucket(len(ids[0]))]
        return rows

    def predict_outcomes(self, inputs: Any) -> dict[str, float] | list[dict[str, float]]:
        """``{candidate_id: predicted outcome}`` in the order supplied."""
        parsed = self._parse(inputs)
        ids, batch = parsed[2], parsed[3]
        values = np.atleast_2d(np.asarray(self._score(parsed)))
        result = [{cid: float(v) for cid, v in zip(row_ids, row)}
                  for row_ids, row in zip(ids, values)]
        return result if batch else result[0]

    def plan(self, inputs: Any) -> list[Ranked] | list[list[Ranked]]:
        """The candidates ranked by predicted outcome, best (highest) first."""
        outcomes = self.predict_outcomes(inputs)
        rows = outcomes if isinstance(outcomes, list) else [outcomes]
        ranked = [[Ranked(cid, v) for cid, v in sorted(row.items(), key=lambda kv: -kv[1])]
                  for row in rows]
        return ranked if isinstance(outcomes, list) else ranked[0]


__all__ = ["Planner", "Ranked", "candidate_mse"]

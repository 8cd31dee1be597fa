"""``Scene``: match an observation against descriptions supplied with each input.

An input is ``{"observation": [numbers], "descriptions": [text, ...]}`` (or a list of
them), the observation a vector of the configured ``observation_size``. ``match``
returns a ``Matched``: the description that applies best, its index, and a probability
per supplied description. A target names the description that applies, by its text or
its index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import TrainingError
from ..operations.base import Operation
from . import checks
from .base import ConfigError, Tool
from .decision import softmax_rows
from .scorer import PairScorer


@dataclass(frozen=True)
class Matched:
    """One match: the best description, its index and a probability per description."""

    description: str
    index: int
    probabilities: np.ndarray


class Scene(Tool):
    """Matches observations to descriptions (see the module docstring).

    Config: ``observation_size`` (required), ``dim``, ``hidden``, ``buckets``, ``seed``."""

    objective: ClassVar[str] = "cross_entropy"
    defaults: ClassVar[dict[str, Any]] = {"observation_size": None, "dim": 32, "hidden": 32,
                                          "buckets": 4096, "seed": 0}

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        if config["observation_size"] is None:
            raise ConfigError("observation_size", "is required: the length of the "
                              "observation vectors")
        for key in ("observation_size", "dim", "hidden", "buckets"):
            checks.positive(config, key)
        checks.seed(config)
        return config

    def build_operations(self) -> Mapping[str, Operation]:
        c = self.config
        return {"scorer": PairScorer(c["observation_size"], None, dim=c["dim"],
                                     hidden=c["hidden"], buckets=c["buckets"], mask="logits",
                                     seed=c["seed"], backend=self.backend)}

    def _parse(self, inputs: Any) -> tuple[list[list[float]], list[list[str]], bool]:
        items, batch = checks.one_or_batch(inputs, "Scene")
        observations, descriptions = [], []
        for k, item in enumerate(items):
            where = f"inputs[{k}]" if batch else "inputs"
            checks.fields(item, ("observation", "descriptions"), where)
            observations.append(checks.vector(item["observation"],
                                              self.config["observation_size"],
                                              f"{where}.observation"))
            texts = item["descriptions"]
            if not isinstance(texts, (list, tuple)) or not texts:
                raise TypeError(f"{where}.descriptions must be a nonempty list of texts")
            descriptions.append([checks.text(t, f"{where}.descriptions[{j}]")
                                 for j, t in enumerate(texts)])
        return observations, descriptions, batch

    def output(self, inputs: Any) -> Any:
        """Logits ``[n_padded]`` (or ``[rows, n_padded]``), padded descriptions at -1e9."""
        observations, descriptions, batch = self._parse(inputs)
        scorer = self.operations["scorer"]
        if batch:
            return scorer(observations, descriptions)
        return scorer(observations[0], descriptions[0])

    def check_target(self, inputs: Any, target: Any) -> Any:
        _, descriptions, batch = self._parse(inputs)
        if not batch:
            return checks.choice_target(target, descriptions[0], "description", False)
        if not isinstance(target, (list, tuple)) or len(target) != len(descriptions):
            raise TrainingError(f"a batch of {len(descriptions)} inputs needs a list of "
                                f"{len(descriptions)} targets")
        return [checks.choice_target(t, d, "description", False)
                for t, d in zip(target, descriptions)]

    def match(self, inputs: Any) -> Matched | list[Matched]:
        """The description that applies best, and a probability per description."""
        _, descriptions, batch = self._parse(inputs)
        logits = np.asarray(self.output(inputs))
        results = []
        for texts, p in zip(descriptions, softmax_rows(logits, [len(d) for d in descriptions])):
            best = int(np.argmax(p))
            results.append(Matched(texts[best], best, p))
        return results if batch else results[0]


__all__ = ["Scene", "Matched"]

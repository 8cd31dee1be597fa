"""``Scene``: match an observation against descriptions supplied with each input.

An input is ``{"observation": [numbers], "descriptions": [text, ...]}`` (or a list of
them), the observation a vector of the configured ``observation_size``. ``match``
returns a ``Matched``: the description that applies best, its index, and a probability
per supplied description. A target names the description that applies, by its text or
its index. ``scene(inputs)`` is ``match``.

Observations are standardized by default (config ``standardize``), as scikit-learn's
``StandardScaler`` would: each feature has its mean subtracted and is divided by its
standard deviation (the population one; a constant feature keeps scale 1), both learned
once from observations and saved with the model (``save_pretrained`` buffers). They are
learned by ``fit_standardizer(observations)`` (the whole training set, like
``StandardScaler.fit``), or else from the first batch captured in training mode (what
``Trainer.capture`` records first: capture the training set as one batch, or call
``fit_standardizer`` first, for the statistics of all of it). Until then observations
pass unchanged. Raw features of different scales (30 beside 0.1) otherwise saturate the
scorer's ``tanh`` and training stalls at the uniform loss.

Observations are checked like tensors: a wrong length is a ``ShapeError``, values that
are not numbers a ``DTypeError``, NaN or infinity a ``TrainingError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import ShapeError, TrainingError
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
    prediction: ClassVar[str] = "match"
    defaults: ClassVar[dict[str, Any]] = {"observation_size": None, "dim": 32, "hidden": 32,
                                          "buckets": 4096, "seed": 0, "standardize": True}
    size_keys: ClassVar[tuple[str, ...]] = ("observation_size", "dim", "hidden", "buckets")

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        if config["observation_size"] is None:
            raise ConfigError("observation_size", "is required: the length of the "
                              "observation vectors")
        for key in ("observation_size", "dim", "hidden", "buckets"):
            checks.positive(config, key)
        checks.seed(config)
        if not isinstance(config["standardize"], bool):
            raise ConfigError("standardize", f"must be true or false, got "
                              f"{config['standardize']!r}")
        return config

    def build_operations(self) -> Mapping[str, Operation]:
        c = self.config
        size = c["observation_size"]
        #: the standardizer: per-feature mean and scale, and how many observations they
        #: were learned from (0: not learned yet, observations pass unchanged)
        self._mean = np.zeros(size, np.float64)
        self._scale = np.ones(size, np.float64)
        self._samples = 0
        return {"scorer": PairScorer(c["observation_size"], None, dim=c["dim"],
                                     hidden=c["hidden"], buckets=c["buckets"], mask="logits",
                                     seed=c["seed"], backend=self.backend)}

    def planned_parameters(self) -> int:
        c = self.config
        return PairScorer.parameter_count(c["observation_size"], None, c["dim"], c["hidden"],
                                          c["buckets"])

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

    def supervised_output(self, inputs: Any) -> Any:
        """Logits ``[n_padded]`` (or ``[rows, n_padded]``), padded descriptions at -1e9."""
        return self._score(self._parse(inputs))

    def _score(self, parsed: tuple) -> Any:
        observations, descriptions, batch = parsed
        if self.config["standardize"]:
            if self._samples == 0 and self.training:
                self.fit_standardizer(observations)
            if self._samples:
                observations = ((np.asarray(observations, np.float64) - self._mean)
                                / self._scale).tolist()
        scorer = self.operations["scorer"]
        if batch:
            return scorer(observations, descriptions)
        return scorer(observations[0], descriptions[0])

    def item_counts(self, inputs: Any) -> tuple[list[int], bool]:
        _, descriptions, batch = self._parse(inputs)
        return [len(d) for d in descriptions], batch

    def check_target(self, inputs: Any, target: Any) -> Any:
        _, descriptions, batch = self._parse(inputs)
        if not batch:
            return checks.choice_target(target, descriptions[0], "description", False)
        if not isinstance(target, (list, tuple)) or len(target) != len(descriptions):
            raise TrainingError(f"a batch of {len(descriptions)} inputs needs a list of "
                                f"{len(descriptions)} targets")
        return [checks.choice_target(t, d, "description", False)
                for t, d in zip(target, descriptions)]

    # -- standardization ------------------------------------------------------------------
    def fit_standardizer(self, observations: Any) -> Scene:
        """Learn each feature's mean and standard deviation from ``observations``
        (``[n, observation_size]`` numbers, checked like inputs), as
        ``StandardScaler.fit`` does; returns self. Experiences captured before keep the
        observations standardized as they were then: fit first, then capture."""
        if not self.config["standardize"]:
            raise ConfigError("standardize", "is false: this Scene takes observations as "
                              "they are; build it with standardize=True to learn a scaler")
        size = self.config["observation_size"]
        rows = observations if isinstance(observations, (list, tuple, np.ndarray)) else None
        if rows is None or len(rows) == 0:
            raise ShapeError(f"fit_standardizer needs [n, {size}] observations (n >= 1)")
        array = np.asarray([checks.vector(r, size, f"observations[{k}]")
                            for k, r in enumerate(rows)], np.float64)
        std = array.std(axis=0)
        self._mean = array.mean(axis=0)
        self._scale = np.where(std > 0, std, 1.0)
        self._samples = int(array.shape[0])
        return self

    @property
    def standardizer(self) -> dict[str, Any]:
        """The learned ``mean`` and ``scale`` (copies) and the ``samples`` they came from
        (0 when not learned yet)."""
        return {"mean": self._mean.copy(), "scale": self._scale.copy(),
                "samples": self._samples}

    def buffers(self) -> dict[str, np.ndarray]:
        if not self.config["standardize"]:
            return {}
        return {"standardize.mean": self._mean.copy(), "standardize.scale": self._scale.copy(),
                "standardize.samples": np.asarray([self._samples], np.int64)}

    def load_buffers(self, buffers: Mapping[str, np.ndarray]) -> None:
        if not self.config["standardize"]:
            super().load_buffers(buffers)
            return
        mean = np.asarray(buffers["standardize.mean"], np.float64)
        scale = np.asarray(buffers["standardize.scale"], np.float64)
        samples = int(np.asarray(buffers["standardize.samples"]).reshape(()))
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(scale)) and np.all(scale > 0)):
            raise ValueError("standardize.mean must be finite and standardize.scale finite "
                             "and positive")
        if samples < 0:
            raise ValueError(f"standardize.samples must be >= 0, got {samples}")
        self._mean, self._scale, self._samples = mean, scale, samples

    def match(self, inputs: Any) -> Matched | list[Matched]:
        """The description that applies best, and a probability per description."""
        parsed = self._parse(inputs)
        descriptions, batch = parsed[1], parsed[2]
        logits = np.asarray(self._score(parsed))
        results = []
        for texts, p in zip(descriptions, softmax_rows(logits, [len(d) for d in descriptions])):
            best = int(np.argmax(p))
            results.append(Matched(texts[best], best, p))
        return results if batch else results[0]


__all__ = ["Scene", "Matched"]

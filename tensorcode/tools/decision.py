"""``Decision``: choose among hypotheses supplied with each input.

An input is ``{"context": text, "hypotheses": [{"id": text, "text": text}, ...]}`` (or
a list of them, a batch); the number of hypotheses may differ from call to call. The
``PairScorer`` gives one logit per hypothesis (padded hypotheses get zero probability),
``decide`` returns a ``Decided`` with a probability per supplied hypothesis and the
chosen id. A target names a supplied hypothesis by id or index, or is a distribution
over the supplied hypotheses (finite, nonnegative, summing to one). The probabilities
divide the logits by ``calibration``'s temperature (1 until fitted with
``tool.calibration.fit(held_out_logits, labels)``), which ``save_pretrained`` keeps as a
buffer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import TrainingError
from ..operations.base import Operation
from ..training.calibration import TemperatureCalibration
from . import checks
from .base import Tool
from .scorer import PairScorer, item_bucket


@dataclass(frozen=True)
class Decided:
    """One decision: the chosen hypothesis id and a probability per supplied
    hypothesis (in the order supplied)."""

    chosen: str
    ids: tuple[str, ...]
    probabilities: np.ndarray

    def probability(self, hypothesis_id: str) -> float:
        return float(self.probabilities[self.ids.index(hypothesis_id)])


def softmax_rows(logits: np.ndarray, counts: list[int]) -> list[np.ndarray]:
    """The softmax of each row's first ``counts[row]`` logits, in float64."""
    return [softmax(row, n) for row, n in zip(np.atleast_2d(logits), counts)]


def softmax(row: np.ndarray, n: int) -> np.ndarray:
    """The softmax of ``row``'s first ``n`` logits, in float64 (one array, computed in
    place, the reductions called directly: a prediction pays for little around them)."""
    z = row[:n].astype(np.float64)
    z -= np.maximum.reduce(z)
    np.exp(z, out=z)
    z /= np.add.reduce(z)
    return z


class Decision(Tool):
    """Chooses among supplied hypotheses (see the module docstring).

    Config: ``dim`` (text embedding size), ``hidden``, ``buckets`` (hashed feature
    rows), ``seed``."""

    objective: ClassVar[str] = "cross_entropy"
    prediction: ClassVar[str] = "decide"
    defaults: ClassVar[dict[str, Any]] = {"dim": 32, "hidden": 32, "buckets": 4096,
                                          "seed": 0}
    size_keys: ClassVar[tuple[str, ...]] = ("dim", "hidden", "buckets")

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        for key in ("dim", "hidden", "buckets"):
            checks.positive(config, key)
        checks.seed(config)
        return config

    def build_operations(self) -> Mapping[str, Operation]:
        c = self.config
        self.calibration = TemperatureCalibration()
        return {"scorer": PairScorer(None, None, dim=c["dim"], hidden=c["hidden"],
                                     buckets=c["buckets"], mask="logits", seed=c["seed"],
                                     backend=self.backend)}

    def planned_parameters(self) -> int:
        c = self.config
        return PairScorer.parameter_count(None, None, c["dim"], c["hidden"], c["buckets"])

    # -- inputs ---------------------------------------------------------------------------
    def _parse(self, inputs: Any) -> tuple[list[str], list[list[str]], list[list[str]], bool]:
        items, batch = checks.one_or_batch(inputs, "Decision")
        contexts, texts, ids = [], [], []
        for k, item in enumerate(items):
            where = f"inputs[{k}]" if batch else "inputs"
            context, hypotheses, names = checks.query_and_items(item, "context",
                                                                "hypotheses", where)
            contexts.append(context)
            texts.append(hypotheses)
            ids.append(names)
        return contexts, texts, ids, batch

    def supervised_output(self, inputs: Any) -> Any:
        """Logits ``[n_padded]`` (or ``[rows, n_padded]``), padded hypotheses at -1e9."""
        return self._score(self._parse(inputs))

    def item_counts(self, inputs: Any) -> tuple[list[int], bool]:
        _, texts, _, batch = self._parse(inputs)
        return [len(t) for t in texts], batch

    def _score(self, parsed: tuple) -> Any:
        contexts, texts, _, batch = parsed
        scorer = self.operations["scorer"]
        return scorer(contexts, texts) if batch else scorer(contexts[0], texts[0])

    def check_target(self, inputs: Any, target: Any) -> Any:
        _, _, ids, batch = self._parse(inputs)
        if not batch:
            return checks.choice_target(target, ids[0], "hypothesis", True)
        if not isinstance(target, (list, tuple)) or len(target) != len(ids):
            raise TrainingError(f"a batch of {len(ids)} inputs needs a list of "
                                       f"{len(ids)} targets")
        found = [checks.choice_target(t, i, "hypothesis", True) for t, i in zip(target, ids)]
        return checks.stack_targets(found, item_bucket(max(len(i) for i in ids)))

    # -- predictions ----------------------------------------------------------------------
    def decide(self, inputs: Any) -> Decided | list[Decided]:
        """The chosen hypothesis and each supplied hypothesis's probability."""
        if isinstance(inputs, Mapping):  # one input: the same steps, nothing batched
            context, texts, names = checks.query_and_items(inputs, "context",
                                                           "hypotheses", "inputs")
            logits = self.operations["scorer"](context, texts)
            p = softmax(np.asarray(logits) / self.temperature, len(names))
            return Decided(names[int(p.argmax())], tuple(names), p)
        parsed = self._parse(inputs)
        ids, batch = parsed[2], parsed[3]
        logits = np.asarray(self._score(parsed)) / self.temperature
        results = []
        for row_ids, p in zip(ids, softmax_rows(logits, [len(i) for i in ids])):
            results.append(Decided(row_ids[int(np.argmax(p))], tuple(row_ids), p))
        return results if batch else results[0]

    # -- calibration buffer ---------------------------------------------------------------
    @property
    def temperature(self) -> float:
        return float(self.calibration.parameters.payloads()[0])

    def buffers(self) -> dict[str, np.ndarray]:
        return {"calibration.temperature":
                np.asarray(self.calibration.parameters.payloads()[0]).reshape(1)}

    def load_buffers(self, buffers: Mapping[str, np.ndarray]) -> None:
        value = np.asarray(buffers["calibration.temperature"], np.float32).reshape(())
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"calibration.temperature must be a positive finite number, got "
                             f"{float(value)}")
        self.calibration.load_payloads([value])


__all__ = ["Decision", "Decided", "softmax_rows", "softmax"]

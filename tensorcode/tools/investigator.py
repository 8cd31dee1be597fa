"""``Investigator``: verification, proposal, ranking and retrieval in one owned tool.

The objective is selected by a mode envelope ``{"mode": ..., "inputs": ...}``:

- ``verification``: ``{"premise", "hypothesis"}`` (or a list) -> ``entailment`` /
  ``neutral`` / ``contradiction``; a target names the label (or its index) or gives a
  distribution over the three;
- ``proposal``: ``{"evidence", "hypotheses": [{"id", "text"}, ...]}`` -> which hypotheses
  the evidence supports; the target is a hypothesis id or index, or a distribution;
- ``rank``: ``{"query", "candidates": [{"id", "text"}, ...]}`` -> candidates ordered for
  the query; the target is the relevant one's id or index. Ranking inputs without an
  envelope keep this objective;
- ``retrieval``: ``{"queries": [...], "documents": [...]}`` with a boolean
  ``[queries, documents]`` target matrix, at least one positive per query; unmarked
  documents are negatives (an in-batch contrastive cross-entropy). It trains
  ``episodic_encoder``, which exists when the config sets ``retrieval_encoder``.

Every objective is a cross-entropy. The verifier scores the premise against the
hypothesis marked with each label (a ``PairScorer`` over three items).
``verifier.calibration`` is a ``VerifierCalibration``: its temperature and the
fingerprint of the verifier weights it was fitted on are buffers ``save_pretrained``
keeps, and calibrated scores are refused (``StaleWeightsError``) once the verifier's
weights differ from those, until it is refitted on held-out data. ``fit_threshold``
(``tensorcode.training``) reports an empirical threshold on its sample; it certifies
nothing about new inputs. Episodic indexes are never saved with the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import StaleWeightsError, TrainingError
from ..operations.base import Operation, row_bucket
from ..training.calibration import TemperatureCalibration
from . import checks
from .base import ConfigError, Tool
from .decision import Decided, softmax_rows
from .episodic import EpisodicEncoder, EpisodicIndex, weights_fingerprint
from .scorer import PairScorer, item_bucket

LABELS = ("entailment", "neutral", "contradiction")
MODES = ("verification", "proposal", "rank", "retrieval")
#: the label marks the verifier reads in front of the hypothesis
_MARKS = ("it entails:", "it is neutral on:", "it contradicts:")
_NOT_FITTED = "0" * 64
_ENCODER_KEYS = {"dim": 32, "buckets": 4096, "scale": 10.0}


class VerifierCalibration(TemperatureCalibration):
    """A temperature fitted on one set of verifier weights, refused for any other.

    ``fitted_on`` is the verifier's ``weights_fingerprint`` at ``fit`` time (64 zeros
    until fitted); ``forward`` raises ``StaleWeightsError`` when it differs from the
    verifier's current weights."""

    def __init__(self, verifier: Operation, backend: str | None = None) -> None:
        super().__init__(backend)
        self.verifier = verifier
        self.fitted_on = _NOT_FITTED

    def fit(self, logits: Any, labels: Any) -> dict:
        """Fit on held-out verifier logits (made with the current weights)."""
        report = super().fit(logits, labels)
        self.fitted_on = weights_fingerprint(self.verifier)
        return report

    def check(self) -> None:
        """``StaleWeightsError`` unless fitted on the verifier's current weights."""
        if self.fitted_on == _NOT_FITTED:
            raise StaleWeightsError("the verifier calibration is not fitted; fit it with "
                                    "model.verifier.calibration.fit(held_out_logits, labels)")
        if self.fitted_on != weights_fingerprint(self.verifier):
            raise StaleWeightsError("the verifier's weights changed since its calibration "
                                    "was fitted; refit it on held-out data before using "
                                    "calibrated scores")

    def forward(self, logits: Any) -> np.ndarray:
        self.check()
        return super().forward(logits)


class Verifier:
    """The verification head: ``scorer`` (the trained operation) and ``calibration``."""

    def __init__(self, scorer: PairScorer) -> None:
        self.scorer = scorer
        self.calibration = VerifierCalibration(scorer)

    def fingerprint(self) -> str:
        """The weight fingerprint of the scorer (changes whenever a weight does)."""
        return weights_fingerprint(self.scorer)


@dataclass(frozen=True)
class Verified:
    """One verification: the label and a probability per label (in ``LABELS`` order)."""

    label: str
    probabilities: np.ndarray


def _marked(hypothesis: str) -> list[str]:
    return [f"{mark} {hypothesis}" for mark in _MARKS]


class Investigator(Tool):
    """Verification, proposal, ranking and retrieval (see the module docstring).

    Config: ``dim``, ``hidden``, ``buckets``, ``seed`` (the scorers) and
    ``retrieval_encoder`` (null, or ``{"dim", "buckets", "scale"}``)."""

    objective: ClassVar[str] = "cross_entropy"
    prediction: ClassVar[str] = "answer"
    defaults: ClassVar[dict[str, Any]] = {"dim": 32, "hidden": 32, "buckets": 4096,
                                          "seed": 0, "retrieval_encoder": None}
    size_keys: ClassVar[tuple[str, ...]] = ("dim", "hidden", "buckets", "retrieval_encoder.dim",
                                            "retrieval_encoder.buckets")

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        for key in ("dim", "hidden", "buckets"):
            checks.positive(config, key)
        checks.seed(config)
        encoder = config["retrieval_encoder"]
        if encoder is not None:
            if not isinstance(encoder, Mapping) or set(encoder) - set(_ENCODER_KEYS):
                raise ConfigError("retrieval_encoder", f"must be null or an object with keys "
                                  f"from {sorted(_ENCODER_KEYS)}, got {encoder!r}")
            full = {**_ENCODER_KEYS, **encoder}
            for key in ("dim", "buckets"):
                checks.positive(full, key)
            scale = full["scale"]
            if isinstance(scale, bool) or not isinstance(scale, (int, float)) or \
                    not 0 < scale < 1e4:
                raise ConfigError("retrieval_encoder", f"scale must be a number in (0, 1e4), "
                                  f"got {scale!r}")
            config["retrieval_encoder"] = {**full, "scale": float(scale)}
        return config

    def build_operations(self) -> Mapping[str, Operation]:
        c = self.config
        ops: dict[str, Operation] = {}
        for k, name in enumerate(("verifier", "proposer", "ranker")):
            ops[name] = PairScorer(None, None, dim=c["dim"], hidden=c["hidden"],
                                   buckets=c["buckets"], mask="logits",
                                   seed=(c["seed"] + k) % 2 ** 32, backend=self.backend)
        self.verifier = Verifier(ops["verifier"])  # type: ignore[arg-type]
        self.episodic_encoder: EpisodicEncoder | None = None
        encoder = c["retrieval_encoder"]
        if encoder is not None:
            self.episodic_encoder = EpisodicEncoder(
                encoder["dim"], encoder["buckets"], encoder["scale"], seed=c["seed"],
                backend=self.backend)
            ops["episodic_encoder"] = self.episodic_encoder
        return ops

    def planned_parameters(self) -> int:
        c = self.config
        count = 3 * PairScorer.parameter_count(None, None, c["dim"], c["hidden"], c["buckets"])
        encoder = c["retrieval_encoder"]
        if encoder is not None:
            count += EpisodicEncoder.parameter_count(encoder["dim"], encoder["buckets"])
        return count

    # -- the envelope ---------------------------------------------------------------------
    @staticmethod
    def mode_of(inputs: Any) -> tuple[str, Any]:
        """``(mode, inputs)``: the envelope's, or ``rank`` for plain ranking inputs."""
        if isinstance(inputs, Mapping) and "mode" in inputs:
            if set(inputs) != {"mode", "inputs"}:
                raise TrainingError(f"a mode envelope is {{'mode', 'inputs'}}, got the keys "
                                    f"{sorted(inputs)}")
            mode = inputs["mode"]
            if mode not in MODES:
                raise TrainingError(f"unknown mode {mode!r}; the Investigator's modes are "
                                    f"{list(MODES)}")
            return mode, inputs["inputs"]
        return "rank", inputs

    def supervised_output(self, inputs: Any) -> Any:
        mode, inner = self.mode_of(inputs)
        if mode == "retrieval":
            queries, documents = self._retrieval(inner)
            return self._encoder()(queries, documents)
        queries, items, _, batch = self._parse(mode, inner)
        op = self.operations[{"verification": "verifier", "proposal": "proposer",
                              "rank": "ranker"}[mode]]
        return op(queries, items) if batch else op(queries[0], items[0])

    def item_counts(self, inputs: Any) -> tuple[list[int], bool]:
        mode, inner = self.mode_of(inputs)
        if mode == "retrieval":
            queries, documents = self._retrieval(inner)
            return [len(documents)] * len(queries), True
        _, _, names, batch = self._parse(mode, inner)
        return [len(n) for n in names], batch

    def answer(self, inputs: Any) -> Any:
        """What ``investigator(inputs)`` runs: the prediction of the mode ``inputs``
        name (plain inputs rank): ``verify``,
        ``propose`` or ``rank``; retrieval gives the trimmed query-document scores
        (``output``). It never trains."""
        mode, inner = self.mode_of(inputs)
        if mode == "verification":
            return self.verify(inner)
        if mode == "proposal":
            return self.propose(inner)
        if mode == "rank":
            return self.rank(inner)
        return self.output(inputs)

    def check_target(self, inputs: Any, target: Any) -> Any:
        mode, inner = self.mode_of(inputs)
        if mode == "retrieval":
            return self._retrieval_target(inner, target)
        _, _, names, batch = self._parse(mode, inner)
        kind = {"verification": "label", "proposal": "hypothesis", "rank": "candidate"}[mode]
        if not batch:
            return checks.choice_target(target, names[0], kind, True)
        if not isinstance(target, (list, tuple)) or len(target) != len(names):
            raise TrainingError(f"a batch of {len(names)} {mode} inputs needs a list of "
                                f"{len(names)} targets")
        found = [checks.choice_target(t, n, kind, True) for t, n in zip(target, names)]
        return checks.stack_targets(found, item_bucket(max(len(n) for n in names)))

    # -- parsing --------------------------------------------------------------------------
    def _parse(self, mode: str, inputs: Any
               ) -> tuple[list[str], list[list[str]], list[list[str]], bool]:
        """``(queries, item texts, item names, batch)`` for the scorer modes."""
        items, batch = checks.one_or_batch(inputs, f"{mode}")
        queries, texts, names = [], [], []
        for k, item in enumerate(items):
            where = f"{mode} inputs[{k}]" if batch else f"{mode} inputs"
            if mode == "verification":
                checks.fields(item, ("premise", "hypothesis"), where)
                queries.append(checks.text(item["premise"], f"{where}.premise"))
                texts.append(_marked(checks.text(item["hypothesis"], f"{where}.hypothesis")))
                names.append(list(LABELS))
                continue
            query_key, list_key = ("evidence", "hypotheses") if mode == "proposal" else (
                "query", "candidates")
            query, entries, entry_ids = checks.query_and_items(item, query_key, list_key,
                                                               where)
            queries.append(query)
            texts.append(entries)
            names.append(entry_ids)
        return queries, texts, names, batch

    def _encoder(self) -> EpisodicEncoder:
        if self.episodic_encoder is None:
            raise TrainingError("this Investigator has no episodic encoder; set the config's "
                                "retrieval_encoder (e.g. {'dim': 32}) to train retrieval")
        return self.episodic_encoder

    @staticmethod
    def _retrieval(inputs: Any) -> tuple[list[str], list[str]]:
        if not isinstance(inputs, Mapping) or set(inputs) != {"queries", "documents"}:
            raise TrainingError("retrieval inputs are {'queries': [texts], 'documents': "
                                f"[texts]}}, got {inputs!r:.80}")
        out = []
        for key in ("queries", "documents"):
            value = inputs[key]
            if not isinstance(value, (list, tuple)) or not value or not all(
                    isinstance(t, str) for t in value):
                raise TrainingError(f"retrieval inputs.{key} must be a nonempty list of texts")
            out.append(list(value))
        return out[0], out[1]

    def _retrieval_target(self, inputs: Any, target: Any) -> np.ndarray:
        self._encoder()
        queries, documents = self._retrieval(inputs)
        shape = (len(queries), len(documents))
        try:
            matrix = np.asarray(target)
        except ValueError:
            raise TrainingError(f"the retrieval target must be a boolean {list(shape)} "
                                "[queries, documents] matrix; got a ragged list") from None
        if matrix.dtype != np.bool_:
            raise TrainingError(f"the retrieval target must be a boolean [queries, "
                                f"documents] matrix, got {matrix.dtype} values")
        if matrix.shape != shape:
            raise TrainingError(f"the retrieval target matrix is {list(matrix.shape)}, "
                                f"expected [queries, documents] = {list(shape)}")
        empty = np.flatnonzero(~matrix.any(axis=1))
        if empty.size:
            raise TrainingError(f"retrieval query {int(empty[0])} ({queries[empty[0]]!r}) "
                                "has no positive document; each query needs at least one")
        slots = max(2, row_bucket(len(documents)))  # the encoder's padded documents
        rows = np.zeros((shape[0], slots), np.float32)
        rows[:, :shape[1]] = matrix / matrix.sum(axis=1, keepdims=True)
        return rows

    # -- predictions ----------------------------------------------------------------------
    def verification_logits(self, pairs: Any) -> np.ndarray:
        """``float32[n, 3]`` verifier logits for one pair (n = 1) or a list of pairs."""
        queries, items, _, _ = self._parse("verification", pairs)
        logits = np.atleast_2d(self.operations["verifier"](queries, items))
        return logits[:, :len(LABELS)]

    def verify(self, pairs: Any, calibrated: bool = False) -> Verified | list[Verified]:
        """The label and probabilities of each pair; ``calibrated`` divides by the
        fitted temperature (``StaleWeightsError`` if unfitted or stale)."""
        logits = self.verification_logits(pairs)
        if calibrated:
            logits = self.verifier.calibration.forward(logits)
        p = softmax_rows(logits, [len(LABELS)] * len(logits))
        found = [Verified(LABELS[int(np.argmax(row))], row) for row in p]
        return found if not isinstance(pairs, Mapping) else found[0]

    def _choose(self, mode: str, inputs: Any) -> Decided | list[Decided]:
        queries, items, names, batch = self._parse(mode, inputs)
        op = self.operations["proposer" if mode == "proposal" else "ranker"]
        logits = np.atleast_2d(op(queries, items))
        found = [Decided(n[int(np.argmax(p))], tuple(n), p)
                 for n, p in zip(names, softmax_rows(logits, [len(n) for n in names]))]
        return found if batch else found[0]

    def propose(self, inputs: Any) -> Decided | list[Decided]:
        """Which supplied hypothesis the evidence supports, with probabilities."""
        return self._choose("proposal", inputs)

    def rank(self, inputs: Any) -> list[tuple[str, float]] | list[list[tuple[str, float]]]:
        """Candidates best first, as ``(id, probability)``."""
        found = self._choose("rank", inputs)
        rows = found if isinstance(found, list) else [found]
        ranked = [sorted(zip(d.ids, (float(x) for x in d.probabilities)),
                         key=lambda pair: -pair[1]) for d in rows]
        return ranked if isinstance(found, list) else ranked[0]

    def episodic_index(self, documents: Sequence[Any]) -> EpisodicIndex:
        """An index of ``documents`` (texts, ids their positions, or ``{"id", "text"}``)
        encoded with the episodic encoder and stamped with its weight fingerprint."""
        encoder = self._encoder()
        if not isinstance(documents, (list, tuple)) or not documents:
            raise TypeError("documents are a nonempty list of texts or {'id', 'text'}")
        if all(isinstance(d, str) for d in documents):
            ids, texts = [str(k) for k in range(len(documents))], list(documents)
        else:
            for k, d in enumerate(documents):
                if not isinstance(d, Mapping):
                    raise TypeError(f"documents[{k}] must be a text or {{'id', 'text'}}")
                checks.fields(d, ("id", "text"), f"documents[{k}]")
                checks.text(d["text"], f"documents[{k}].text")
            ids = checks.ids([d["id"] for d in documents], "documents.id")
            texts = [d["text"] for d in documents]
        return EpisodicIndex.build(encoder, ids, texts)

    # -- buffers --------------------------------------------------------------------------
    def buffers(self) -> dict[str, np.ndarray]:
        c = self.verifier.calibration
        return {"verifier.calibration.temperature":
                np.asarray(c.parameters.payloads()[0], np.float32).reshape(1),
                "verifier.calibration.fitted_on":
                np.frombuffer(bytes.fromhex(c.fitted_on), np.uint8).copy()}

    def load_buffers(self, buffers: Mapping[str, np.ndarray]) -> None:
        value = np.asarray(buffers["verifier.calibration.temperature"], np.float32).reshape(())
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"verifier.calibration.temperature must be a positive finite "
                             f"number, got {float(value)}")
        fitted = np.asarray(buffers["verifier.calibration.fitted_on"], np.uint8)
        self.verifier.calibration.load_payloads([value])
        self.verifier.calibration.fitted_on = fitted.tobytes().hex()


__all__ = ["Investigator", "Verifier", "VerifierCalibration", "Verified", "LABELS", "MODES"]

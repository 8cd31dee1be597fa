"""The Investigator: mode envelopes and targets, the fingerprinted verifier calibration,
and episodic indexes (exact search, staleness, files). One small model is shared by the
module (plans compile once)."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode.errors import ArtifactError, StaleWeightsError, TrainingError
from tensorcode.tools import ConfigError
from tensorcode.tools.episodic import EpisodicIndex, weights_fingerprint
from tensorcode.tools.investigator import LABELS, Investigator
from tensorcode.training import Trainer

PAIR = {"premise": "The connection was refused.", "hypothesis": "The connection succeeded."}
RANKING = {"query": "disk full", "candidates": [{"id": "a", "text": "free disk space"},
                                               {"id": "b", "text": "restart the service"}]}
RETRIEVAL = {"queries": ["How was the service restored?"],
             "documents": ["Restoring the database connection recovered the service.",
                           "The maintenance window starts tomorrow."]}
DOCUMENTS = [{"id": f"d{k}", "text": t} for k, t in enumerate(
    ["Restoring the database connection recovered the service.",
     "The maintenance window starts tomorrow.", "The certificate expired last night.",
     "Disk usage reached one hundred percent."])]
CONFIG = {"dim": 16, "hidden": 16, "buckets": 512, "retrieval_encoder": {"dim": 16}}


@pytest.fixture(scope="module")
def model() -> Investigator:
    return Investigator(CONFIG, backend="reference")  # numba parity: test_tools.py


@pytest.fixture(scope="module")
def trainer(model: Investigator) -> Trainer:
    return Trainer.from_tool(model, lr=0.05, backend="reference")


def verification(inputs: object) -> dict:
    return {"mode": "verification", "inputs": inputs}


def test_modes_and_targets(model: Investigator, trainer: Trainer) -> None:
    verified = model.verify(PAIR)
    assert verified.label in LABELS and np.isclose(verified.probabilities.sum(), 1.0)
    assert [i for i, _ in model.rank(RANKING)] in (["a", "b"], ["b", "a"])
    proposal = {"evidence": "disk full", "hypotheses": RANKING["candidates"]}
    assert model.propose(proposal).chosen in ("a", "b")
    # a label, an index or a distribution; ranking inputs without an envelope are "rank"
    assert trainer.capture(verification(PAIR), "contradiction", "t").supervisions
    assert np.isfinite(trainer.step(trainer.capture(verification([PAIR]), [2], "t")))
    trainer.capture(verification(PAIR), [0.2, 0.3, 0.5], "t")
    trainer.capture(RANKING, "a", "t")
    trainer.capture({"mode": "proposal", "inputs": proposal}, 1, "t")
    experience = trainer.capture({"mode": "retrieval", "inputs": RETRIEVAL}, [[True, False]],
                                 "t")
    first = trainer.step(experience)
    assert trainer.step(experience) < first  # the positive pulls closer
    with pytest.raises(TrainingError, match="unknown mode 'summarize'"):
        trainer.capture({"mode": "summarize", "inputs": PAIR}, "neutral", "t")
    with pytest.raises(TrainingError, match=r"matrix is \[1, 3\], expected"):
        trainer.capture({"mode": "retrieval", "inputs": RETRIEVAL}, [[True, False, False]], "t")
    with pytest.raises(TrainingError, match=r"query 0 .* has no positive"):
        trainer.capture({"mode": "retrieval", "inputs": RETRIEVAL}, [[False, False]], "t")
    with pytest.raises(TrainingError, match="boolean"):
        trainer.capture({"mode": "retrieval", "inputs": RETRIEVAL}, [[1, 0]], "t")
    with pytest.raises(TrainingError, match="'maybe' is not a supplied label"):
        trainer.capture(verification(PAIR), "maybe", "t")
    with pytest.raises(TrainingError, match="candidate"):
        trainer.capture(RANKING, 5, "t")
    with pytest.raises(TrainingError, match="no episodic encoder"):
        Investigator(dim=8, hidden=8, buckets=64).episodic_index(["a text"])
    with pytest.raises(ConfigError, match="retrieval_encoder"):
        Investigator(retrieval_encoder={"width": 3})


def test_calibration_is_refused_once_weights_change(model: Investigator, trainer: Trainer,
                                                    tmp_path: object) -> None:
    calibration = model.verifier.calibration
    pairs = [PAIR, {"premise": "The disk is full.", "hypothesis": "Storage ran out."},
             {"premise": "The job finished.", "hypothesis": "It ran on Tuesday."}]
    labels = np.array([2, 0, 1])
    logits = model.verification_logits(pairs)
    assert logits.shape == (3, 3)
    if calibration.fitted_on == "0" * 64:
        with pytest.raises(StaleWeightsError, match="not fitted"):
            model.verify(PAIR, calibrated=True)
    report = calibration.fit(logits, labels)
    assert report["nll_after"] <= report["nll_before"] + 1e-9
    assert calibration.fitted_on == model.verifier.fingerprint()
    calibrated = model.verify(pairs, calibrated=True)
    expected = np.exp(logits / calibration.temperature)
    np.testing.assert_allclose(calibrated[0].probabilities, expected[0] / expected[0].sum(),
                               rtol=1e-5)
    # the calibration is saved with the model and still valid for the same weights
    saved = model.save_pretrained(tmp_path / "investigator")  # type: ignore[operator]
    restored = Investigator.from_pretrained(saved)
    assert restored.verifier.calibration.temperature == calibration.temperature
    np.testing.assert_allclose(restored.verify(PAIR, calibrated=True).probabilities,
                               calibrated[0].probabilities, rtol=1e-5)
    # a training step changes the verifier: calibrated scores are refused until refit
    trainer.step(trainer.capture(verification(PAIR), "contradiction", "t"))
    with pytest.raises(StaleWeightsError, match="refit"):
        model.verify(PAIR, calibrated=True)
    calibration.fit(model.verification_logits(pairs), labels)
    model.verify(PAIR, calibrated=True)
    # a weight patch (new payloads) on the restored copy invalidates it too
    scorer = restored.operations["verifier"]
    scorer.load_payloads([p + 0.01 for p in scorer.parameters.payloads()])
    with pytest.raises(StaleWeightsError):
        restored.verify(PAIR, calibrated=True)


def test_episodic_index_search_staleness_and_files(model: Investigator, trainer: Trainer,
                                                   tmp_path: object) -> None:
    model.eval()
    index = model.episodic_index(DOCUMENTS)
    assert index.weights == weights_fingerprint(model.episodic_encoder)
    query = "How was the service restored?"
    ids, scores = index.search(query, k=3)
    vectors = model.episodic_encoder.encode([d["text"] for d in DOCUMENTS])
    brute = vectors @ model.episodic_encoder.encode([query])[0]
    order = np.argsort(-brute, kind="stable")[:3]
    assert ids == [DOCUMENTS[k]["id"] for k in order]
    np.testing.assert_allclose(scores, brute[order], rtol=1e-5, atol=1e-6)
    path = index.save(tmp_path / "index.safetensors")  # type: ignore[operator]
    loaded = EpisodicIndex.load(path, model.episodic_encoder)
    assert loaded.search(query, k=3)[0] == ids
    # training the encoder makes both live indexes stale until rebuilt
    trainer.step(trainer.capture({"mode": "retrieval", "inputs": RETRIEVAL},
                                 [[True, False]], "t"))
    for stale in (index, loaded):
        with pytest.raises(StaleWeightsError, match="stale fingerprint"):
            stale.search(query)
    assert model.episodic_index(DOCUMENTS).search([query, query], k=2)[1][0][0] in {
        d["id"] for d in DOCUMENTS}
    # files are validated: a damaged header or tensor is refused
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    damaged = tmp_path / "damaged.safetensors"  # type: ignore[operator]
    damaged.write_bytes(bytes(raw[: len(raw) // 2]))
    with pytest.raises(ArtifactError):
        EpisodicIndex.load(damaged)
    # indexes are never part of the saved model
    saved = model.save_pretrained(tmp_path / "model")  # type: ignore[operator]
    assert {p.name for p in saved.iterdir()} == {"tool.json", "weights.safetensors"}


def test_top_k_matches_a_full_sort() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((500, 8)).astype(np.float32)
    index = EpisodicIndex.from_vectors([f"v{k}" for k in range(500)], vectors)
    queries = rng.standard_normal((4, 8)).astype(np.float32)
    found = index.search_vectors(queries, k=7)
    full = queries @ vectors.T
    for row, (ids, scores) in enumerate(found):
        order = np.argsort(-full[row], kind="stable")[:7]
        assert ids == [f"v{k}" for k in order]
        np.testing.assert_allclose(scores, full[row, order], rtol=1e-6)
    assert len(index.search_vectors(queries[0], k=900)[0][0]) == 500
    with pytest.raises(StaleWeightsError, match="no encoder"):
        index.search("a text")

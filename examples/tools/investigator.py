"""The Investigator: verify a claim, calibrate the verifier, train owned retrieval (part
of ``tensorcode demo``).

On authored data (``authored_investigator.py``, generated from templates written for
TensorCode): the verifier trains on 144 pairs, its temperature is fitted on 48 held-out
pairs and the report compares accuracy and expected calibration error (ECE) on another
48 before and after calibration. The episodic encoder trains on 48 queries against the
288 documents (the rest are its negatives); recall@5 on the other 24 queries is measured
before and after, and the index built before training is refused (stale fingerprint)
and then rebuilt.

    python examples/tools/investigator.py [--backend reference] [--epochs N]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from authored_investigator import retrieval_set, verification_pairs

from tensorcode import optim
from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.errors import StaleWeightsError
from tensorcode.tools import Investigator
from tensorcode.tools.episodic import EpisodicIndex
from tensorcode.tools.investigator import LABELS
from tensorcode.training import Trainer
from tensorcode.training.calibration import evaluate_calibration, fit_threshold

CONFIG = {"dim": 16, "hidden": 16, "buckets": 1024,
          "retrieval_encoder": {"dim": 32, "buckets": 2048, "scale": 10.0}}


def recall_at(index: EpisodicIndex, queries: list[dict], k: int = 5) -> float:
    """Share of queries with at least one relevant document among the top ``k``."""
    found = index.search([q["text"] for q in queries], k=k)
    return float(np.mean([bool(set(ids) & set(q["relevant"]))
                          for (ids, _), q in zip(found, queries)]))


def run_example(epochs: int = 30, backend: str | None = None) -> list[str]:
    start = time.perf_counter()
    pairs = verification_pairs()
    train_set, calibrate, test = pairs[:144], pairs[144:192], pairs[192:]
    model = Investigator(CONFIG, backend=backend)
    owned: Any = model  # the training protocol is structural; Tool subclasses satisfy it
    trainer = Trainer.from_tool(owned, lr=0.03, backend=backend,
                                optimizer=lambda _: optim.Adam(backend=backend or DEFAULT_BACKEND))
    verification = trainer.capture(
        {"mode": "verification",
         "inputs": [{"premise": e["premise"], "hypothesis": e["hypothesis"]}
                    for e in train_set]},
        [e["label"] for e in train_set], source="authored-data:investigator-verification")
    documents, queries = retrieval_set()
    train_queries, test_queries = queries[:48], queries[48:]
    ids = [d["id"] for d in documents]
    matrix = [[i in q["relevant"] for i in ids] for q in train_queries]
    retrieval = trainer.capture(
        {"mode": "retrieval", "inputs": {"queries": [q["text"] for q in train_queries],
                                         "documents": [d["text"] for d in documents]}},
        matrix, source="authored-data:investigator-retrieval")
    model.eval()
    index = model.episodic_index(documents)
    recall_before = recall_at(index, test_queries)
    model.train()
    losses = trainer.fit([verification, retrieval], epochs=epochs, progress=False)
    model.eval()

    def labelled(examples: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        logits = model.verification_logits([{"premise": e["premise"],
                                             "hypothesis": e["hypothesis"]}
                                            for e in examples])
        return logits.astype(np.float64), np.array([LABELS.index(e["label"])
                                                    for e in examples])

    held_logits, held_labels = labelled(calibrate)
    test_logits, test_labels = labelled(test)
    before = evaluate_calibration(test_logits, test_labels)
    fit = model.verifier.calibration.fit(held_logits, held_labels)
    calibrated = model.verifier.calibration.forward(test_logits)
    after = evaluate_calibration(calibrated, test_labels)
    p = np.exp(calibrated - calibrated.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    threshold = fit_threshold(p.max(axis=1), p.argmax(axis=1) == test_labels, 0.1)
    try:
        index.search(test_queries[0]["text"])
        stale = "ANSWERED (wrong: the encoder changed)"
    except StaleWeightsError:
        stale = "refused (stale fingerprint)"
    rebuilt = model.episodic_index(documents)
    recall_after = recall_at(rebuilt, test_queries)
    elapsed = time.perf_counter() - start
    return [
        f"Investigator: {len(train_set)} verification pairs and {len(train_queries)} "
        f"retrieval queries over {len(documents)} documents (authored templates), "
        f"{len(losses)} Adam steps ({elapsed:.1f} s)",
        f"  verification on {len(test)} held-out pairs: accuracy {after['accuracy']:.1%}, "
        f"ECE {before['ece']:.3f} before and {after['ece']:.3f} after calibration "
        f"(temperature {fit['temperature']:.2f}, fitted on {len(calibrate)} other pairs)",
        f"  empirical threshold for <= 10% error on that sample: {threshold.threshold:.3f} "
        f"(coverage {threshold.coverage:.0%}, error {threshold.error:.1%}; not a guarantee)",
        f"  retrieval recall@5 on {len(test_queries)} held-out queries: "
        f"{recall_before:.1%} before, {recall_after:.1%} after training",
        f"  the index built before training: {stale}; rebuilt, it answers again",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    print("\n".join(run_example(epochs=args.epochs, backend=args.backend)))


if __name__ == "__main__":
    main()

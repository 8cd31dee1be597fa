"""The three product tasks of the tools suite, built identically in TensorCode's process
and in PyTorch's (a function of the installed scikit-learn only, no randomness outside
a fixed seed):

- ``scene``: scikit-learn's digits (1,797 images of 8x8 pixels, 10 classes), a 70/30
  split, batches of 32; each observation matched against the ten descriptions
  ``"digit 0"`` ... ``"digit 9"``. The features are standardized with the training
  split's mean and standard deviation (the Scene's own standardizer learns the same).
- ``decision``: a 6-way text classification built from the data-set descriptions
  scikit-learn ships (``sklearn/datasets/descr/*.rst``, BSD-3-Clause): each line of
  three or more words, labeled with the data set it describes (iris, digits, wine,
  breast cancer, 20 newsgroups, LFW); the hypotheses are the six data sets' titles.
- ``chat``: the same descriptions as a corpus of consecutive line pairs (a line and the
  line after it), lower-cased and cut to the Chatbot's alphabet, 30 characters each (a
  pair and its two marks fit the Chatbot's 64 positions: one row per pair), batches of
  8 pairs.

scikit-learn is the benchmark extra's (``pip install 'tensorcode[bench]'``); tests never
need it.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import Any

import numpy as np

BATCH = 32
CHAT_BATCH = 8
CHAT_CHARS = 30
DECISION_SOURCES = {"iris": "iris plants data set: sepal and petal measurements",
                    "digits": "optical recognition of handwritten digits",
                    "wine_data": "wine recognition data set: chemical analysis",
                    "breast_cancer": "breast cancer wisconsin diagnostic data set",
                    "twenty_newsgroups": "the 20 newsgroups text data set",
                    "lfw": "labeled faces in the wild face recognition"}


def _descriptions() -> dict[str, str]:
    import sklearn

    folder = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "descr")
    return {name[:-4]: open(os.path.join(folder, name), encoding="utf-8").read()
            for name in sorted(os.listdir(folder)) if name.endswith(".rst")}


def _split(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    cut = int(0.7 * n)
    return order[:cut], order[cut:]


def scene_task() -> dict[str, Any]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    train, test = _split(len(x))
    labels = [f"digit {k}" for k in range(10)]
    mean, std = x[train].mean(axis=0), x[train].std(axis=0)
    scale = np.where(std > 0, std, 1.0)

    def inputs(rows: np.ndarray) -> list[dict]:
        return [{"observation": x[r].tolist(), "descriptions": labels} for r in rows]

    batches = [train[k:k + BATCH] for k in range(0, len(train) - BATCH + 1, BATCH)]
    return {"observation_size": 64, "raw": x, "mean": mean, "scale": scale,
            "batches": [(inputs(b), [int(y[r]) for r in b]) for b in batches],
            "test": (inputs(test), [int(y[r]) for r in test]), "labels": labels}


def decision_task() -> dict[str, Any]:
    texts = _descriptions()
    hypotheses = [{"id": name, "text": title} for name, title in DECISION_SOURCES.items()]
    lines, labels = [], []
    for k, name in enumerate(DECISION_SOURCES):
        for line in texts[name].splitlines():
            words = re.findall(r"[A-Za-z0-9]+", line)
            if len(words) >= 3:
                lines.append(" ".join(words).lower())
                labels.append(k)
    train, test = _split(len(lines))

    def inputs(rows: np.ndarray) -> list[dict]:
        return [{"context": lines[r], "hypotheses": hypotheses} for r in rows]

    batches = [train[k:k + BATCH] for k in range(0, len(train) - BATCH + 1, BATCH)]
    return {"batches": [(inputs(b), [labels[r] for r in b]) for b in batches],
            "test": (inputs(test), [labels[r] for r in test]), "classes": len(hypotheses)}


def chat_task() -> dict[str, Any]:
    from tensorcode.tools.chatbot import ALPHABET

    allowed = set(ALPHABET)
    corpus = []
    for text in _descriptions().values():
        for line in text.splitlines():
            kept = "".join(c for c in line.lower() if c in allowed)
            kept = " ".join(kept.split())[:CHAT_CHARS]
            if len(kept) >= 8:
                corpus.append(kept)
    pairs = list(itertools.pairwise(corpus))
    train, test = _split(len(pairs))
    batches = [train[k:k + CHAT_BATCH] for k in range(0, len(train) - CHAT_BATCH + 1,
                                                       CHAT_BATCH)]
    return {"batches": [([pairs[r][0] for r in b], [pairs[r][1] for r in b])
                        for b in batches],
            "test": [pairs[r] for r in test]}


__all__ = ["scene_task", "decision_task", "chat_task", "BATCH"]

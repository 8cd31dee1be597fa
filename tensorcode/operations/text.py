"""Text in, labels out: a hashed n-gram ``TextEncoder`` and a ``Classifier`` head.

The encoder maps a text to the mean of trainable embedding rows, one row per word
n-gram, chosen by a stable hash (BLAKE2b, never Python's salted ``hash()``), so the same
text picks the same rows in every process and on every machine. Texts of any length are
padded to a power-of-two number of n-grams with a mask, so a handful of plans serve
every length. The classifier is a linear head whose label names let a loss take label
strings as targets.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import nn
from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import maximum
from ..compiler.trace.expr import Expr
from ..nn import init as initializers
from .base import Operation, as_float_array, check_last_axis, row_bucket
from .layers import checked_seed, one_argument, positive_int

_WORD = re.compile(r"\w+")
#: the fewest n-gram slots a text is padded to
MIN_LENGTH = 8


def tokenize(text: str) -> list[str]:
    """Lower-cased runs of word characters (Unicode-aware)."""
    return _WORD.findall(text.lower())


def ngram_ids(text: str, ngrams: Sequence[int], buckets: int) -> list[int]:
    """The bucket of every word n-gram of ``text`` (in order, n ascending)."""
    tokens = tokenize(text)
    ids = []
    for n in ngrams:
        for i in range(len(tokens) - n + 1):
            gram = f"{n}\x1f" + "\x1f".join(tokens[i:i + n])
            digest = hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest()
            ids.append(int.from_bytes(digest, "little") % buckets)
    return ids


class TextEncoder(Operation):
    """``encoder(text) -> float32[dim]``: the mean embedding of the text's hashed word
    n-grams (a zero vector for a text without words); ``encoder([t1, t2])`` gives
    ``[2, dim]``. The ``[buckets, dim]`` table is trainable."""

    qualified_name = "tensorcode.ops.TextEncoder"
    pads_rows = True
    accepts_tensors = False

    def __init__(self, dim: int, buckets: int = 2 ** 16, ngrams: Sequence[int] = (1, 2),
                 seed: int = 0, backend: str | None = None) -> None:
        self.dim, self.buckets = positive_int("dim", dim), positive_int("buckets", buckets)
        ngrams = tuple(positive_int("ngrams[*]", n) for n in ngrams)
        if not ngrams or len(set(ngrams)) != len(ngrams):
            raise ValueError(f"ngrams must be distinct positive ints, got {ngrams}")
        self.ngrams, self.seed = tuple(sorted(ngrams)), checked_seed(seed)
        self._initialize(backend)

    def configuration(self) -> dict:
        return {"dim": self.dim, "buckets": self.buckets, "ngrams": list(self.ngrams),
                "tokenizer": "lower-words-v1", "hash": "blake2b-64-le-v1",
                "pooling": "mean", "dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> nn.Embedding:
        init = (initializers.normal(self.seed, 1.0 / np.sqrt(self.dim)) if fresh
                else initializers.zeros())
        return nn.Embedding(tape, self.buckets, self.dim, init=init)

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        (text,) = one_argument(self, args)
        if isinstance(text, str):
            texts, single = [text], True
        elif isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text) and text:
            texts, single = list(text), False
        else:
            raise TypeError("TextEncoder takes a str or a nonempty list of str, got "
                            f"{type(text).__name__}")
        ids = [ngram_ids(t, self.ngrams, self.buckets) for t in texts]
        length = max(MIN_LENGTH, row_bucket(max(len(i) for i in ids)))
        indices = np.zeros((len(texts), length), np.int64)
        mask = np.zeros((len(texts), length), np.float32)
        for row, found in enumerate(ids):
            indices[row, :len(found)] = found
            mask[row, :len(found)] = 1.0
        if single:
            return [indices[0], mask[0]]
        return [indices, mask]

    def express(self, built: nn.Embedding, inputs: Sequence[Expr]) -> Expr:
        indices, mask = inputs
        rows = built(indices)                                   # [..., L, dim]
        weights = mask.reshape(mask.shape + (1,))               # [..., L, 1]
        summed = (rows * weights).sum(axis=-2)                  # [..., dim]
        count = maximum(mask.sum(axis=-1, keepdims=True), 1.0)  # [..., 1]
        return summed / count


class Classifier(Operation):
    """``head(vector) -> logits``: a linear map from ``dim`` features to one logit per
    label. ``labels`` names the classes, so a cross-entropy target may be a label."""

    qualified_name = "tensorcode.ops.Classifier"
    pads_rows = True

    def __init__(self, dim: int, labels: Sequence[str], seed: int = 0,
                 backend: str | None = None) -> None:
        self.dim, self.seed = positive_int("dim", dim), checked_seed(seed)
        labels = tuple(labels)
        if len(labels) < 2 or not all(isinstance(label, str) and label for label in labels):
            raise ValueError(f"Classifier needs at least two nonempty label names, got "
                             f"{list(labels)}")
        if len(set(labels)) != len(labels):
            raise ValueError(f"Classifier labels must be distinct, got {list(labels)}")
        self.labels = labels
        self._index = {label: k for k, label in enumerate(labels)}
        self._initialize(backend)

    def configuration(self) -> dict:
        return {"dim": self.dim, "labels": list(self.labels), "dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> nn.Linear:
        init = initializers.xavier(self.seed) if fresh else initializers.zeros()
        return nn.Linear(tape, self.dim, len(self.labels), init=init)

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        (x,) = one_argument(self, args)
        array = as_float_array("Classifier", x)
        check_last_axis(f"Classifier({self.dim})", array, self.dim)
        return [array]

    def express(self, built: nn.Linear, inputs: Sequence[Expr]) -> Expr:
        return built(inputs[0])

    def label_index(self, label: str) -> int:
        """The class index of ``label`` (``KeyError`` naming the known labels)."""
        try:
            return self._index[label]
        except (KeyError, TypeError):
            raise KeyError(f"unknown label {label!r}; this classifier knows "
                           f"{list(self.labels)}") from None

    def predict(self, vector: Any) -> Any:
        """The most likely label (or a list of labels for a batch)."""
        logits = self(vector)
        if logits.ndim == 1:
            return self.labels[int(np.argmax(logits))]
        return [self.labels[int(k)] for k in np.argmax(logits, axis=-1)]


__all__ = ["TextEncoder", "Classifier", "tokenize", "ngram_ids", "MIN_LENGTH"]

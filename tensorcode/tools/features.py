"""Deterministic text features for the tools: hashed word and character n-grams.

A text becomes the bucket ids of its lower-cased words, its word bigrams and the
character trigrams of each word (with boundary marks, so "restart" and "restarted" share
most of their grams). Buckets come from BLAKE2b, never Python's salted ``hash()``, so the
same text picks the same rows in every process and on every machine. Texts recur (the
same hypotheses are offered again and again), so ids are cached per text.

``pad_texts`` turns a list of texts into ``[rows, length]`` ids and a 0/1 mask, with the
length padded to a power of two (at least ``MIN_LENGTH``) so a few plans serve every
length.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Sequence

import numpy as np

from ..operations.base import row_bucket
from ..operations.text import tokenize

#: the name recorded in a tool's configuration (part of every fingerprint)
FEATURES = "words-1-2+chars-3-blake2b-v1"
#: the fewest n-gram slots a text is padded to
MIN_LENGTH = 8


def _bucket(gram: str, buckets: int) -> int:
    digest = hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % buckets


@functools.lru_cache(maxsize=65536)
def text_ids(text: str, buckets: int) -> tuple[int, ...]:
    """The bucket of every feature of ``text``: words, word bigrams, then the
    character trigrams of each word (``<word>`` with boundary marks)."""
    words = tokenize(text)
    grams = [f"w\x1f{w}" for w in words]
    grams += [f"b\x1f{a}\x1f{b}" for a, b in itertools.pairwise(words)]
    for word in words:
        marked = f"<{word}>"
        grams += [f"c\x1f{marked[i:i + 3]}" for i in range(len(marked) - 2)]
    return tuple(_bucket(gram, buckets) for gram in grams)


def pad_texts(texts: Sequence[str], buckets: int, rows: int | None = None,
              length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids int64[rows, length], mask float32[rows, length])`` for ``texts``; rows
    beyond ``len(texts)`` (when ``rows`` is larger) are all padding."""
    ids = [text_ids(t, buckets) for t in texts]
    longest = max((len(i) for i in ids), default=0)
    length = max(MIN_LENGTH, row_bucket(longest)) if length is None else length
    rows = len(texts) if rows is None else rows
    indices = np.zeros((rows, length), np.int64)
    mask = np.zeros((rows, length), np.float32)
    for row, found in enumerate(ids):
        indices[row, :len(found)] = found
        mask[row, :len(found)] = 1.0
    return indices, mask


def padded_length(texts: Sequence[str], buckets: int) -> int:
    """The padded feature length ``pad_texts`` would choose for ``texts``."""
    longest = max((len(text_ids(t, buckets)) for t in texts), default=0)
    return max(MIN_LENGTH, row_bucket(longest))


__all__ = ["FEATURES", "MIN_LENGTH", "text_ids", "pad_texts", "padded_length"]

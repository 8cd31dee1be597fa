"""``PairScorer``: the operation every owned tool scores with.

It scores a *query* (a text, or a numeric vector of a configured size) against a list
of *items* (texts or vectors) supplied with each call, and gives one number per item:

    q, h_i   = the query and item i, texts pooled from a trainable n-gram embedding
    hidden_i = tanh(q W_q + h_i W_h + ((q P) * h_i) W_m + b)
    score_i  = hidden_i . v + c

The product term lets the score depend on how the query and the item agree, not only
on each alone. The number of items varies from call to call: items are padded to a
power-of-two count (at least 2) with a validity mask, and a padded item's score is
``-1e9`` (``mask="logits"``: zero probability after a softmax, and a finite number, so
a zero target times its log-probability stays zero) or ``0`` (``mask="zero"``, for
regression outputs). Texts are padded to power-of-two feature counts, so a handful of
plans serves every call, and one call costs one plan call.

Call forms: ``scorer(query, items)`` gives ``float32[n_padded]``;
``scorer([query, ...], [items, ...])`` a batch ``float32[rows, n_padded]``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import nn
from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import maximum
from ..compiler.trace.expr import Expr
from ..errors import ShapeError, TrainingError
from ..nn import init as initializers
from ..operations.base import Operation, row_bucket
from ..operations.layers import checked_seed, positive_int
from .features import FEATURES, pad_texts, padded_length

#: the score of a padded item under ``mask="logits"``
MASKED_LOGIT = -1e9
MASKS = ("logits", "zero")
#: the fewest item slots a call is padded to
MIN_ITEMS = 2


def item_bucket(n: int) -> int:
    """The padded item count for ``n`` supplied items."""
    return max(MIN_ITEMS, row_bucket(n))


class _Built:
    """The scorer's modules on one tape, in recording order."""

    def __init__(self, tape: Tape, query_dim: int, item_dim: int, hidden: int,
                 buckets: int | None, dim: int, fresh: bool, seed: int) -> None:
        def xavier(k: int) -> Any:
            return initializers.xavier(seed * 16 + k) if fresh else initializers.zeros()

        self.embedding = None
        if buckets is not None:
            init = (initializers.normal(seed * 16, 1.0 / math.sqrt(dim)) if fresh
                    else initializers.zeros())
            self.embedding = nn.Embedding(tape, buckets, dim, init=init, name="embedding")
        self.query = nn.Linear(tape, query_dim, hidden, init=xavier(1), name="query")
        self.item = nn.Linear(tape, item_dim, hidden, init=xavier(2), bias=False, name="item")
        self.pair = nn.Linear(tape, query_dim, item_dim, init=xavier(3), bias=False,
                              name="pair")
        self.mix = nn.Linear(tape, item_dim, hidden, init=xavier(4), bias=False, name="mix")
        self.out = nn.Linear(tape, hidden, 1, init=xavier(5), name="out")


def _pool(embedding: nn.Embedding, ids: Expr, mask: Expr) -> Expr:
    """The mean embedding of the unmasked ids (zero for a text without features)."""
    rows = embedding(ids)                                    # [..., L, dim]
    summed = (rows * mask.reshape(mask.shape + (1,))).sum(axis=-2)
    return summed / maximum(mask.sum(axis=-1, keepdims=True), 1.0)


@functools.lru_cache(maxsize=1024)
def _single_item_texts(texts: tuple[str, ...], slots: int, buckets: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``([1, slots, L] ids, mask)`` for one call's item texts, read-only (cached)."""
    ids, mask = pad_texts(texts, buckets, slots, padded_length(texts, buckets))
    ids, mask = ids.reshape((1,) + ids.shape), mask.reshape((1,) + mask.shape)
    ids.flags.writeable = False
    mask.flags.writeable = False
    return ids, mask


class PairScorer(Operation):
    """Scores a query against a variable number of items (see the module docstring).

    ``query_size`` / ``item_size``: ``None`` for texts, else the length of the numeric
    vectors. Texts share one ``[buckets, dim]`` embedding table."""

    qualified_name = "tensorcode.tools.PairScorer"
    accepts_tensors = False

    def __init__(self, query_size: int | None, item_size: int | None, dim: int = 32,
                 hidden: int = 32, buckets: int = 4096, mask: str = "logits", seed: int = 0,
                 backend: str | None = None) -> None:
        self.query_size = None if query_size is None else positive_int("query_size",
                                                                       query_size)
        self.item_size = None if item_size is None else positive_int("item_size", item_size)
        self.dim, self.hidden = positive_int("dim", dim), positive_int("hidden", hidden)
        self.buckets = positive_int("buckets", buckets)
        if mask not in MASKS:
            raise ValueError(f"mask must be one of {MASKS}, got {mask!r}")
        self.mask, self.seed = mask, checked_seed(seed)
        self._initialize(backend)

    @property
    def uses_text(self) -> bool:
        return self.query_size is None or self.item_size is None

    def configuration(self) -> dict:
        return {"query": "text" if self.query_size is None else self.query_size,
                "items": "text" if self.item_size is None else self.item_size,
                "dim": self.dim, "hidden": self.hidden,
                "buckets": self.buckets if self.uses_text else None,
                "features": FEATURES if self.uses_text else None,
                "mask": self.mask, "dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> _Built:
        return _Built(tape, self.query_size or self.dim, self.item_size or self.dim,
                      self.hidden, self.buckets if self.uses_text else None, self.dim,
                      fresh, self.seed)

    # -- call-path conversion -----------------------------------------------------------
    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        if len(args) != 2:
            raise TypeError(f"PairScorer takes (query, items), got {len(args)} arguments")
        query, items = args
        batch = self._is_batch(query)
        queries = list(query) if batch else [query]
        if batch:
            if not isinstance(items, (list, tuple)) or len(items) != len(queries):
                raise TypeError(f"a batch of {len(queries)} queries needs a list of "
                                f"{len(queries)} item lists")
            item_lists = [self._items(i) for i in items]
        else:
            item_lists = [self._items(items)]
        slots = item_bucket(max(len(i) for i in item_lists))
        arrays = self._queries(queries) + self._item_arrays(item_lists, slots)
        valid = np.zeros((len(queries), slots), np.float32)
        for row, found in enumerate(item_lists):
            valid[row, :len(found)] = 1.0
        arrays.append(valid)
        if not batch:
            arrays = [a[0] for a in arrays]
        return arrays

    def _is_batch(self, query: Any) -> bool:
        if self.query_size is None:
            if isinstance(query, str):
                return False
            if isinstance(query, (list, tuple)) and query and all(
                    isinstance(q, str) for q in query):
                return True
            raise TypeError(f"the query is a text (or a nonempty list of texts for a batch), "
                            f"got {type(query).__name__}")
        array = self._numbers("query", query)
        if array.ndim not in (1, 2) or array.shape[-1] != self.query_size or array.size == 0:
            raise ShapeError(f"the query is a vector of {self.query_size} numbers (or "
                             f"[rows, {self.query_size}] for a batch), got shape "
                             f"{list(array.shape)}")
        return array.ndim == 2

    def _items(self, items: Any) -> list:
        if self.item_size is None:
            if not isinstance(items, (list, tuple)) or not items or not all(
                    isinstance(t, str) for t in items):
                raise TypeError("items are a nonempty list of texts")
            return list(items)
        array = self._numbers("items", items)
        if array.ndim != 2 or array.shape[1] != self.item_size or array.shape[0] == 0:
            raise ShapeError(f"items are [n, {self.item_size}] numbers (n >= 1), got shape "
                             f"{list(array.shape)}")
        return list(array)

    @staticmethod
    def _numbers(name: str, value: Any) -> np.ndarray:
        if isinstance(value, str):
            raise TypeError(f"{name}: expected numbers, got a text")
        try:
            array = np.asarray(value)
        except ValueError:
            raise TypeError(f"{name}: expected a rectangular array of numbers") from None
        if array.dtype.kind not in "fiu":
            raise TypeError(f"{name}: expected numbers, got {array.dtype} values")
        if not np.all(np.isfinite(array)):
            raise TrainingError(f"{name}: holds NaN or infinity; inputs must be finite")
        return np.asarray(array, np.float32)

    def _queries(self, queries: list) -> list[np.ndarray]:
        if self.query_size is None:
            ids, mask = pad_texts(queries, self.buckets)
            return [ids, mask]
        return [np.ascontiguousarray(np.stack([self._numbers("query", q) for q in queries]))]

    def _item_arrays(self, item_lists: list[list], slots: int) -> list[np.ndarray]:
        rows = len(item_lists)
        if self.item_size is None and rows == 1:
            # one call's item texts recur (the same options offered again and again)
            return list(_single_item_texts(tuple(item_lists[0]), slots, self.buckets))
        if self.item_size is None:
            length = max(padded_length(items, self.buckets) for items in item_lists)
            ids = np.zeros((rows, slots, length), np.int64)
            mask = np.zeros((rows, slots, length), np.float32)
            for row, items in enumerate(item_lists):
                ids[row], mask[row] = pad_texts(items, self.buckets, slots, length)
            return [ids, mask]
        vectors = np.zeros((rows, slots, self.item_size), np.float32)
        for row, items in enumerate(item_lists):
            vectors[row, :len(items)] = np.stack(items)
        return [vectors]

    # -- the computation ----------------------------------------------------------------
    def express(self, built: _Built, inputs: Sequence[Expr]) -> Expr:
        inputs = list(inputs)
        if self.query_size is None:
            assert built.embedding is not None
            query = _pool(built.embedding, inputs.pop(0), inputs.pop(0))
        else:
            query = inputs.pop(0)
        if self.item_size is None:
            assert built.embedding is not None
            items = _pool(built.embedding, inputs.pop(0), inputs.pop(0))
        else:
            items = inputs.pop(0)
        (valid,) = inputs
        lead = query.shape[:-1]
        paired = built.pair(query).reshape(lead + (1, items.shape[-1])) * items
        hidden = (built.query(query).reshape(lead + (1, self.hidden)) + built.item(items)
                  + built.mix(paired)).tanh()
        scores = built.out(hidden).reshape(valid.shape)
        if self.mask == "logits":
            return scores + (valid - 1.0) * (-MASKED_LOGIT)
        return scores * valid


__all__ = ["PairScorer", "MASKED_LOGIT", "MASKS", "item_bucket"]

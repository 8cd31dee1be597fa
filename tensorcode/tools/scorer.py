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

A single call over text items (every tool's prediction) takes a lean path to the same
plan: the padded features of the item list and of a query text are cached (read-only:
recurring texts are not hashed or padded again), a numeric query is written into a
buffer each thread reuses (no allocation per call), and the plan's bound call is kept
per input types and rebound only when the parameters change. The inputs are the arrays
the general path builds, and the plan is the same one, so the numbers are identical;
only the Python around the plan call is less.
"""

from __future__ import annotations

import functools
import math
import threading
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
from ..operations.execute import rewrap
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
    """``([slots, L] ids, mask)`` for one call's item texts, read-only (cached: the
    same options are offered again and again)."""
    ids, mask = pad_texts(texts, buckets, slots, padded_length(texts, buckets))
    ids.flags.writeable = False
    mask.flags.writeable = False
    return ids, mask


@functools.lru_cache(maxsize=4096)
def _query_text(text: str, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """``([L] ids, mask)`` for one query text, read-only (cached, as item texts are)."""
    ids, mask = pad_texts([text], buckets)
    ids, mask = ids[0], mask[0]
    ids.flags.writeable = False
    mask.flags.writeable = False
    return ids, mask


@functools.lru_cache(maxsize=256)
def _validity(count: int, slots: int) -> np.ndarray:
    """``float32[slots]``: 1 for the ``count`` supplied items, 0 for padding (read-only)."""
    valid = np.zeros(slots, np.float32)
    valid[:count] = 1.0
    valid.flags.writeable = False
    return valid


class _BoundCall:
    """One input signature's lean prediction call: the executor's plan bound to one
    parameter table, the plan's input order, and where the scores lie in its output."""

    __slots__ = ("call", "executor", "order", "parameters", "refused", "root")

    def __init__(self, executor: Any, parameters: Any) -> None:
        plan = executor.plan
        position = {id(symbol): k for k, symbol in enumerate(executor.inputs)}
        self.executor = executor
        self.order = tuple(position[id(symbol)] for symbol in plan.inputs())
        self.parameters = parameters
        bound = plan.bind(rewrap(parameters, executor.network.layout))
        self.call, roots = bound.flat
        self.refused = bound.refused  # what the raw call raises when it refuses
        self.root = roots[0]


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
        self._calls: dict[tuple, _BoundCall | None] = {}
        self._buffers = threading.local()

    @staticmethod
    def parameter_count(query_size: int | None, item_size: int | None, dim: int,
                        hidden: int, buckets: int) -> int:
        """The parameter values a scorer of these sizes holds (what ``_Built`` records),
        computed without building it: a loader bounds a file's config by it first."""
        query, item = query_size or dim, item_size or dim
        text = query_size is None or item_size is None
        return ((buckets * dim if text else 0) + query * hidden + hidden + item * hidden
                + query * item + item * hidden + hidden + 1)

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
            return [a.reshape((1,) + a.shape)
                    for a in _single_item_texts(tuple(item_lists[0]), slots, self.buckets)]
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

    # -- the lean single-call path ------------------------------------------------------
    def apply(self, args: Sequence[Any]) -> Any:
        """One call outside a trace; a single call over text items takes the lean path
        (see the module docstring), every other form (and every malformed one, which
        gets its error there) the general one."""
        if len(args) == 2 and self.item_size is None:
            query = args[0]
            if self.query_size is None:
                found = self._apply_one(query, args[1]) if isinstance(query, str) else None
            else:
                vector = self._numbers("query", query)
                found = (self._apply_one(vector, args[1])
                         if vector.shape == (self.query_size,) else None)
            if found is not None:
                return found
        return super().apply(args)

    def _apply_one(self, query: str | np.ndarray, items: Any) -> np.ndarray | None:
        """``float32[n_padded]`` for one query (a text, or a checked ``float32`` vector)
        against item texts, or ``None`` when the plan needs the general path (one that
        draws random numbers, or a call the bound plan refused)."""
        texts = tuple(self._items(items))
        slots = item_bucket(len(texts))
        item_ids, item_mask = _single_item_texts(texts, slots, self.buckets)
        valid = _validity(len(texts), slots)
        if isinstance(query, str):
            query_ids, query_mask = _query_text(query, self.buckets)
            inputs: tuple[np.ndarray, ...] = (query_ids, query_mask, item_ids, item_mask,
                                              valid)
        else:
            vector = self._vector_buffer(query.shape[0])
            vector[:] = query
            inputs = (vector, item_ids, item_mask, valid)
        key = (inputs[0].shape, item_ids.shape, self.training)
        bound = self._calls.get(key)
        if bound is None or bound.parameters is not self._parameters:
            if bound is None and key in self._calls:
                return None
            bound = self._bind(key, inputs)
            if bound is None:
                return None
        try:
            outs = bound.call(*[inputs[k] for k in bound.order])
        except bound.refused:
            return None  # the general path raises the documented error for it
        buffer, start, stop, shape = bound.root
        return outs[buffer][start:stop].reshape(shape)

    def _bind(self, key: tuple, inputs: Sequence[np.ndarray]) -> _BoundCall | None:
        executor = self._executor_for(inputs)
        found = None if executor.plan.takes_randomness else _BoundCall(executor,
                                                                       self._parameters)
        with self._plans_lock:
            self._calls[key] = found
        return found

    def _vector_buffer(self, length: int) -> np.ndarray:
        """This thread's reusable ``float32[length]`` query buffer (threads never share
        one; a call never keeps it past its return)."""
        array = getattr(self._buffers, "vector", None)
        if array is None or array.shape != (length,):
            array = self._buffers.vector = np.zeros(length, np.float32)
        return array

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

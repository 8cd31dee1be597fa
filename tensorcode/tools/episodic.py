"""Episodic retrieval: a trainable text encoder, weight fingerprints and exact indexes.

``EpisodicEncoder`` maps texts to unit vectors (a mean of hashed n-gram embeddings, a
linear map, L2 normalization). Its second call form, ``encoder(queries, documents)``,
gives the scaled similarity matrix ``[queries, documents_padded]`` an in-batch
contrastive loss trains on (padded documents at ``-1e9``, zero probability).

``weights_fingerprint(op)`` is the SHA-256 of an operation's meaning and its parameter
values: anything derived from the weights (an index, a calibration) records it and is
refused once the weights change (``StaleWeightsError``), because derived state silently
disagreeing with the model is a wrong answer, not a degraded one.

``EpisodicIndex`` holds document ids and their encoded vectors and answers exact
inner-product queries: one matrix product and ``argpartition`` (vectorized over a batch
of queries), the queries encoded through the encoder's compiled plan. ``save`` writes
one safetensors file atomically (vectors, the ids as UTF-8 bytes with offsets, and a
JSON header in the metadata); ``load`` validates every field before anything is used.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import nn
from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import maximum
from ..compiler.trace.expr import Expr
from ..errors import ArtifactError, ShapeError, StaleWeightsError
from ..files import Fields, TensorFile, atomic_write, check_header, parse_json
from ..files.tensorfile import DATA_DIGEST_PLACEHOLDER, write_tensors
from ..nn import init as initializers
from ..operations.base import Operation, row_bucket
from ..operations.layers import checked_seed, positive_int
from .features import FEATURES, pad_texts
from .scorer import MASKED_LOGIT

INDEX_FORMAT = "tensorcode.episodic_index"
#: version 2 added the SHA-256 of the data section (``sha256``); a version-1 file has
#: none and is refused (an index is derived state: rebuild it)
INDEX_VERSION = 2


def weights_fingerprint(op: Operation) -> str:
    """SHA-256 of ``op``'s fingerprint (what it means) and every parameter's bytes."""
    digest = hashlib.sha256(op.fingerprint().encode("ascii"))
    for payload in op.parameters.payloads():
        digest.update(np.ascontiguousarray(payload).reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


class _Built:
    def __init__(self, tape: Tape, buckets: int, dim: int, fresh: bool, seed: int) -> None:
        init = (initializers.normal(seed * 16 + 7, 1.0 / math.sqrt(dim)) if fresh
                else initializers.zeros())
        self.embedding = nn.Embedding(tape, buckets, dim, init=init, name="embedding")
        self.project = nn.Linear(tape, dim, dim, init=initializers.xavier(seed * 16 + 8)
                                 if fresh else initializers.zeros(), name="project")


class EpisodicEncoder(Operation):
    """Texts to unit vectors of ``dim`` numbers; ``encoder(texts)`` gives
    ``float32[len(texts), dim]``, ``encoder(queries, documents)`` the similarity logits
    ``scale * q . d`` as ``float32[len(queries), documents_padded]``."""

    qualified_name = "tensorcode.tools.EpisodicEncoder"
    accepts_tensors = False

    def __init__(self, dim: int = 32, buckets: int = 4096, scale: float = 10.0, seed: int = 0,
                 backend: str | None = None) -> None:
        self.dim, self.buckets = positive_int("dim", dim), positive_int("buckets", buckets)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or \
                not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a positive finite number, got {scale!r}")
        self.scale, self.seed = float(scale), checked_seed(seed)
        self._initialize(backend)

    def configuration(self) -> dict:
        return {"dim": self.dim, "buckets": self.buckets, "scale": self.scale,
                "features": FEATURES, "dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> _Built:
        return _Built(tape, self.buckets, self.dim, fresh, self.seed)

    @staticmethod
    def parameter_count(dim: int, buckets: int) -> int:
        """The parameter values an encoder of these sizes holds (the embedding table and
        the projection), computed without building it."""
        return buckets * dim + dim * dim + dim

    @staticmethod
    def _texts(value: Any, what: str) -> list[str]:
        if not isinstance(value, (list, tuple)) or not value or not all(
                isinstance(t, str) for t in value):
            raise TypeError(f"{what} are a nonempty list of texts")
        return list(value)

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        if len(args) == 1:
            texts = self._texts(args[0], "the texts to encode")
            return list(pad_texts(texts, self.buckets, row_bucket(len(texts))))
        if len(args) != 2:
            raise TypeError(f"EpisodicEncoder takes (texts) or (queries, documents), got "
                            f"{len(args)} arguments")
        queries = self._texts(args[0], "queries")
        documents = self._texts(args[1], "documents")
        slots = max(2, row_bucket(len(documents)))
        valid = np.zeros(slots, np.float32)
        valid[:len(documents)] = 1.0
        return [*pad_texts(queries, self.buckets), *pad_texts(documents, self.buckets, slots),
                valid]

    def _encode(self, built: _Built, ids: Expr, mask: Expr) -> Expr:
        rows = built.embedding(ids)
        pooled = (rows * mask.reshape(mask.shape + (1,))).sum(axis=-2) / maximum(
            mask.sum(axis=-1, keepdims=True), 1.0)
        v = built.project(pooled)
        return v / ((v * v).sum(axis=-1, keepdims=True) + 1e-6).sqrt()

    def express(self, built: _Built, inputs: Sequence[Expr]) -> Expr:
        if len(inputs) == 2:
            return self._encode(built, inputs[0], inputs[1])
        q_ids, q_mask, d_ids, d_mask, valid = inputs
        scores = (self._encode(built, q_ids, q_mask) @ self._encode(built, d_ids, d_mask).T
                  ) * self.scale
        return scores + (valid - 1.0) * (-MASKED_LOGIT)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``float32[len(texts), dim]`` unit vectors (one plan call, rows padded)."""
        texts = self._texts(texts, "the texts to encode")
        return self.apply([texts])[:len(texts)]


def _top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the positions and values of the ``k`` largest scores, best first."""
    n = scores.shape[1]
    if k < n:  # the k largest sit at the end (partitioning -scores would copy them all)
        part = np.argpartition(scores, n - k, axis=1)[:, n - k:]
    else:
        part = np.broadcast_to(np.arange(n), (scores.shape[0], n))
    picked = np.take_along_axis(scores, part, axis=1)
    order = np.argsort(-picked, axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(picked, order, axis=1)


class EpisodicIndex:
    """Exact inner-product search over encoded documents (see the module docstring).

    Built by ``Investigator.episodic_index(documents)`` (stamped with the encoder's
    weight fingerprint), ``EpisodicIndex.from_vectors(ids, vectors)`` (no encoder: vector
    queries only) or ``EpisodicIndex.load(path, encoder)``."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray,
                 encoder: EpisodicEncoder | None = None,
                 weights: str | None = None) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(ids) or vectors.shape[0] == 0:
            raise ShapeError(f"an index needs [documents, dim] vectors, one row per id; got "
                             f"{list(vectors.shape)} for {len(ids)} ids")
        if not np.all(np.isfinite(vectors)):
            raise ValueError("index vectors hold NaN or infinity")
        if any(not isinstance(i, str) for i in ids) or len(set(ids)) != len(ids):
            raise ValueError("index ids must be distinct texts")
        if encoder is not None and encoder.dim != vectors.shape[1]:
            raise ShapeError(f"the encoder gives {encoder.dim} numbers, the vectors "
                             f"{vectors.shape[1]}")
        self.ids = tuple(ids)
        self.vectors = vectors
        self.vectors.flags.writeable = False
        self.encoder = encoder
        #: the encoder weight fingerprint the vectors were made with (None: raw vectors)
        self.weights = weights

    @classmethod
    def from_vectors(cls, ids: Sequence[str], vectors: Any) -> EpisodicIndex:
        """An index of given vectors, searched with ``search_vectors`` only."""
        return cls(ids, np.asarray(vectors), None, None)

    @classmethod
    def build(cls, encoder: EpisodicEncoder, ids: Sequence[str], texts: Sequence[str],
              batch: int = 256) -> EpisodicIndex:
        """Encode ``texts`` with ``encoder`` (in batches) and stamp its fingerprint."""
        weights = weights_fingerprint(encoder)
        chunks = [encoder.encode(list(texts[a:a + batch])) for a in range(0, len(texts), batch)]
        return cls(ids, np.concatenate(chunks), encoder, weights)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return len(self.ids)

    def check_fresh(self) -> None:
        """``StaleWeightsError`` when the encoder's weights changed since the build."""
        if self.encoder is None:
            raise StaleWeightsError("this index has no encoder to encode text queries with; "
                                    "load it with EpisodicIndex.load(path, encoder) or use "
                                    "search_vectors")
        if weights_fingerprint(self.encoder) != self.weights:
            raise StaleWeightsError("the episodic encoder's weights changed since this index "
                                    "was built (stale fingerprint); rebuild it with "
                                    "model.episodic_index(documents)")

    def search(self, query: str | Sequence[str], k: int = 5
               ) -> tuple[list[str], np.ndarray] | list[tuple[list[str], np.ndarray]]:
        """The ``k`` best ``(ids, scores)`` for a text query (a list of texts: one pair
        per query). Refused when the index is stale."""
        self.check_fresh()
        assert self.encoder is not None
        single = isinstance(query, str)
        texts = [query] if isinstance(query, str) else list(query)
        found = self.search_vectors(self.encoder.encode(texts), k)
        return found[0] if single else found

    def search_vectors(self, queries: Any, k: int = 5) -> list[tuple[list[str], np.ndarray]]:
        """The ``k`` best ``(ids, scores)`` per row of ``queries`` ``[n, dim]``."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim == 1:
            q = q.reshape(1, -1)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ShapeError(f"queries must be [n, {self.dim}], got {list(q.shape)}")
        positions, scores = self.top_k(q, k)
        ids = self.ids
        return [([ids[p] for p in row], s) for row, s in zip(positions, scores)]

    def top_k(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions int64[n, k'], scores float32[n, k'])`` with ``k' = min(k, len)``:
        one matrix product, then a partial sort per row."""
        return _top_k(queries @ self.vectors.T, min(k, len(self.ids)))

    # -- files ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Write the index to one safetensors file, atomically, with the SHA-256 of its
        data section in the header (``load`` refuses a file whose bytes changed)."""
        encoded = [i.encode("utf-8") for i in self.ids]
        offsets = np.cumsum([0] + [len(e) for e in encoded]).astype(np.int64)
        header = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "count": len(self.ids),
                  "dim": self.dim, "weights": self.weights,
                  "encoder": None if self.encoder is None else self.encoder.fingerprint(),
                  "sha256": DATA_DIGEST_PLACEHOLDER}
        tensors = {"vectors": self.vectors,
                   "ids.utf8": np.frombuffer(b"".join(encoded) or b"\0", np.uint8),
                   "ids.offsets": offsets}
        metadata = {"index": json.dumps(header, sort_keys=True, allow_nan=False)}
        atomic_write(path, lambda handle: write_tensors(handle, tensors, metadata,
                                                        digest="data"))
        return pathlib.Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike, encoder: EpisodicEncoder | None = None
             ) -> EpisodicIndex:
        """An index from ``save``'s file, every field checked (``ArtifactError`` naming
        it). With ``encoder``, text queries are checked against the stamped fingerprint."""
        if not os.path.isfile(path):
            raise ArtifactError("no such file", path=path)
        source = TensorFile(path)
        metadata = source.metadata
        r = Fields(path)
        if set(metadata) != {"index"}:
            raise r.fail("metadata", f"names {sorted(metadata)}, expected ['index']")
        header = r.object(parse_json(metadata["index"], path), "index")
        check_header(header, INDEX_FORMAT, INDEX_VERSION, path, prefix="index",
                     older="an older index carries no checksum; rebuild the index "
                           "(model.episodic_index(documents)) and save it again")
        r.keys(header, "index", ("format", "version", "count", "dim", "weights", "encoder",
                                 "sha256"))
        count = r.integer(header["count"], "index.count", 1)
        dim = r.integer(header["dim"], "index.dim", 1)
        weights = None if header["weights"] is None else r.sha256(header["weights"],
                                                                  "index.weights")
        if header["encoder"] is not None:
            r.sha256(header["encoder"], "index.encoder")
        digest = r.sha256(header["sha256"], "index.sha256")
        entries = source.entries
        if set(entries) != {"vectors", "ids.utf8", "ids.offsets"}:
            raise r.fail("tensors", f"are {sorted(entries)}, expected ids.offsets, ids.utf8 "
                         "and vectors")
        if entries["vectors"] != ("float32", (count, dim)):
            dtype, shape = entries["vectors"]
            raise r.fail("vectors", f"are {dtype}{list(shape)}, expected "
                         f"float32[{count}, {dim}]")
        if entries["ids.utf8"][0] != "uint8" or len(entries["ids.utf8"][1]) != 1 or \
                entries["ids.offsets"] != ("int64", (count + 1,)):
            raise r.fail("ids", "must be uint8 bytes with int64 offsets, one per id plus one")
        tensors, actual = source.read(digest="data")
        if actual != digest:
            raise r.fail("index.sha256", "does not match the file's data (changed or "
                         "damaged); rebuild the index or restore the file")
        vectors, data, offsets = tensors["vectors"], tensors["ids.utf8"], tensors["ids.offsets"]
        if offsets[0] != 0 or np.any(np.diff(offsets) <= 0) or offsets[-1] > data.size:
            raise r.fail("ids.offsets", "must start at 0, increase and stay within the bytes")
        raw = data.tobytes()
        try:
            ids = [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets)]
        except UnicodeDecodeError:
            raise r.fail("ids.utf8", "is not UTF-8 text") from None
        if encoder is not None and header["encoder"] != encoder.fingerprint():
            raise r.fail("index.encoder", "was built by an encoder of another configuration")
        try:
            return cls(ids, vectors, encoder, weights)
        except (ValueError, ShapeError) as error:
            raise ArtifactError(str(error), path=path) from None


__all__ = ["EpisodicEncoder", "EpisodicIndex", "weights_fingerprint", "INDEX_FORMAT"]

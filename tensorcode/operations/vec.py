"""Owned vectors as records: ``Space``, ``Latent`` and ``CandidateSet``.

A ``Space`` names a vector space and its size; a ``Latent`` is one finite float32
vector in a space; a ``CandidateSet`` is a list of named vectors in a space (what a
planner or a retriever chooses among). All three are frozen records (``record_fields``,
``to_record()``, ``from_record(fields)``), so a trace can capture them and an
experience file can hold them, but only through an explicit allowlist:
``latent_codecs()`` allowlists ``Latent`` and ``Space`` only; a ``CandidateSet`` needs
its own entry (``{**latent_codecs(), "candidate-set": CandidateSet}``). A file that holds
a record not allowlisted is refused; the reader never constructs a class the file names.

A ``Latent`` converts to its array (``np.asarray(latent)``), so dense operations such as
``Linear`` take it directly; the trace records the ``Latent`` itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import ShapeError

_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


def _frozen_vectors(values: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    try:
        array = np.array(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be numbers") from None
    if array.shape != shape:
        raise ShapeError(f"{what} must have shape {list(shape)}, got {list(array.shape)}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} holds NaN or infinity")
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class Space:
    """A named vector space of ``dim`` dimensions."""

    name: str
    dim: int
    record_fields: ClassVar[tuple[str, ...]] = ("name", "dim")

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"a space name is 1-128 letters, digits or _.:-, got "
                             f"{self.name!r}")
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim <= 0:
            raise ValueError(f"a space's dim is a positive int, got {self.dim!r}")

    def to_record(self) -> dict[str, Any]:
        return {"name": self.name, "dim": self.dim}

    @classmethod
    def from_record(cls, fields: dict[str, Any]) -> Space:
        return cls(fields["name"], fields["dim"])

    def latent(self, values: Any) -> Latent:
        """A ``Latent`` in this space."""
        return Latent(self, values)


@dataclass(frozen=True, eq=False)
class Latent:
    """One finite float32 vector in a ``Space`` (read-only)."""

    space: Space
    values: np.ndarray
    record_fields: ClassVar[tuple[str, ...]] = ("space", "values")

    def __post_init__(self) -> None:
        if not isinstance(self.space, Space):
            raise TypeError(f"a Latent's space is a Space, got {type(self.space).__name__}")
        object.__setattr__(self, "values", _frozen_vectors(
            self.values, (self.space.dim,), f"a Latent in {self.space.name!r}"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.values if dtype is None else self.values.astype(dtype)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Latent) and other.space == self.space
                and bool(np.array_equal(other.values, self.values)))

    def __hash__(self) -> int:
        return hash((self.space, self.values.tobytes()))

    def to_record(self) -> dict[str, Any]:
        return {"space": self.space, "values": self.values}

    @classmethod
    def from_record(cls, fields: dict[str, Any]) -> Latent:
        return cls(fields["space"], fields["values"])


@dataclass(frozen=True, eq=False)
class CandidateSet:
    """Named candidate vectors in a ``Space``: ``ids[k]`` names ``vectors[k]``."""

    space: Space
    ids: tuple[str, ...]
    vectors: np.ndarray
    record_fields: ClassVar[tuple[str, ...]] = ("space", "ids", "vectors")

    def __post_init__(self) -> None:
        if not isinstance(self.space, Space):
            raise TypeError(f"a CandidateSet's space is a Space, got "
                            f"{type(self.space).__name__}")
        ids = tuple(self.ids)
        if not ids or not all(isinstance(i, str) and i for i in ids) or len(set(ids)) != len(ids):
            raise ValueError(f"candidate ids are distinct nonempty texts, got {list(ids)}")
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "vectors", _frozen_vectors(
            self.vectors, (len(ids), self.space.dim), "candidate vectors"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.vectors if dtype is None else self.vectors.astype(dtype)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CandidateSet) and other.space == self.space
                and other.ids == self.ids and bool(np.array_equal(other.vectors, self.vectors)))

    def __hash__(self) -> int:
        return hash((self.space, self.ids, self.vectors.tobytes()))

    def to_record(self) -> dict[str, Any]:
        return {"space": self.space, "ids": self.ids, "vectors": self.vectors}

    @classmethod
    def from_record(cls, fields: dict[str, Any]) -> CandidateSet:
        return cls(fields["space"], fields["ids"], fields["vectors"])


def latent_codecs() -> dict[str, type]:
    """The allowlist for ``Latent`` and ``Space`` records (and nothing else)."""
    return {"latent": Latent, "space": Space}


__all__ = ["Space", "Latent", "CandidateSet", "latent_codecs"]

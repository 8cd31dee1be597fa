"""The one source of randomness: a seeded generator whose state is plain data.

Initializers, dropout masks and sampling all draw from a ``Generator`` so a run is
reproducible from its seed, and a checkpoint can store ``get_state()`` as JSON and
resume drawing the same numbers with ``set_state()``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArtifactError

_ALGORITHM = "PCG64"


class Generator:
    """A PCG64 stream seeded by an integer; ``get_state``/``set_state`` are JSON-safe."""

    def __init__(self, seed: int = 0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.seed = int(seed)
        self._bits = np.random.PCG64(self.seed)
        self._rng = np.random.Generator(self._bits)

    # -- draws --------------------------------------------------------------------------
    def uniform(self, low: float, high: float, shape: Sequence[int] = (),
                dtype: Any = "float32") -> np.ndarray:
        """Draws from ``[low, high)`` as ``dtype``."""
        return self._rng.uniform(low, high, size=tuple(shape)).astype(dtype)

    def normal(self, mean: float, std: float, shape: Sequence[int] = (),
               dtype: Any = "float32") -> np.ndarray:
        """Normal draws as ``dtype``."""
        return self._rng.normal(mean, std, size=tuple(shape)).astype(dtype)

    def integers(self, low: int, high: int, shape: Sequence[int] = ()) -> np.ndarray:
        """int64 draws from ``[low, high)``."""
        return self._rng.integers(low, high, size=tuple(shape), dtype=np.int64)

    def bernoulli(self, p: float, shape: Sequence[int] = (), dtype: Any = "float32"
                  ) -> np.ndarray:
        """1 with probability ``p``, else 0, as ``dtype`` (dropout masks)."""
        return (self._rng.random(size=tuple(shape)) < p).astype(dtype)

    def permutation(self, n: int) -> np.ndarray:
        """A shuffled ``arange(n)`` (minibatch order)."""
        return self._rng.permutation(n)

    def choice(self, n: int, size: int, replace: bool = True,
               p: Sequence[float] | None = None) -> np.ndarray:
        """``size`` draws from ``range(n)``, optionally weighted by ``p``."""
        return self._rng.choice(n, size=size, replace=replace, p=p)

    # -- state --------------------------------------------------------------------------
    def get_state(self) -> dict:
        """The full stream state as plain JSON-safe data."""
        state = self._bits.state
        return {"algorithm": _ALGORITHM, "seed": self.seed,
                "state": int(state["state"]["state"]), "inc": int(state["state"]["inc"]),
                "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}

    def set_state(self, state: dict) -> None:
        """Resume from ``get_state()`` data (validated; a bad state changes nothing)."""
        expected = {"algorithm", "seed", "state", "inc", "has_uint32", "uinteger"}
        if not isinstance(state, dict) or set(state) != expected:
            raise ArtifactError(f"a generator state needs exactly the keys {sorted(expected)}",
                                field="generator")
        if state["algorithm"] != _ALGORITHM:
            raise ArtifactError(f"unknown generator algorithm {state['algorithm']!r}",
                                field="generator.algorithm")
        for key in expected - {"algorithm"}:
            if isinstance(state[key], bool) or not isinstance(state[key], int) or state[key] < 0:
                raise ArtifactError(f"{key} must be a non-negative int", field=f"generator.{key}")
        bits = np.random.PCG64(0)
        bits.state = {"bit_generator": _ALGORITHM,
                      "state": {"state": state["state"], "inc": state["inc"]},
                      "has_uint32": state["has_uint32"], "uinteger": state["uinteger"]}
        self.seed = state["seed"]
        self._bits = bits
        self._rng = np.random.Generator(bits)

    def clone(self) -> Generator:
        """An independent generator at the same point of the stream."""
        return copy.deepcopy(self)


__all__ = ["Generator"]

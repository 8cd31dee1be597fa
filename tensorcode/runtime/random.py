"""The one source of randomness: a seeded generator whose state is plain data.

Initializers, dropout masks and sampling all draw from a ``Generator`` so a run is
reproducible from its seed, and a checkpoint can store ``get_state()`` as JSON and
resume drawing the same numbers with ``set_state()``.

A generator holds two streams. Host draws (initializers, minibatch order) come from
NumPy's PCG64. Draws inside plans (dropout masks, ``random_uniform``, sampling) come
from a Philox-4x32-10 key and a 64-bit block counter (``compiler/core/philox.py``): a plan
takes ``key_state()`` as an input and the generator ``advance``s past the blocks the
plan used, so a plan stays a pure function of its inputs. ``get_state()`` writes every
integer wider than 53 bits as a ``"0x..."`` hex string, so a JavaScript reader restores
it exactly; ``set_state()`` also reads the older form (plain integers, no Philox part,
which resumes with the counter at 0).

``tc.random`` also re-exports the recording functions of ``compiler/trace/draws.py``
(``random_uniform``, ``random_normal``, ``bernoulli``, ``categorical``, ``dropout``) and
offers ``sample`` for language models.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..compiler.plans.tape import Tape
from ..compiler.trace.draws import (
    bernoulli,
    categorical,
    check_sampling,
    dropout,
    random_normal,
    random_uniform,
)
from ..compiler.trace.expr import Expr
from ..errors import ArtifactError, RandomError
from ..files.strict_json import read_safe_int

_ALGORITHM = "PCG64"
_SAFE = 2 ** 53  # integers up to this are exact in every JSON reader (IEEE doubles)
_U64 = 2 ** 64


def _hex(value: int) -> str:
    return f"0x{value:x}"


def _read_int(state: dict, key: str, field: str, limit: int | None = None) -> int:
    """A non-negative int written as a number or a ``"0x..."`` string (``ArtifactError``
    naming ``field`` otherwise)."""
    value = read_safe_int(state[key])
    if value is None or value < 0:
        raise ArtifactError(f"{key} must be a non-negative int or a lowercase \"0x...\" "
                            f"hex string, got {state[key]!r:.80}", field=field)
    if limit is not None and value >= limit:
        raise ArtifactError(f"{key} must be below {limit:#x}, got {value:#x}", field=field)
    return value


def _philox_key(seed: int) -> int:
    """The 64-bit Philox key of a seed (two words of NumPy's ``SeedSequence(seed)``)."""
    words = np.random.SeedSequence(seed).generate_state(2, np.uint32)
    return int(words[0]) | (int(words[1]) << 32)


class Generator:
    """A PCG64 stream seeded by an integer; ``get_state``/``set_state`` are JSON-safe."""

    def __init__(self, seed: int = 0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.seed = int(seed)
        self._bits = np.random.PCG64(self.seed)
        self._rng = np.random.Generator(self._bits)
        self._key = _philox_key(self.seed)
        self._counter = 0

    # -- the Philox stream of plans ---------------------------------------------------
    def key_state(self) -> np.ndarray:
        """What a plan's ``tape.random_key()`` input takes: int64 ``[k0, k1,
        counter_lo, counter_hi]`` (32-bit halves of the key and the block counter)."""
        key, counter = self._key, self._counter
        return np.array([key & 0xFFFFFFFF, key >> 32, counter & 0xFFFFFFFF, counter >> 32],
                        dtype=np.int64)

    def key_states(self, cases: int, blocks: int) -> np.ndarray:
        """``[cases, 4]``: the key states of ``cases`` calls each using ``blocks`` blocks
        in turn (what ``forward_batch`` feeds, so a batch draws as consecutive calls)."""
        rows = np.empty((cases, 4), np.int64)
        for c in range(cases):
            counter = (self._counter + c * blocks) % _U64
            rows[c] = (self._key & 0xFFFFFFFF, self._key >> 32, counter & 0xFFFFFFFF,
                       counter >> 32)
        return rows

    def advance(self, blocks: int) -> None:
        """Move the Philox counter past ``blocks`` blocks (modulo ``2**64``)."""
        if isinstance(blocks, bool) or not isinstance(blocks, (int, np.integer)) or blocks < 0:
            raise ValueError(f"blocks must be a non-negative int, got {blocks!r}")
        self._counter = (self._counter + int(blocks)) % _U64

    @property
    def counter(self) -> int:
        """The Philox block counter: how far plans have drawn from this generator."""
        return self._counter

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
        """The full state as JSON-safe data: PCG64's 128-bit ``state`` and ``inc`` and
        the ``philox`` key and counter as ``"0x..."`` hex strings, the seed as a number
        when it fits 53 bits (a hex string otherwise)."""
        state = self._bits.state
        return {"algorithm": _ALGORITHM,
                "seed": self.seed if self.seed <= _SAFE else _hex(self.seed),
                "state": _hex(int(state["state"]["state"])),
                "inc": _hex(int(state["state"]["inc"])),
                "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"]),
                "philox": {"key": _hex(self._key), "counter": _hex(self._counter)}}

    def set_state(self, state: dict) -> None:
        """Resume from ``get_state()`` data, or from the older form with plain integers
        and no ``philox`` entry (its counter starts at 0). Validated: a bad state raises
        ``ArtifactError`` naming the field and changes nothing."""
        expected = {"algorithm", "seed", "state", "inc", "has_uint32", "uinteger"}
        if not isinstance(state, dict) or set(state) not in (expected, expected | {"philox"}):
            raise ArtifactError(f"a generator state needs exactly the keys {sorted(expected)} "
                                "and optionally 'philox'", field="generator")
        if state["algorithm"] != _ALGORITHM:
            raise ArtifactError(f"unknown generator algorithm {state['algorithm']!r}",
                                field="generator.algorithm")
        values = {key: _read_int(state, key, f"generator.{key}",
                                 2 ** 128 if key in ("state", "inc") else None)
                  for key in sorted(expected - {"algorithm"})}
        key = _philox_key(values["seed"])
        counter = 0
        if "philox" in state:
            philox = state["philox"]
            if not isinstance(philox, dict) or set(philox) != {"key", "counter"}:
                raise ArtifactError("philox must be {key, counter}", field="generator.philox")
            key = _read_int(philox, "key", "generator.philox.key", _U64)
            counter = _read_int(philox, "counter", "generator.philox.counter", _U64)
        bits = np.random.PCG64(0)
        try:
            bits.state = {"bit_generator": _ALGORITHM,
                          "state": {"state": values["state"], "inc": values["inc"]},
                          "has_uint32": values["has_uint32"], "uinteger": values["uinteger"]}
        except (ValueError, TypeError, OverflowError) as error:
            raise ArtifactError(f"PCG64 refused the state: {error}",
                                field="generator.state") from None
        self.seed = values["seed"]
        self._bits = bits
        self._rng = np.random.Generator(bits)
        self._key = key
        self._counter = counter

    def clone(self) -> Generator:
        """An independent generator at the same point of the stream."""
        return copy.deepcopy(self)


_SAMPLERS: dict[tuple, Any] = {}
_SAMPLERS_LOCK = threading.Lock()


def sample(logits: Any, generator: Any = None, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None) -> Any:
    """One token index per row of ``logits`` (last axis: the vocabulary), drawn from
    ``softmax(logits / temperature)`` kept to the ``top_k`` most likely tokens and to
    the smallest set of them whose probability reaches ``top_p``.

    Recording (``logits`` an ``Expr``): records the ``categorical`` primitive into the
    plan; ``generator`` is the recording's key (``tape.random_key()``, the default).
    Eager (``logits`` an array): runs a compiled plan (one per shape, dtype and options,
    kept for the process) with ``generator`` (a ``Generator``, required) and advances
    it; returns int64 indices of shape ``logits.shape[:-1]``. The same generator state
    draws the same tokens on every backend, thread and run. Out-of-range options raise
    ``RandomError`` naming them."""
    t, k, p = check_sampling(temperature, top_k, top_p)
    if isinstance(logits, Expr):
        key = generator if generator is not None else _record_key(logits)
        return categorical(key, logits, t, k or None, p)
    if not isinstance(generator, Generator):
        raise RandomError("sample(logits_array, generator): eager sampling needs a "
                          f"tc.random.Generator, got {type(generator).__name__}")
    array = np.ascontiguousarray(logits)
    if array.dtype not in (np.float32, np.float64) or array.ndim == 0 or array.shape[-1] == 0:
        raise RandomError(f"sample: logits must be a float32 or float64 array with a "
                          f"non-empty last axis, got {array.dtype}{list(array.shape)}")
    if not np.all(np.isfinite(array) | (array == -np.inf)):
        raise RandomError("sample: logits must be finite (or -inf for masked tokens)")
    signature = (array.shape, array.dtype.name, t, k, p)
    with _SAMPLERS_LOCK:
        entry = _SAMPLERS.get(signature)
        if entry is None:
            tape = Tape()
            x = tape.input(np.zeros(array.shape, array.dtype), name="logits")
            drawn = categorical(tape.random_key(), x, t, k or None, p)
            network = tape.into_network()
            entry = (network.entry([drawn]).lower(), network.parameters(), x, drawn)
            _SAMPLERS[signature] = entry
    plan, table, x, drawn = entry
    return np.array(plan.forward(table, {x: array}, generator=generator).of(drawn))


def _record_key(logits: Expr) -> Expr:
    builder = logits.builder
    if not isinstance(builder, Tape):
        raise RandomError("sample: logits recorded on no tape")
    return builder.random_key()


__all__ = ["Generator", "sample", "random_uniform", "random_normal", "bernoulli",
           "categorical", "dropout"]

"""A batch body read straight into float64 arrays, without a Python object per number.

The batch endpoint's goal (a million cases a second) leaves under a microsecond per
case for everything, and any JSON library that returns Python objects spends more than
that building a list and a float per number before NumPy copies them out. This reader
walks the bytes once in compiled code (Numba) and writes the numbers into the batch's
array as it goes. It takes only the common, canonical shape of a batch and gives up
(``None``) on anything else, which then goes to ``distill.inputs.read_batch`` (orjson
where its result is provably the strict reader's, else the strict reader, which words
every refusal). It never refuses anything itself, so the rules and messages stay those of
the one shared validator, and it takes a body only when that validator would have
returned exactly the same arrays:

- a JSON array (whitespace as JSON allows it) of one or more objects, each holding
  exactly the contract's names once each, in any order (a repeated or unknown name, or
  a missing one, gives up);
- every name written without an escape (a backslash anywhere in a name gives up) and
  every value a number, or nested arrays of exactly the declared lengths (a string,
  ``true``/``false``/``null``, an object or a ragged list gives up);
- every number in JSON's grammar (``-``, no leading zero, digits, an optional fraction
  and exponent) whose value the reader can compute exactly as the correctly rounded
  float64 Python would: at most 19 significant digits forming an integer ``m`` of at
  most 2**53 and a decimal exponent ``e`` with ``|e| <= 22``, where ``m * 10**e`` (or
  ``m / 10**-e``) is one IEEE operation on two exact doubles, hence correctly rounded
  (Clinger's fast path). Any other number (more digits, a larger exponent, an integer
  past 2**53) gives up; ``-0`` written as an integer is ``0.0``, as Python reads it;
- at most ``max_cases`` cases and nesting within the strict reader's depth.

The body's size was checked by the caller. The scan (``serve.batch_scan``) is compiled by
the numba backend and kept in the plan cache like a plan, on a process's first batch
read: that read waits for the scan to load from the cache (about a second, Numba's
import included) or, on an empty cache, to compile (seconds); the service waits for
``load`` in a worker thread, so other requests are answered meanwhile.
"""

from __future__ import annotations

import inspect
import math
import threading
from typing import Any

import numpy as np

from ..compiler.backends import NUMBA, get
from ..distill.inputs import MAX_DEPTH
from . import batch_scan

#: the exact float64 powers of ten that Clinger's fast path multiplies or divides by
_POWERS = np.array([10.0 ** k for k in range(23)], dtype=np.float64)

_LOCK = threading.Lock()
_SCAN: Any = None
_READONLY_BYTES = "types.Array(types.uint8, 1, 'C', readonly=True)"
_INT64S = "types.Array(types.int64, 1, 'C', readonly=False)"
#: scan(text, names, name_starts, offsets, dims, dim_starts, out, width, powers, remaining)
_SIGNATURE = (f"({_READONLY_BYTES}, types.Array(types.uint8, 1, 'C', readonly=False), "
              f"{_INT64S}, {_INT64S}, {_INT64S}, {_INT64S}, "
              "types.Array(types.float64, 1, 'C', readonly=False), types.int64, "
              f"types.Array(types.float64, 1, 'C', readonly=False), {_INT64S},)")


def loaded() -> bool:
    """Whether this process has the compiled scan (``load`` has run)."""
    return _SCAN is not None


def load() -> None:
    """Load the compiled scan from the plan cache, or compile it there (once per process
    and cache; concurrent callers wait for the first). The service calls this in a
    worker thread, so requests go on being answered meanwhile."""
    _scan()


def _scan() -> Any:
    """The compiled scan: loaded from the plan cache, or compiled (once per process and
    cache; the first caller waits for it) by the numba backend."""
    global _SCAN
    if _SCAN is None:
        with _LOCK:
            if _SCAN is None:
                source = inspect.getsource(batch_scan)
                compiled = get(NUMBA).functions(  # type: ignore[attr-defined]
                    source, {"skip": None, "number": None, "scan": _SIGNATURE})
                _SCAN = compiled["scan"]
    return _SCAN


class BatchReader:
    """``read(body, max_cases)``: ``{name: float64 array [N, *shape]}`` for a body of the
    canonical shape (see the module's docstring), else ``None``."""

    def __init__(self, contract: dict[str, tuple[int, ...]]) -> None:
        self.contract = dict(contract)
        encoded = [name.encode("utf-8") for name in contract]
        self._names = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        self._name_starts = np.cumsum([0] + [len(e) for e in encoded]).astype(np.int64)
        sizes = [math.prod(shape) for shape in contract.values()]
        self._offsets = np.cumsum([0] + sizes[:-1]).astype(np.int64)
        self._sizes = sizes
        self._width = sum(sizes)
        self._dims = np.array([d for shape in contract.values() for d in shape],
                              dtype=np.int64)
        self._dim_starts = np.cumsum([0] + [len(s) for s in contract.values()]).astype(
            np.int64)
        # the fewest bytes one case can take: braces, and per member its quoted name,
        # a colon and its numbers (one digit each) with their commas and brackets
        self._least_case_bytes = 2 + sum(
            len(e) + 3 + (2 * size - 1 if size else 0) + 2 * len(shape)
            for e, size, shape in zip(encoded, sizes, contract.values())) + len(contract) - 1

    @staticmethod
    def takes(contract: dict[str, tuple[int, ...]]) -> bool:
        """Whether a contract's bodies can take this reader: names that JSON writes
        without escapes and shapes without a zero length, within the nesting limit."""
        if not contract or len(contract) > 64:
            return False
        for name, shape in contract.items():
            if any(ord(ch) < 32 or ch in '"\\' for ch in name):
                return False
            if 0 in shape or len(shape) + 2 > MAX_DEPTH:
                return False
        return True

    def read(self, body: bytes, max_cases: int | None) -> dict[str, np.ndarray] | None:
        if type(body) is not bytes:
            return None
        rows = len(body) // self._least_case_bytes + 1
        if max_cases is not None:
            rows = min(rows, max_cases)
        if rows <= 0:
            return None
        out = np.empty((rows, self._width), dtype=np.float64)
        text = np.frombuffer(body, dtype=np.uint8)
        count = (_SCAN or _scan())(text, self._names, self._name_starts, self._offsets,
                           self._dims, self._dim_starts, out.reshape(-1), self._width,
                           _POWERS, np.empty(MAX_DEPTH, dtype=np.int64))
        if count <= 0:
            return None
        if len(self.contract) == 1:
            ((name, shape),) = self.contract.items()
            return {name: out[:count].reshape(count, *shape)}
        stacked = {}
        for (name, shape), offset, size in zip(self.contract.items(), self._offsets,
                                               self._sizes):
            stacked[name] = np.ascontiguousarray(
                out[:count, offset:offset + size]).reshape(count, *shape)
        return stacked


__all__ = ["BatchReader"]

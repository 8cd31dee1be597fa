"""The mutation fuzzer the loader harness (``test_fuzz_loaders.py``) runs: seeded
mutations of small valid artifacts, each outcome classified as valid, documented (a
``TensorCodeError``) or other, under a per-case deadline.

Mutations are cheap and aimed at structure: most rewrite one value of a JSON document
(a ``.json`` file, a safetensors header, or a JSON string inside one, such as a
checkpoint's manifest in the header's metadata) with a value of another type or an
extreme size; the rest flip, overwrite, insert, delete or truncate bytes anywhere.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorcode.errors import TensorCodeError

REF = "reference"
#: cases per surface (at least 1,000; ``FUZZ_CASES`` raises it for a longer hunt)
CASES = max(1000, int(os.environ.get("FUZZ_CASES", "1000")))


#: values a structured mutation writes in place of a JSON value
ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2, 3, 7, 2 ** 31, 2 ** 63, 2 ** 64, 10 ** 30, 4e9, 8e9, 1e308,
    -1e308, 0.5, -0.0, "", "x", "F32", "float32", "int64", "I64", "BOOL", "sum", "\u0663",
    "a" * 300, [], [0], [1, 2], [[1]], [-1], [2 ** 40, 2 ** 40], ["x"], {}, {"a": 1},
    {"dtype": "F32"}, [None], [0.5, "x"],
]


class Deadline(BaseException):
    """A case ran past its deadline (a hang, not a slow machine: the limit is generous)."""


@dataclass
class Tally:
    """Counts of one surface, and the first few cases of each bad kind."""

    name: str
    cases: int = 0
    valid: int = 0
    documented: int = 0
    other: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)
    #: the slowest cases, ``(seconds, case)``, for the report
    timings: list[tuple[float, int]] = field(default_factory=list)
    #: how many documented outcomes each error class gave
    kinds: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items(),
                                                         key=lambda item: -item[1]))
        return (f"{self.name}: {self.cases} cases, {self.documented} documented "
                f"({kinds}), {self.valid} valid, {len(self.other)} other, "
                f"{len(self.slow)} over the deadline")


def _pick_path(node: Any, rng: random.Random) -> list[Any]:
    """A random path (keys and indexes) from ``node`` to one of its values."""
    path: list[Any] = []
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append(key)
        node = node[key]
    return path


def _mutate_json_value(document: Any, rng: random.Random, depth: int = 0) -> Any:
    """``document`` with one value replaced, a key removed or added, or a JSON string
    inside it mutated the same way."""
    path = _pick_path(document, rng)
    parent, target = None, document
    for key in path:
        parent, target = target, target[key]
    if isinstance(target, str) and depth < 2 and target[:1] in "{[":
        try:
            inner = json.loads(target)
        except ValueError:
            inner = None
        if inner is not None:
            replacement: Any = json.dumps(_mutate_json_value(inner, rng, depth + 1))
            return _replace(document, path, replacement)
    roll = rng.random()
    if roll < 0.12 and isinstance(parent, dict) and path:
        del parent[path[-1]]
        return document
    if roll < 0.2 and isinstance(target, dict):
        target[rng.choice(["extra", "dtype", "shape", "keepdims", "axis", "__metadata__"])] = \
            rng.choice(ODD_VALUES)
        return document
    if roll < 0.3 and isinstance(target, (int, float)) and not isinstance(target, bool):
        value = rng.choice([target + 1, target - 1, -target, target * 2, target * 10 ** 6,
                            float(target) if isinstance(target, int) else int(target)])
        return _replace(document, path, value)
    if roll < 0.36 and isinstance(target, list) and target:
        return _replace(document, path, target[:-1] if rng.random() < 0.5 else target * 2)
    if roll < 0.4:
        return _replace(document, path, [target])
    return _replace(document, path, rng.choice(ODD_VALUES))


def _replace(document: Any, path: list[Any], value: Any) -> Any:
    if not path:
        return value
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return document


def _mutate_bytes(data: bytes, rng: random.Random, low: int = 0) -> bytes:
    """One byte-level mutation at or after ``low``."""
    raw = bytearray(data)
    if not raw:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    at = rng.randrange(min(low, len(raw) - 1), len(raw))
    roll = rng.random()
    if roll < 0.35:
        raw[at] ^= 1 << rng.randrange(8)
    elif roll < 0.55:
        raw[at] = rng.choice([0, 0xFF, ord("9"), ord("-"), ord('"'), ord("["), ord("{"),
                              rng.randrange(256)])
    elif roll < 0.7:
        del raw[at:at + rng.randrange(1, 9)]
    elif roll < 0.8:
        raw[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
    elif roll < 0.9:
        del raw[at:]
    else:
        span = raw[at:at + rng.randrange(1, 64)]
        raw[at:at] = span
    return bytes(raw)


def mutate_json(data: bytes, rng: random.Random) -> bytes:
    """A mutated JSON file: mostly one structured change, sometimes bytes."""
    if rng.random() < 0.75:
        try:
            document = json.loads(data)
        except ValueError:
            return _mutate_bytes(data, rng)
        return json.dumps(_mutate_json_value(document, rng)).encode()
    return _mutate_bytes(data, rng)


def mutate_safetensors(data: bytes, rng: random.Random) -> bytes:
    """A mutated safetensors file: mostly its header (structured, then written back with
    its new length), sometimes the 8-byte length, the header bytes or the data."""
    if len(data) < 8:
        return _mutate_bytes(data, rng)
    (length,) = struct.unpack("<Q", data[:8])
    header, body = data[8:8 + length], data[8 + length:]
    roll = rng.random()
    if roll < 0.6:
        try:
            document = json.loads(header)
        except ValueError:
            return _mutate_bytes(data, rng)
        text = json.dumps(_mutate_json_value(document, rng)).encode()
        if rng.random() < 0.8:
            text += b" " * (-(8 + len(text)) % 8)
        return struct.pack("<Q", len(text)) + text + body
    if roll < 0.68:
        value = rng.choice([0, 1, 7, length - 1, length + 1, length + 8, 2 ** 63, 2 ** 64 - 1,
                            len(data), 10 ** 8])
        return struct.pack("<Q", value) + data[8:]
    if roll < 0.85:
        return data[:8] + _mutate_bytes(header, rng) + body
    return _mutate_bytes(data, rng, low=8 + length)


def mutate_text(data: bytes, rng: random.Random) -> bytes:
    """A mutated text (a program or edit statements): bytes, or a token spliced in."""
    if rng.random() < 0.5:
        return _mutate_bytes(data, rng)
    text = data.decode("utf-8", "replace")
    at = rng.randrange(len(text) + 1)
    token = rng.choice(["0", "-1", "1e308", "2**64", "10**30", "\u0663", ":", ",", "(", ")",
                        "[", "]", "\n", "    ", "axis=5", "keepdims=1", "[::-1]", "x",
                        "inf", "nan", "1e-300", "+=", "*=", "=", " # ", "9" * 40, "\x00"])
    return (text[:at] + token + text[at + rng.randrange(3):]).encode("utf-8", "replace")


def _alarm(signum: int, frame: Any) -> None:
    raise Deadline()


def run_cases(name: str, cases: int, seed: int, mutate: Callable[[random.Random], Any],
              attempt: Callable[[Any], Any], deadline_s: float = 10.0) -> Tally:
    """``cases`` seeded cases: ``attempt(mutate(rng))`` under a deadline; every outcome
    is tallied (the caller asserts on the tally)."""
    tally = Tally(name)
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in range(cases):
            rng = random.Random(f"{seed}:{case}")
            mutated = mutate(rng)
            started = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, deadline_s)
            try:
                attempt(mutated)
                tally.valid += 1
            except TensorCodeError as error:
                tally.documented += 1
                kind = type(error).__name__
                tally.kinds[kind] = tally.kinds.get(kind, 0) + 1
            except Deadline:
                tally.slow.append(f"case {case}: over {deadline_s} s")
            except Exception as error:
                where = traceback.extract_tb(error.__traceback__)[-1]
                tally.other.append(f"case {case}: {type(error).__name__}: {error!s:.200} "
                                   f"({where.filename}:{where.lineno})")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                tally.timings.append((time.perf_counter() - started, case))
            tally.cases += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    return tally


def check(tally: Tally, record_property: Callable[[str, Any], None]) -> None:
    """Record the counts (printed in the run's summary) and fail on any bad outcome."""
    record_property("fuzz counts", tally.line())
    assert not tally.other, "\n".join([tally.line(), *tally.other[:10]])
    assert not tally.slow, "\n".join([tally.line(), *tally.slow[:10]])
    assert tally.cases >= CASES


# -- the small valid artifacts the surfaces start from ---------------------------------
PROGRAM = """\
def route(features, w, threshold):
    m = features.reshape(2, 3)
    rows = m.sum(axis=1, keepdims=True)
    s = (m / (rows + 1.0)).mean(0)
    best = s.max()
    total = 0.0
    for i in range(3):
        total += s.slice(i, i + 1).reshape() * w.slice(i, i + 1).reshape()
    route = where(total >= threshold, 1.0, 0.0)
    covered = where(best > 0.0, 1.0, 0.0)
    return {"route": route, "covered": covered}
"""
INPUTS = {"features": (6,)}
OUTPUTS = {"route": (), "covered": ()}
PARAMETERS = {"w": [0.5, -1.0, 2.0], "threshold": 0.25}
FEATURES = {"features": np.linspace(-1.0, 1.5, 6)}


def weights_base() -> dict[str, np.ndarray]:
    """Tensors of every kind a patch or an edit handles."""
    rng = np.random.default_rng(0)
    return {"w": rng.normal(size=(3, 4)).astype(np.float32), "b": np.zeros(4),
            "w2": rng.normal(size=(2, 5)),
            "h": np.zeros(3, np.float16), "i": np.arange(3, dtype=np.int64),
            "m": np.array([True, False])}

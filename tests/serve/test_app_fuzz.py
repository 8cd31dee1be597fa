"""The three router endpoints under a seeded HTTP fuzzer, in process (Starlette's test
client over the ASGI app): bodies mutated at the JSON level (extreme, non-finite and
mistyped numbers, missing, repeated and extra keys, nesting) and at the byte level, for
the single endpoint, the JSON batch and the safetensors batch. Every answer is a 200
with JSON answers or a 4xx with the one error body and a documented ``kind``; no
request is ever a 5xx. The counts are printed under "fuzz counts" in the run's summary."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from safetensors.numpy import save
from starlette.testclient import TestClient

from tensorcode.serve import create_app
from tensorcode.serve.binary import MEDIA_TYPE

#: cases per endpoint (three endpoints)
CASES = 1500
#: the refusal kinds the serving page documents for a router request
DOCUMENTED = {"json", "safetensors", "not_object", "too_large", "too_many", "missing",
              "unexpected", "type", "shape", "not_finite"}
MAX_BODY_BYTES = 64 << 10
MAX_BATCH = 40
WIDTH = 12

#: numbers as JSON text: ordinary, extreme, past float64, and not numbers at all
NUMBERS = ["0", "1", "-1", "0.5", "1e-320", "1e308", "-1e308", "1e309", "-1e309", "1e400",
           "-1e400", "1" + "0" * 400, "-" + "9" * 320, "2e-400", "9007199254740993",
           "123456789012345678901234567890", "1.7976931348623157e308", "-0", "0e0",
           "NaN", "Infinity", "-Infinity", "true", "false", "null", '"1"', "[]", "{}",
           "[1]", "[[1, 2]]", '"\\ud800"']

#: keys beside (or instead of) the contract's, as JSON text
EXTRA_KEYS = ['"extra"', '"Features"', '""', '"\\u0000"', '"f\\"x"', '"\\ud800"']


def _case(rng: random.Random) -> str:
    """One case object as JSON text, usually close to valid."""
    values = [str(rng.choice([0, 1, 0.25])) for _ in range(
        rng.choice([WIDTH] * 16 + [0, 1, 11, 13]))]
    if values and rng.random() < 0.3:  # one or two odd numbers
        for _ in range(rng.randint(1, 2)):
            values[rng.randrange(len(values))] = rng.choice(NUMBERS)
    array = "[" + ", ".join(values) + "]"
    if rng.random() < 0.05:
        array = "[" * rng.randint(2, 80) + "0" + "]" * rng.randint(0, 80)
    members = [f'"features": {array}']
    roll = rng.random()
    if roll < 0.05:
        members = []
    elif roll < 0.10:
        members.append(f'"features": {array}')  # a repeated key
    elif roll < 0.15:
        members.append(rng.choice(EXTRA_KEYS) + ": 1")
    elif roll < 0.18:
        members = [f'"feature": {array}']
    return "{" + ", ".join(members) + "}"


def _plain(rng: random.Random) -> str:
    """A valid case (the program claims some, escalates others)."""
    return json.dumps({"features": [rng.choice([0, 1, 0.5]) for _ in range(WIDTH)]})


def _bytes_mutated(body: bytes, rng: random.Random) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data) + 1)
        kind = rng.randrange(5)
        if kind == 0 and data:
            del data[min(at, len(data) - 1)]
        elif kind == 1:
            data.insert(at, rng.randrange(256))
        elif kind == 2 and data:
            data[min(at, len(data) - 1)] = ord(rng.choice('[]{}:,."\\-e0123456789 '))
        elif kind == 3:
            del data[at:]
        else:
            data[at:at] = data[at:at + rng.randint(1, 40)]
    return bytes(data)


def single_body(rng: random.Random) -> bytes:
    body = _case(rng).encode()
    if rng.random() < 0.3:
        body = _bytes_mutated(body, rng)
    if rng.random() < 0.02:
        body = rng.choice([b"[]", b"1", b'"x"', b"null", b"", b"{" * 70_000])
    return body


def batch_body(rng: random.Random) -> bytes:
    count = rng.choice([0, 1, 1, 2, 2, 3, 5, MAX_BATCH, MAX_BATCH + 1])
    cases = [_case(rng) if rng.random() < 0.2 else _plain(rng) for _ in range(count)]
    body = ("[" + ", ".join(cases) + "]").encode()
    if rng.random() < 0.3:
        body = _bytes_mutated(body, rng)
    if rng.random() < 0.02:
        body = b"[" + b"0, " * (MAX_BODY_BYTES // 3) + b"0]"  # over the body limit
    return body


def binary_body(rng: random.Random) -> bytes:
    count = rng.choice([0, 1, 2, 5, MAX_BATCH, MAX_BATCH + 1])
    odd = rng.random() < 0.3
    features = np.asarray(rng.choices([0.0, 1.0, 0.5, np.inf, -np.inf, np.nan, 1e308],
                                      weights=[40, 40, 10, *([1] * 4 if odd else [0] * 4)],
                                      k=count * WIDTH), np.float64).reshape(count, WIDTH)
    tensors: dict[str, np.ndarray] = {"features": features}
    roll = rng.random()
    if roll < 0.05:
        with np.errstate(all="ignore"):
            tensors = {"features": features.astype(np.float32)}
    elif roll < 0.10:
        with np.errstate(all="ignore"):
            tensors = {"features": features.astype(np.int64)}
    elif roll < 0.15:
        tensors = {"features": features.reshape(-1)}
    elif roll < 0.20:
        tensors["extra"] = features
    elif roll < 0.25:
        tensors = {"other": features}
    body = save(tensors) if count or roll >= 0.25 else save({"features": features})
    if rng.random() < 0.3:
        header_end = 8 + int.from_bytes(body[:8], "little")
        data = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            end = header_end if rng.random() < 0.5 else len(data)
            data[rng.randrange(max(1, end))] = rng.randrange(256)
        body = bytes(data)
    if rng.random() < 0.1:
        body = _bytes_mutated(body, rng)
    return body


def _fuzz(client: TestClient, path: str, make: Callable[[random.Random], bytes], seed: int,
          headers: dict[str, str] | None = None) -> tuple[Counter, list[str]]:
    outcomes: Counter = Counter()
    bad: list[str] = []
    for case in range(CASES):
        rng = random.Random(f"{seed}:{case}")
        body = make(rng)
        response = client.post(path, content=body, headers=headers or {})
        status = response.status_code
        if status == 200:
            document = response.json()
            if isinstance(document, list):
                ok = all("escalated" in answer for answer in document)
            else:
                ok = "escalated" in document
            outcomes["answered"] += 1
        else:
            document = response.json()
            kind = document.get("error", {}).get("kind")
            ok = 400 <= status < 500 and kind in DOCUMENTED and document["path"] == "refused"
            outcomes[kind] += 1
        if not ok:
            bad.append(f"case {case}: {status} {response.text[:200]} for {body[:120]!r}")
    return outcomes, bad


@pytest.mark.parametrize("endpoint, make, seed, headers", [
    ("", single_body, 71, None),
    ("/batch", batch_body, 73, None),
    ("/batch", binary_body, 79, {"Content-Type": MEDIA_TYPE}),
], ids=["single", "json-batch", "safetensors-batch"])
def test_fuzzed_requests_are_answered_or_refused_never_5xx(ticket_dir, endpoint, make, seed,
                                                           headers, record_property):
    app = create_app({"tickets": ticket_dir}, max_body_bytes=MAX_BODY_BYTES,
                     max_batch=MAX_BATCH)
    with TestClient(app, raise_server_exceptions=False) as client:
        outcomes, bad = _fuzz(client, f"/v1/routers/tickets{endpoint}", make, seed, headers)
        metrics = client.get("/metrics").text
    name = f"HTTP POST /v1/routers/{{name}}{endpoint}" + (" (safetensors)" if headers else "")
    refused = CASES - outcomes["answered"]
    kinds = ", ".join(f"{kind} {n}" for kind, n in outcomes.most_common() if kind != "answered")
    line = (f"{name}: {CASES} cases, {refused} documented ({kinds}), "
            f"{outcomes['answered']} valid, {len(bad)} other, 0 over the deadline")
    record_property("fuzz counts", line)
    assert not bad, "\n".join([line, *bad[:10]])
    assert 'kind="internal"' not in metrics
    # both outcomes happen, so the fuzzer reaches the program as well as the readers
    assert outcomes["answered"] > CASES // 10 and refused > CASES // 10, line

"""The Router: which path answers, what is recorded, and no case lost under threads."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from tensorcode.distill import Router
from tensorcode.errors import TensorCodeError


def program(inputs):
    """Claims ids not divisible by 3, raises on multiples of 7 (that are not of 3)."""
    n = inputs["id"]
    if n % 3 == 0:
        return {"route": -1.0, "covered": 0.0}
    if n % 7 == 0:
        raise ValueError("cannot route")
    return {"route": float(n % 5), "covered": 1.0}


def fallback(inputs):
    return {"route": 100.0 + inputs["id"] % 5}


def test_paths_and_records():
    router = Router(program, fallback, ["route"])
    assert router.rate() == 0.0
    assert router({"id": 1}) == {"route": 1.0, "escalated": False}
    assert router({"id": 3}) == {"route": 103.0, "escalated": True}
    assert router({"id": 7}) == {"route": 102.0, "escalated": True}
    assert router.calls == 3 and router.escalations == 2
    assert router.rate() == pytest.approx(2 / 3)
    cases, targets = router.cases()
    assert cases == [{"id": 3}, {"id": 7}]
    assert targets == [{"route": 103.0}, {"route": 102.0}]
    assert router.reasons() == ["abstained", "error: ValueError: cannot route"]


def test_non_finite_answers_escalate():
    router = Router(lambda i: {"route": np.nan, "covered": 1.0}, fallback, ["route"])
    assert router({"id": 1})["escalated"] is True
    router = Router(lambda i: {"route": 1.0, "covered": np.inf}, fallback, ["route"])
    assert router({"id": 1})["escalated"] is True
    assert router.reasons() == ["error: 'covered' is not finite"]


def test_a_failing_fallback_propagates_and_records_nothing():
    def broken(inputs):
        raise RuntimeError("fallback down")

    router = Router(program, broken, ["route"])
    with pytest.raises(RuntimeError, match="fallback down"):
        router({"id": 3})
    assert router.calls == 0 and router.cases() == ([], [])
    router = Router(program, lambda inputs: 5, ["route"])
    with pytest.raises(TensorCodeError, match="must return a dict"):
        router({"id": 3})


def test_sixteen_threads_lose_no_case():
    threads_count, per_thread = 16, 10_000
    router = Router(program, fallback, ["route"])
    errors = []
    barrier = threading.Barrier(threads_count)

    def work(t):
        try:
            barrier.wait()
            for k in range(per_thread):
                n = t * per_thread + k
                answer = router({"id": n})
                expected_escalated = n % 3 == 0 or n % 7 == 0
                if answer["escalated"] != expected_escalated:
                    errors.append(("path", n))
                expected = 100.0 + n % 5 if expected_escalated else float(n % 5)
                if answer["route"] != expected:
                    errors.append(("answer", n))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    total = threads_count * per_thread
    expected_ids = [n for n in range(total) if n % 3 == 0 or n % 7 == 0]
    assert router.calls == total
    assert router.escalations == len(expected_ids)
    cases, targets = router.cases()
    ids = [c["id"] for c in cases]
    assert Counter(ids) == Counter(expected_ids)  # each escalation recorded exactly once
    assert all(t["route"] == 100.0 + c["id"] % 5 for c, t in zip(cases, targets))
    assert router.rate() == pytest.approx(len(expected_ids) / total)

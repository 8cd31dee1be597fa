"""The Router: which path answers, what is recorded, and no case lost under threads."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from tensorcode.distill import Router
from tensorcode.distill.inputs import InputError
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
    assert router({"id": 1}) == {"route": 1.0, "escalated": False, "path": "program"}
    assert router({"id": 3}) == {"route": 103.0, "escalated": True,
                                 "path": "fallback_abstained"}
    assert router({"id": 7}) == {"route": 102.0, "escalated": True, "path": "fallback_error"}
    with pytest.raises(InputError):
        router({"id": "7"})
    assert router.calls == 3 and router.escalations == 2 and router.refused == 1
    assert router.paths() == {"program": 1, "fallback_abstained": 1, "fallback_error": 1,
                              "refused": 1}
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
    router = Router(program, fallback, ["route"], max_recorded=threads_count * per_thread)
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
    assert router.escalations == len(expected_ids) and router.dropped == 0
    cases, targets = router.cases()
    ids = [c["id"] for c in cases]
    assert Counter(ids) == Counter(expected_ids)  # each escalation recorded exactly once
    assert all(t["route"] == 100.0 + c["id"] % 5 for c, t in zip(cases, targets))
    assert router.rate() == pytest.approx(len(expected_ids) / total)


def test_the_escalation_buffer_is_bounded_and_counts_what_it_drops():
    router = Router(program, fallback, ["route"], max_recorded=3)
    for n in range(0, 30, 3):  # ten abstentions
        assert router({"id": n})["escalated"] is True
    assert router.escalations == 10 and router.dropped == 7
    cases, targets = router.cases()
    assert [c["id"] for c in cases] == [21, 24, 27]  # the newest, oldest first
    assert router.reasons() == ["abstained"] * 3
    assert router.rate() == 1.0
    keeping_none = Router(program, fallback, ["route"], max_recorded=0)
    keeping_none({"id": 3})
    assert keeping_none.cases() == ([], []) and keeping_none.dropped == 1
    for bad in (-1, 1.5, "10"):
        with pytest.raises(TensorCodeError, match="max_recorded"):
            Router(program, fallback, ["route"], max_recorded=bad)


def test_counts_survive_threads_that_end():
    router = Router(program, fallback, ["route"])
    for start in range(5):  # one short-lived thread after another
        thread = threading.Thread(target=lambda s=start: [router({"id": s * 100 + k})
                                                        for k in range(1, 3)])
        thread.start()
        thread.join()
    router({"id": 1})
    covered = sum(1 for s in range(5) for k in range(1, 3)
                  if (s * 100 + k) % 3 and (s * 100 + k) % 7) + 1
    assert router.paths()["program"] == covered
    assert router.calls == 11
    assert len(router._cells) <= 2  # the ended threads' cells were folded

"""PairScorer's lean single-call path answers exactly as the general call path does
(the same plan on the same arrays), on every backend, after the parameters change, from
several threads at once, and leaves malformed calls to the general path's errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tensorcode.errors import ShapeError, TrainingError
from tensorcode.operations.base import Operation
from tensorcode.tools import Decision
from tensorcode.tools.decision import softmax_rows
from tensorcode.tools.scorer import PairScorer

SMALL = {"dim": 8, "hidden": 8, "buckets": 64}
ITEMS = [f"option {k} " + "word " * k for k in range(9)]


def general(scorer, query, items):
    """The call through ``Operation.apply`` (convert, executor, checked run)."""
    return Operation.apply(scorer, (query, items))


@pytest.mark.parametrize("backend", ["reference", "llvm"])
def test_text_queries_match_the_general_path(backend):
    scorer = PairScorer(None, None, backend=backend, **SMALL)
    for n in (1, 2, 3, 5, 9):
        for query in ("", "a query", "a much longer query about the disk " * 4):
            lean = scorer(query, ITEMS[:n])
            expected = general(scorer, query, ITEMS[:n])
            assert lean.shape == expected.shape == (max(2, 1 << (n - 1).bit_length()),)
            assert lean.dtype == expected.dtype
            np.testing.assert_array_equal(lean, expected)


def test_numeric_queries_match_the_general_path():
    scorer = PairScorer(5, None, backend="llvm", **SMALL)
    rng = np.random.default_rng(0)
    for n in (1, 3, 4):
        query = rng.normal(size=5)
        np.testing.assert_array_equal(scorer(query.tolist(), ITEMS[:n]),
                                      general(scorer, query.tolist(), ITEMS[:n]))
    with pytest.raises(ShapeError, match="vector of 5 numbers"):
        scorer([1.0, 2.0], ITEMS[:2])
    with pytest.raises(TrainingError, match="NaN or infinity"):
        scorer([1.0, np.nan, 0.0, 0.0, 0.0], ITEMS[:2])
    with pytest.raises(TypeError, match="expected numbers, got a text"):
        scorer("a text", ITEMS[:2])


def test_new_parameters_are_used_at_once():
    scorer = PairScorer(None, None, backend="llvm", **SMALL)
    before = scorer("a query", ITEMS[:3])
    scorer.load_payloads([p * 1.5 for p in scorer.parameters.payloads()])
    after = scorer("a query", ITEMS[:3])
    assert not np.array_equal(before, after)
    np.testing.assert_array_equal(after, general(scorer, "a query", ITEMS[:3]))


def test_results_are_fresh_arrays():
    scorer = PairScorer(None, None, backend="llvm", **SMALL)
    first = scorer("a query", ITEMS[:3])
    kept = first.copy()
    scorer("another query", ITEMS[:3])
    np.testing.assert_array_equal(first, kept)  # a later call does not write into it


def test_threads_share_one_scorer():
    scorer = PairScorer(None, None, backend="llvm", **SMALL)
    queries = [f"query {k} " * k for k in range(6)]
    expected = [general(scorer, q, ITEMS[:3]) for q in queries]
    wrong: list[int] = []

    def work(k: int) -> None:
        for _ in range(300):
            if not np.array_equal(scorer(queries[k], ITEMS[:3]), expected[k]):
                wrong.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(queries))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_malformed_items_get_the_general_errors():
    scorer = PairScorer(None, None, backend="reference", **SMALL)
    with pytest.raises(TypeError, match="nonempty list of texts"):
        scorer("a query", [])
    with pytest.raises(TypeError, match="nonempty list of texts"):
        scorer("a query", ["text", 3])
    with pytest.raises(TypeError, match="the query is a text"):
        scorer(3, ["text"])


def test_one_decision_matches_its_batch_row():
    decision = Decision(SMALL, seed=1, backend="llvm")
    inputs = [{"context": f"context {k}", "hypotheses": [
        {"id": f"h{j}", "text": ITEMS[j]} for j in range(k + 1)]} for k in range(4)]
    for inp in inputs:
        one = decision.decide(inp)
        logits = decision.operations["scorer"].apply(
            ([inp["context"]], [[h["text"] for h in inp["hypotheses"]]]))
        (expected,) = softmax_rows(logits / decision.temperature, [len(one.ids)])
        np.testing.assert_allclose(one.probabilities, expected, rtol=1e-6)
        assert one.chosen == one.ids[int(np.argmax(expected))]
    with pytest.raises(ValueError, match=r"missing \[.text.\]"):
        decision.decide({"context": "c", "hypotheses": [{"id": "a", "txt": "x"}]})
    with pytest.raises(TypeError, match=r"hypotheses\[0\]\.text must be a text"):
        decision.decide({"context": "c", "hypotheses": [{"id": "a", "text": 3}]})
    with pytest.raises(ValueError, match="appears more than once"):
        decision.decide({"context": "c", "hypotheses": [{"id": "a", "text": "x"},
                                                         {"id": "a", "text": "y"}]})

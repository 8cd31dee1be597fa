"""A batch's answers render exactly as each answer's own document would, whichever way
the column is rendered (once per distinct value, or number by number)."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode.serve.answers import dumps, render_batch


def _expected(column, escalated):
    return b"[" + b",".join(
        escalated[i] if i in escalated else dumps(
            {"route": float(value), "escalated": False, "reason": None, "path": "program"})
        for i, value in enumerate(column.tolist())) + b"]"


@pytest.mark.parametrize("column, escalated", [
    (np.array([1.0, -0.0, 0.0, 2.0, 1.0] * 40), {}),                 # -0.0 apart from 0.0
    (np.array([1.0, 0.0, 2.0] * 100 + [7.0]), {1: b'{"x":1}'}),       # a value past the sample
    (np.array([float(i % 40) for i in range(1000)]), {5: b'{"q":2}'}),  # few, found late
    (np.array([1.0] * 64 + [5.0] * 100 + [np.nan] * 3), {164: b"{}", 165: b"{}", 166: b"{}"}),
    (np.random.default_rng(3).random(200), {3: b'{"e":1}'}),           # many: number by number
    (np.array([3.0]), {}), (np.array([0.1, 1e-300, 1e300, -2.5] * 8), {}),
])
def test_a_batch_renders_as_its_answers_one_by_one(column, escalated):
    rendered = render_batch({"route": ()}, {"route": column}, len(column), escalated)
    assert rendered == _expected(column, escalated)

"""The author is told the truth about each attempt: a program that reads no input is
scored like any other on every backend (it once failed to lower under the compiled
backend and came back as "did not compile"), and a backend failure on a program the
front end accepted is reported as TensorCode's limitation, never as the author's
compile error."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode.compiler.backends import BACKENDS
from tensorcode.distill import distill
from tensorcode.errors import DistillationError

CONSTANT = """```python
def program(x):
    n = 0.0
    for i in range(7 // 2, 10 % 6):
        n += 2.0
    return {"route": n, "covered": 1.0}
```"""


def _workload():
    cases = [{"x": np.array([float(k), 1.0])} for k in range(10)]
    return cases, [{"route": 2.0} for _ in range(10)]


@pytest.mark.parametrize("executor", BACKENDS)
def test_a_program_that_reads_no_input_is_scored(executor):
    cases, targets = _workload()
    result = distill("always two", {"x": (2,)}, cases, targets=targets,
                     author=lambda prompt: CONSTANT, attempts=1, executor=executor)
    assert result.attempts[0]["stage"] == "scored"
    assert result.report["design"]["wrong"] == 0
    assert result.report["acceptance"]["wrong"] == 0


def test_a_backend_failure_is_not_reported_as_a_compile_error(monkeypatch):
    from tensorcode.compiler.plans import plan

    def broken(self, *args, **kwargs):
        raise RuntimeError("simulated backend failure")

    monkeypatch.setattr(plan.Entry, "lower", broken)
    cases, targets = _workload()
    prompts = []

    def author(prompt):
        prompts.append(prompt)
        return CONSTANT

    with pytest.raises(DistillationError) as caught:
        distill("always two", {"x": (2,)}, cases, targets=targets, author=author,
                attempts=2, executor="numba")
    for attempt in caught.value.attempts:
        assert attempt["stage"] == "lower"
        assert "did not compile" not in attempt["error"]
        assert "not a mistake in the program" in attempt["error"]
    assert "did not compile" not in prompts[-1]
    assert "compiles" not in str(caught.value).split(";")[0]

"""Distillation and repair with attempts scored over cases sharded across Ray tasks:
the reports are the in-process ones."""

from __future__ import annotations

import numpy as np
import pytest

from tensorcode.distill import distill, repair
from tensorcode.distributed import RayExecutor
from tensorcode.integrations import RecordedModel

pytestmark = pytest.mark.usefixtures("local_ray")

PROGRAM = """```python
def program(x, slope, offset):
    value = x.slice(0, 1).reshape()
    covered = where(value < 8.0, 1.0, 0.0)
    return {"route": value * slope + offset, "covered": covered}
```
```json
{"slope": %s, "offset": 1.0}
```"""


def workload(count: int = 30, seed: int = 4):
    rng = np.random.default_rng(seed)
    xs = rng.permutation(count) * (10.0 / count) + 0.01
    return ([{"x": np.array([x, 1.0])} for x in xs],
            [{"route": 2.0 * x + 1.0} for x in xs])


def test_distill_and_repair_report_the_same_with_cases_on_workers():
    cases, targets = workload()
    replies = [PROGRAM % "1.5", PROGRAM % "2.0"]
    here = distill("predict the route", {"x": (2,)}, cases, targets=targets,
                   author=RecordedModel(replies), attempts=2, executor="reference")
    runner = RayExecutor(workers=2, timeout_s=120)
    there = distill("predict the route", {"x": (2,)}, cases, targets=targets,
                    author=RecordedModel(replies), attempts=2, executor="reference",
                    runner=runner)
    assert there.report == here.report and there.attempts == here.attempts
    assert runner.shards_sent == 2 * 3  # two design scorings and one acceptance, 2 shards
    new = [{"x": np.array([9.0, 1.0])}, {"x": np.array([9.5, 1.0])}]
    answers = [{"route": 19.0}, {"route": 20.0}]
    fixed_here = repair(here, RecordedModel([PROGRAM % "2.0"]), new, answers, attempts=1)
    fixed_there = repair(there, RecordedModel([PROGRAM % "2.0"]), new, answers, attempts=1,
                         runner=runner)
    assert fixed_there.report == fixed_here.report
    assert runner.shards_sent > 6


def test_a_runner_must_run_cases():
    cases, targets = workload(6)
    with pytest.raises(TypeError, match="run_cases"):
        distill("t", {"x": (2,)}, cases, targets=targets, author=RecordedModel([PROGRAM % 2]),
                runner=object())

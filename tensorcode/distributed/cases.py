"""Scoring distillation attempts over cases sharded across Ray workers.

``RayExecutor`` is a case runner for ``distill(..., runner=RayExecutor())`` and
``repair(..., runner=...)``: every time an attempt is scored, its program's artifact
document (the validated JSON form of the compiled program and its parameters, never
code) is put into Ray's object store once, the cases are cut into contiguous shards,
one Ray task per shard rebuilds the program from the document and runs its shard, and
the outputs come back in case order. The verdicts, and so the report, are the ones the
in-process runner produces.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from ..algorithm import Algorithm
from ..distill.program import run_cases_here
from ..errors import TensorCodeError
from .ray_support import DEFAULT_TIMEOUT_S, check_timeout, gather, require_initialized


def run_shard(document: Mapping[str, Any], executor: str, cases: Sequence[Any]) -> list[Any]:
    """A worker's share: rebuild the program from its artifact document and run it over
    ``cases`` (outputs, or the exception each case raised)."""
    return run_cases_here(Algorithm.from_document(document, executor), cases)


class RayExecutor:
    """Run a distilled program (an ``Algorithm``, which travels as its artifact document)
    over cases on ``workers`` Ray tasks (``ray.init`` first).

    ``min_cases``: below this many cases the overhead of a task is not worth it and the
    cases run in this process (the same function, so the same results).
    ``timeout_s`` bounds the wait for the shards; a failed or lost task raises
    ``WorkerError`` naming its shard.
    """

    def __init__(self, workers: int = 2, *, min_cases: int = 0,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise TensorCodeError(f"workers must be a positive integer, got {workers!r}")
        if not isinstance(min_cases, int) or min_cases < 0:
            raise TensorCodeError(f"min_cases must be a non-negative integer, got "
                                  f"{min_cases!r}")
        self.workers = workers
        self.min_cases = min_cases
        self.timeout_s = check_timeout(timeout_s)
        #: how many shards have been sent to workers (for reports and tests)
        self.shards_sent = 0

    def run_cases(self, program: Any, cases: Sequence[Any]) -> list[Any]:
        """The program's outputs for each case, or the exception it raised there."""
        if len(cases) < max(1, self.min_cases):
            return run_cases_here(program, cases)
        ray = require_initialized()
        task = ray.remote(num_cpus=1, max_retries=0)(run_shard)
        document = ray.put(program.to_document())
        parts = min(self.workers, len(cases))
        bounds = [len(cases) * k // parts for k in range(parts + 1)]
        shards = [list(cases[a:b]) for a, b in itertools.pairwise(bounds)]
        refs = [task.remote(document, program.executor, shard) for shard in shards]
        names = [f"the shard of cases {a}..{b - 1}" for a, b in itertools.pairwise(bounds)]
        self.shards_sent += len(refs)
        results: list[Any] = []
        for part in gather(refs, names, self.timeout_s):
            results.extend(part)
        return results

    def __repr__(self) -> str:
        return f"RayExecutor(workers={self.workers}, min_cases={self.min_cases})"

"""One router as the service holds it: a validated program and its answer paths.

A ``ServedRouter`` never changes after it is built, so a request that picked one up keeps
answering with it while a reload installs its successor. Loading runs the program over
the saved acceptance cases through both the single and the batch path, which compiles
both plans before the router takes traffic and refuses an artifact whose paths disagree.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..algorithm.algorithm_file import dumps
from ..distill.cases import COVERED, Case, claims
from ..distill.inputs import check_batch, check_case, read_batch
from ..distill.result import ARTIFACT, Distillation
from ..distill.router import PROGRAM, decide
from ..errors import ArtifactError, TensorCodeError
from .answers import dumps as answer_dumps
from .binary import read_safetensors_batch
from .hot import SingleAnswer, single_answer

#: the answer of a program for one case: outputs, or ``None`` with the escalation reason
Decision = tuple[dict[str, Any] | None, str | None]


@dataclass(frozen=True)
class ServedRouter:
    """A loaded router: ``name``, the ``Distillation``, its artifact's SHA-256 and where
    it was loaded from (``None`` for one given in memory, which cannot be reloaded)."""

    name: str
    distillation: Distillation
    artifact_sha256: str
    directory: Path | None
    loaded_at: float = field(default_factory=time.time)

    @cached_property
    def single_answer(self) -> SingleAnswer | None:
        """The single-request fast path (``serve.hot``), or ``None`` when this router's
        program has none (several inputs, array outputs, no bound scalar call)."""
        return single_answer(self.inputs, self.outputs, self.distillation.program)

    def read_batch(self, body: bytes, limit: int, max_cases: int | None
                   ) -> dict[str, np.ndarray]:
        """A batch body as ``{name: float64 array [N, *shape]}``
        (``distill.inputs.read_batch``: orjson where its result is provably the strict
        reader's, else the strict reader, which refuses a bad body with the shared
        validator's ``InputError``)."""
        return read_batch(body, self.inputs, limit, max_cases)

    def read_safetensors_batch(self, body: bytes, limit: int, max_cases: int | None
                               ) -> dict[str, np.ndarray]:
        """A safetensors batch body as the same ``{name: float64 array [N, *shape]}``
        (``serve.binary``: one tensor per input, nothing parsed per number), refused
        with the same ``InputError`` kinds as a JSON batch where the rule applies."""
        return read_safetensors_batch(body, self.inputs, limit, max_cases)

    @property
    def inputs(self) -> dict[str, tuple[int, ...]]:
        return self.distillation.inputs

    @property
    def outputs(self) -> dict[str, tuple[int, ...]]:
        return self.distillation.outputs

    def check(self, document: Any) -> Case:
        """One case validated by the shared validator (``InputError`` names the field)."""
        return check_case(document, self.distillation.inputs)

    def check_batch(self, documents: Any, may_hold_booleans: bool = True) -> dict[str, np.ndarray]:
        return check_batch(documents, self.distillation.inputs,
                           may_hold_booleans=may_hold_booleans)

    def answer(self, case: Case) -> Decision:
        """The compiled call for one validated case, through ``Router``'s decision rule."""
        return decide(self.distillation.program, tuple(self.distillation.outputs), case)

    def answer_batch(self, stacked: Mapping[str, np.ndarray]) -> list[Decision]:
        """Decisions for N validated cases through the plan's batch path (compiled once
        for any N), one per case as ``answer`` gives them."""
        columns, reasons = self.decide_columns(stacked)
        count = len(next(iter(stacked.values()))) if stacked else 0
        return [(None, reasons[i]) if i in reasons else
                ({name: json_value(column[i]) for name, column in columns.items()}, None)
                for i in range(count)]

    def decide_columns(self, stacked: Mapping[str, np.ndarray]
                       ) -> tuple[dict[str, np.ndarray], dict[int, str]]:
        """``(columns, reasons)`` for N validated cases in one call of the plan's batch
        path: each output as a float64 array ``[N, *shape]`` and, for each case the
        program did not claim, its escalation reason (that row's values are then
        meaningless). A batch that fails at run time is answered case by case, so the
        failure is charged to the cases that cause it."""
        names = list(self.distillation.outputs)
        count = len(next(iter(stacked.values()))) if stacked else 0
        if count == 0:
            return {name: np.empty((0, *shape)) for name, shape in self.outputs.items()}, {}
        try:
            produced = self.distillation.program.batch(stacked)
        except Exception:  # a run-time failure: find the cases that cause it
            decisions = [self.answer({k: v[i] for k, v in stacked.items()})
                         for i in range(count)]
            columns = {name: np.stack([np.zeros(self.outputs[name]) if a is None
                                       else np.asarray(a[name], dtype=np.float64)
                                       for a, _ in decisions]) for name in names}
            return columns, {i: r for i, (_, r) in enumerate(decisions) if r is not None}
        covered = produced.get(COVERED)
        claimed = np.ones(count, dtype=bool) if covered is None else (
            np.isfinite(covered) & claims(covered))
        finite = np.ones(count, dtype=bool)
        columns = {}
        for name in names:
            values = np.asarray(produced[name], dtype=np.float64)
            finite &= np.isfinite(values.reshape(count, -1)).all(axis=1)
            columns[name] = values
        if claimed.all() and finite.all():
            return columns, {}
        return columns, _reasons(covered, claimed, finite)

    def describe(self) -> dict[str, Any]:
        """What ``GET /v1/routers`` says about this router."""
        report = self.distillation.report
        summary = {part: report.get(part) for part in ("design", "acceptance")}
        summary["selected_attempt"] = report.get("selected_attempt")
        return {
            "name": self.name,
            "artifact_sha256": self.artifact_sha256,
            "inputs": {k: list(v) for k, v in self.inputs.items()},
            "outputs": {k: list(v) for k, v in self.outputs.items()},
            "abstains": self.distillation.abstains,
            "executor": self.distillation.executor,
            "task": self.distillation.task,
            "report": summary,
            "loaded_at": self.loaded_at,
        }


def _reasons(covered: Any, claims: np.ndarray, finite: np.ndarray) -> dict[int, str]:
    """The escalation reason of each case not claimed with finite outputs, by index (a
    walk over those cases alone: a batch is mostly claimed)."""
    reasons: dict[int, str] = {}
    for i in np.flatnonzero(~(claims & finite)).tolist():
        if covered is not None and not math.isfinite(float(covered[i])):
            reasons[i] = "error: 'covered' is not finite"
        elif not claims[i]:
            reasons[i] = "abstained"
        else:
            reasons[i] = "error: a non-finite output while covered"
    return reasons


def json_value(value: Any) -> Any:
    """An output value as JSON (a float or nested lists of floats)."""
    if isinstance(value, float):
        return value
    array = np.asarray(value, dtype=np.float64)
    return array.tolist() if array.shape else float(array)


def load_router(name: str, source: str | os.PathLike | Distillation,
                executor: str | None = None) -> ServedRouter:
    """Load and fully validate a router: the directory's record and artifact (hash,
    contracts, parameters), then both answer paths over the saved acceptance cases,
    which must agree. Raises ``ArtifactError`` (or another ``TensorCodeError``) saying
    what is wrong; nothing half-loaded is returned. ``executor`` is one of
    ``Distillation.load``'s (``None``: its default, the compiled plan)."""
    if not isinstance(name, str) or not name or "/" in name:
        raise TensorCodeError(f"a router name must be non-empty text without '/', got {name!r}")
    if isinstance(source, Distillation):
        distillation, directory = source, None
        sha = hashlib.sha256(_artifact_bytes(distillation)).hexdigest()
    else:
        directory = Path(source)
        distillation = (Distillation.load(directory) if executor is None
                        else Distillation.load(directory, executor=executor))
        sha = hashlib.sha256((directory / ARTIFACT).read_bytes()).hexdigest()
    served = ServedRouter(name, distillation, sha, directory)
    _self_check(served)
    return served


def answer_document(decision: dict[str, Any]) -> dict[str, Any]:
    """The JSON document of an answer the program gave (``ServedRouter.answer``'s)."""
    document = {name: json_value(value) for name, value in decision.items()}
    document.update(escalated=False, reason=None, path=PROGRAM)
    return document


def _artifact_bytes(distillation: Distillation) -> bytes:
    return dumps(distillation.program.to_document())


def _self_check(served: ServedRouter) -> None:
    cases = list(served.distillation.acceptance.cases) or list(served.distillation.design.cases)
    if not cases:
        return
    cases = cases[:256]
    stacked = {name: np.stack([c[name] for c in cases]) for name in served.inputs}
    batch = served.answer_batch(stacked)
    fast = served.single_answer
    for i, case in enumerate(cases):
        single = served.answer(case)
        if not _same(single, batch[i]):
            raise ArtifactError(f"router {served.name!r}: the single and the batch path "
                                f"disagree on acceptance case {i} ({single} against "
                                f"{batch[i]}); this artifact is not served",
                                served.directory)
        if fast is None:
            continue
        quick = fast.answer(answer_dumps({k: v.tolist() for k, v in case.items()}))
        if quick != (None if single[0] is None else answer_dumps(answer_document(single[0]))):
            raise ArtifactError(f"router {served.name!r}: the fast and the general path of "
                                f"a single request disagree on acceptance case {i} ({quick!r} "
                                f"against {single}); this artifact is not served",
                                served.directory)


def _same(a: Decision, b: Decision) -> bool:
    if (a[0] is None) != (b[0] is None):
        return False
    if a[0] is None or b[0] is None:
        return a[1] == b[1]
    return all(np.array_equal(np.asarray(a[0][k], dtype=np.float64),
                              np.asarray(b[0][k], dtype=np.float64)) for k in a[0])

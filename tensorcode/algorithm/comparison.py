"""``compare``: how closely an algorithm agrees with a reference, case by case.

The reference is any callable from an input dict to an output dict (a hand-written
NumPy function, a teacher, another ``Algorithm``). Agreement is ``np.allclose`` per
output within ``atol``/``rtol`` and exact shape; a case where either side raises counts
as an error, never as agreement. With ``rollout=True`` the cases are steps of one
sequence: outputs named like inputs are state, and each side is fed its own previous
state, so drift shows up at the step where it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import TensorCodeError

MAX_FAILURES = 10


@dataclass
class Comparison:
    """The result of ``compare``: counts, the largest error per output and the first
    failures (step index, inputs, expected, produced or the error message)."""

    cases: int = 0
    agreed: int = 0
    mismatched: int = 0
    errors: int = 0
    rollout: bool = False
    max_abs_error: dict[str, float] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every case agreed."""
        return self.cases > 0 and self.agreed == self.cases

    @property
    def agreement(self) -> float:
        return self.agreed / self.cases if self.cases else 0.0

    def to_json(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            if isinstance(value, np.ndarray):
                return value.tolist()
            if isinstance(value, Mapping):
                return {k: plain(v) for k, v in value.items()}
            return value
        return {"cases": self.cases, "agreed": self.agreed, "mismatched": self.mismatched,
                "errors": self.errors, "rollout": self.rollout, "agreement": self.agreement,
                "max_abs_error": dict(self.max_abs_error),
                "failures": [plain(f) for f in self.failures]}

    def __str__(self) -> str:
        worst = ", ".join(f"{k}={v:.3g}" for k, v in self.max_abs_error.items())
        return (f"{self.agreed}/{self.cases} agreed, {self.mismatched} mismatched, "
                f"{self.errors} errors (max abs error: {worst or 'n/a'})")


def _call(side: Callable[[dict], Any], inputs: dict) -> dict[str, np.ndarray]:
    result = side(dict(inputs))
    if not isinstance(result, Mapping):
        raise TensorCodeError(f"returned {type(result).__name__}, not a dict of outputs")
    return {k: np.asarray(v, dtype=np.float64) for k, v in result.items()}


def compare(algorithm: Any, reference: Callable[[dict], Mapping[str, Any]],
            cases: Sequence[Mapping[str, Any]], atol: float = 1e-8, rtol: float = 1e-6,
            rollout: bool = False, outputs: Sequence[str] | None = None) -> Comparison:
    """Compare ``algorithm`` with ``reference`` on ``cases``.

    ``outputs`` names the outputs compared (default: all of the algorithm's). With
    ``rollout=True`` the state names are the outputs that are also inputs; the first
    case supplies the initial state and later cases supply only the other inputs (a
    state value they carry is replaced by each side's own previous output). An error
    stops the rollout; the remaining steps count as errors.
    """
    names = list(outputs) if outputs is not None else list(algorithm.outputs)
    if not names:
        raise TensorCodeError("compare needs at least one output name")
    state = [n for n in algorithm.outputs if n in algorithm.inputs]
    if rollout and not state:
        raise TensorCodeError("rollout=True needs a stateful algorithm: at least one output "
                              "named like an input (its next value)")
    report = Comparison(rollout=bool(rollout), max_abs_error=dict.fromkeys(names, 0.0))
    own_state: dict[str, np.ndarray] = {}
    reference_state: dict[str, np.ndarray] = {}
    cases = list(cases)
    for step, case in enumerate(cases):
        report.cases += 1
        mine, theirs = dict(case), dict(case)
        if rollout and step > 0:
            mine.update(own_state)
            theirs.update(reference_state)
        try:
            produced = _call(algorithm, mine)
        except Exception as exc:  # a failing case is a verdict, not a crash
            _error(report, step, case, f"algorithm raised {type(exc).__name__}: {exc}")
            if rollout:
                _stop(report, step, len(cases))
                break
            continue
        try:
            expected = _call(reference, theirs)
        except Exception as exc:
            _error(report, step, case, f"reference raised {type(exc).__name__}: {exc}")
            if rollout:
                _stop(report, step, len(cases))
                break
            continue
        if rollout:
            missing = [n for n in state if n not in expected]
            if missing:
                _error(report, step, case, f"reference did not return the state {missing}")
                _stop(report, step, len(cases))
                break
            own_state = {n: produced[n] for n in state}
            reference_state = {n: expected[n] for n in state}
        agreed: bool | None = True  # None: the case could not be compared
        for name in names:
            if name not in expected or name not in produced:
                side = "reference function" if name not in expected else "algorithm"
                _error(report, step, case, f"the {side} did not return {name!r}")
                agreed = None
                break
            a, b = produced[name], expected[name]
            if a.shape != b.shape:
                agreed = False
                report.max_abs_error[name] = float("inf")
                continue
            difference = float(np.max(np.abs(a - b))) if a.size else 0.0
            if not np.isnan(difference):
                report.max_abs_error[name] = max(report.max_abs_error[name], difference)
            if not np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True):
                agreed = False
        if agreed is None:
            continue
        if agreed:
            report.agreed += 1
        else:
            report.mismatched += 1
            if len(report.failures) < MAX_FAILURES:
                report.failures.append({"step": step, "inputs": dict(case),
                                        "expected": {n: expected.get(n) for n in names},
                                        "produced": {n: produced.get(n) for n in names}})
    return report


def _error(report: Comparison, step: int, case: Any, message: str) -> None:
    report.errors += 1
    if len(report.failures) < MAX_FAILURES:
        report.failures.append({"step": step, "inputs": dict(case), "error": message})


def _stop(report: Comparison, step: int, total: int) -> None:
    remaining = total - step - 1
    report.cases += remaining
    report.errors += remaining


__all__ = ["compare", "Comparison"]

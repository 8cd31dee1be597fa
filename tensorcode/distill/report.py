"""Scoring a program against the teacher: one verdict per case, then the report.

Each case gets exactly one verdict:

* ``error``     the program raised, or produced a non-finite ``covered`` or a non-finite
                output while claiming the case (a runtime failure, never agreement);
* ``uncovered`` the program's ``covered`` output is not above 0.5 (``cases.claims``): it
  abstains, the fallback answers;
* ``agreed``    covered, and every teacher output matches within ``atol``/``rtol``;
* ``wrong``     covered, and some output does not match.

So ``cases = covered + uncovered + errors`` and ``covered = agreed + wrong``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cases import COVERED, Case, Contract, claims, to_json

#: the report fields, in the order the documentation lists them
FIELDS = ("cases", "covered", "uncovered", "agreed", "wrong", "errors", "coverage",
          "precision", "agreement", "failures", "abstains")

VERDICTS = ("agreed", "wrong", "uncovered", "error")


@dataclass(frozen=True)
class Verdict:
    """How one case went: ``kind`` is one of ``VERDICTS``; ``produced`` holds the
    program's outputs and ``error`` its exception text, when there are any."""

    kind: str
    produced: dict[str, Any] | None = None
    error: str | None = None


def judge(produced: Mapping[str, Any] | BaseException, target: Case, outputs: Contract,
          atol: float, rtol: float) -> Verdict:
    """The verdict for one case. ``produced`` is the program's output dictionary or the
    exception it raised; a program without a ``covered`` output claims every case."""
    if isinstance(produced, BaseException):
        return Verdict("error", None, f"{type(produced).__name__}: {produced}")
    values = {name: np.asarray(value, dtype=np.float64) for name, value in produced.items()}
    covered = values.get(COVERED, np.float64(1.0))
    if covered.size != 1 or not np.isfinite(covered).all():
        return Verdict("error", values, f"'covered' is {covered.tolist()!r}, not a finite scalar")
    if not claims(float(covered.reshape(()))):
        return Verdict("uncovered", values)
    matches = True
    for name, shape in outputs.items():
        if name not in values:
            return Verdict("error", values, f"the program produced no output {name!r}")
        value = values[name]
        if value.shape != shape:
            return Verdict("error", values, f"output {name!r} has shape {list(value.shape)}, "
                                            f"expected {list(shape)}")
        if not np.isfinite(value).all():
            return Verdict("error", values, f"output {name!r} is not finite while covered")
        if not np.allclose(value, target[name], atol=atol, rtol=rtol):
            matches = False
    return Verdict("agreed" if matches else "wrong", values)


def summarize(verdicts: Sequence[Verdict], cases: Sequence[Case], targets: Sequence[Case],
              indices: Sequence[int], feedback_cases: int, abstains: bool) -> dict[str, Any]:
    """The report of one program on one set of cases (fields in ``FIELDS``).

    ``failures`` lists up to ``feedback_cases`` wrong or erroring cases, in case order,
    with the case's workload index, inputs, expected and produced outputs and the error.
    """
    counts = dict.fromkeys(VERDICTS, 0)
    failures: list[dict[str, Any]] = []
    for verdict, case, target, index in zip(verdicts, cases, targets, indices):
        counts[verdict.kind] += 1
        if verdict.kind in ("wrong", "error") and len(failures) < feedback_cases:
            failures.append({
                "case": int(index),
                "inputs": to_json(case),
                "expected": to_json(target),
                "produced": None if verdict.produced is None else json_safe(
                    to_json(verdict.produced)),
                "error": verdict.error,
            })
    total = len(verdicts)
    covered = counts["agreed"] + counts["wrong"]
    return {
        "cases": total,
        "covered": covered,
        "uncovered": counts["uncovered"],
        "agreed": counts["agreed"],
        "wrong": counts["wrong"],
        "errors": counts["error"],
        "coverage": covered / total if total else 0.0,
        "precision": counts["agreed"] / covered if covered else None,
        "agreement": counts["agreed"] / total if total else 0.0,
        "failures": failures,
        "abstains": bool(abstains),
    }


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats spelled ``"nan"``, ``"inf"`` or ``"-inf"``, so a
    failing program's output can be reported and saved as strict JSON."""
    if isinstance(value, float):
        return value if np.isfinite(value) else str(value)
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    return value


def teacher_vs_truth(targets: Sequence[Case], truth: Sequence[Case], outputs: Contract,
                     atol: float, rtol: float) -> dict[str, Any]:
    """How often the teacher itself matches the ground truth on the same cases."""
    agreed = sum(all(np.allclose(t[name], g[name], atol=atol, rtol=rtol) for name in outputs)
                 for t, g in zip(targets, truth))
    total = len(targets)
    return {"cases": total, "agreed": int(agreed), "wrong": total - int(agreed),
            "agreement": agreed / total if total else 0.0}


def one_line(report: Mapping[str, Any]) -> str:
    """A report's counts as one sentence (for feedback to the author and for logs)."""
    precision = report["precision"]
    shown = "n/a" if precision is None else f"{precision:.3f}"
    return (f"cases {report['cases']}, covered {report['covered']} (agreed {report['agreed']},"
            f" wrong {report['wrong']}), uncovered {report['uncovered']}, runtime errors "
            f"{report['errors']}; coverage {report['coverage']:.3f}, precision {shown}")

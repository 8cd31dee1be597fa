"""``distill``: from a teacher's answers on a workload to a scored subset program."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..compiler.backends import DEFAULT_BACKEND, check_backend
from ..errors import DistillationError, TensorCodeError
from . import program as programs
from .attempts import FEEDBACK_POLICY, Attempt, CaseSet, failure_message, score, search, select
from .cases import (
    SPLITS,
    Case,
    Contract,
    case_key,
    infer_contract,
    normalize_cases,
    normalize_contract,
    split_by_input,
)
from .cases import split as split_positions
from .report import teacher_vs_truth
from .result import Distillation
from .spec import SUBSET_SPEC


@programs.accepts_runner
def distill(task: str, inputs: Mapping[str, Any], workload: Sequence[Mapping[str, Any]],
            targets: Sequence[Mapping[str, Any]] | None = None,
            oracle: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None, *,
            author: Any, attempts: int = 4, holdout: float = 0.5, seed: int = 0,
            min_coverage: float = 0.0, truth: Sequence[Mapping[str, Any]] | None = None,
            atol: float = 1e-6, rtol: float = 1e-6, feedback_cases: int = 8,
            examples: int = 64, executor: str = DEFAULT_BACKEND, split: str = "input",
            runner: Any = None, deadline: float | None = None,
            progress: bool = True) -> Distillation:
    """Distill the teacher's behaviour on ``workload`` into a subset program.

    Exactly one of ``targets`` (one output dict per workload case) or ``oracle`` (called
    once per case with the inputs) gives the teacher's answers. The workload is split by
    ``seed``: a ``holdout`` share becomes acceptance cases the author never sees; the
    rest are design cases, of which the first ``examples`` are shown in each prompt.
    ``split="input"`` (the default) holds out a share of the distinct inputs, so an input
    that repeats in the workload is never both shown and accepted on ("never shown"
    holds for inputs); ``split="case"`` holds out positions, as earlier versions did.
    ``truth`` (one output dict per workload case) adds program-vs-truth and
    teacher-vs-truth scores on the acceptance cases. ``author`` is a ``Model`` or a
    callable from prompt text to reply text. Raises ``DistillationError`` (carrying every
    attempt) when no attempt compiles or none reaches ``min_coverage``. ``runner``: where
    attempts are scored over cases (``None``: here; see ``programs.accepts_runner``).
    ``deadline`` bounds the author loop in seconds: each request is told what is left
    (``ModelRequest.deadline``, which ``OpenAICompatibleModel`` honours on top of its own
    per-completion ``deadline``) and no attempt starts after it has passed.
    ``progress`` shows a bar of the attempts when stderr is a terminal.
    """
    if not isinstance(task, str) or not task.strip():
        raise TensorCodeError("task must be a non-empty description of what to compute")
    _check_settings(attempts, min_coverage, atol, rtol, feedback_cases, examples, executor)
    if deadline is not None and not (isinstance(deadline, (int, float))
                                     and not isinstance(deadline, bool) and deadline > 0):
        raise TensorCodeError(f"deadline must be positive seconds or None, got {deadline!r}")
    if split not in SPLITS:
        raise TensorCodeError(f"split must be one of {list(SPLITS)}, got {split!r}")
    input_contract = normalize_contract(inputs, "inputs")
    cases = normalize_cases(workload, input_contract, "workload")
    answers = _teacher_answers(cases, targets, oracle)
    outputs = infer_contract(answers, "targets" if targets is not None else "oracle answers")
    answers = normalize_cases(answers, outputs, "targets" if targets is not None else
                              "oracle answers")
    truths = None
    if truth is not None:
        if len(truth) != len(cases):
            raise TensorCodeError(f"truth has {len(truth)} entries for {len(cases)} workload "
                                  "cases; give one output dict per case")
        truths = normalize_cases(truth, outputs, "truth")
    if split == "input":
        design_ix, acceptance_ix = split_by_input(cases, holdout, seed)
    else:
        design_ix, acceptance_ix = split_positions(len(cases), holdout, seed)
    design = CaseSet(design_ix, [cases[i] for i in design_ix], [answers[i] for i in design_ix])
    acceptance = CaseSet(acceptance_ix, [cases[i] for i in acceptance_ix],
                         [answers[i] for i in acceptance_ix],
                         None if truths is None else [truths[i] for i in acceptance_ix])
    settings = {"atol": atol, "rtol": rtol, "min_coverage": min_coverage,
                "feedback_cases": feedback_cases, "examples": examples, "holdout": holdout,
                "seed": seed, "attempts": attempts, "split": split}

    programs.check_executor(executor)
    made = search(task=task, inputs=input_contract, outputs=outputs, author=author,
                  attempts=attempts, design=design, examples=examples, atol=atol, rtol=rtol,
                  feedback_cases=feedback_cases, min_coverage=min_coverage, executor=executor,
                  spec=SUBSET_SPEC, deadline=deadline, progress=progress)
    chosen = select(made, min_coverage)
    if chosen is None:
        raise DistillationError(failure_message(made, min_coverage),
                                [a.to_json() for a in made])
    report = build_report(chosen, made, design, acceptance, outputs, settings)
    report["split"] = {"seed": seed, "holdout": holdout, "by": split,
                       "design": len(design), "acceptance": len(acceptance),
                       "distinct_inputs": {"design": _distinct(design.cases),
                                           "acceptance": _distinct(acceptance.cases)},
                       "rule": SPLIT_RULES[split]}
    return Distillation(task=task, inputs=input_contract, outputs=outputs,
                        program=chosen.program, source=chosen.scored().source, report=report,
                        attempts=[a.to_json() for a in made], design=design,
                        acceptance=acceptance, settings=settings,
                        abstains=chosen.scored().abstains,
                        executor=executor)


def build_report(chosen: Attempt, made: Sequence[Attempt], design: CaseSet,
                 acceptance: CaseSet, outputs: Contract, settings: Mapping[str, Any],
                 program: Any = None, abstains: bool | None = None) -> dict[str, Any]:
    """The report of the selected program: its design report, one scoring on the
    acceptance cases, the policy in words, the attempts, and the truth separation."""
    program = chosen.program if program is None else program
    if abstains is None:
        abstains = chosen.scored().abstains
    atol, rtol, feedback = settings["atol"], settings["rtol"], settings["feedback_cases"]
    accepted = score(program, abstains, acceptance, outputs, atol, rtol, feedback)
    report: dict[str, Any] = {
        "design": chosen.scored().design if program is chosen.program else
        score(program, abstains, design, outputs, atol, rtol, feedback),
        "acceptance": accepted,
        "feedback_policy": FEEDBACK_POLICY.format(**settings),
        "selected_attempt": chosen.number,
        "attempts": [a.summary() for a in made],
    }
    if acceptance.truth is not None:
        report["truth"] = {
            "program_vs_teacher": accepted,
            "program_vs_truth": score(program, abstains, acceptance, outputs, atol, rtol,
                                      feedback, against=acceptance.truth),
            "teacher_vs_truth": teacher_vs_truth(acceptance.targets, acceptance.truth, outputs,
                                                 atol, rtol),
        }
    return report


#: what the report says about the split it used
SPLIT_RULES = {
    "input": "by distinct input: every case whose inputs equal a held-out case's inputs is "
             "an acceptance case, so no acceptance input appears among the design cases "
             "shown to the author",
    "case": "by position: a repeated input can be both a design case shown to the author "
            "and an acceptance case",
}


def _distinct(cases: Sequence[Case]) -> int:
    return len({case_key(case) for case in cases})


def _teacher_answers(cases: list[Case], targets: Any, oracle: Any) -> list[Any]:
    if (targets is None) == (oracle is None):
        raise TensorCodeError("give exactly one of targets= (one output dict per case) or "
                              "oracle= (a callable from inputs to an output dict)")
    if targets is not None:
        if isinstance(targets, Mapping) or not isinstance(targets, Sequence):
            raise TensorCodeError("targets must be a list with one output dict per case")
        if len(targets) != len(cases):
            raise TensorCodeError(f"targets has {len(targets)} entries for {len(cases)} "
                                  "workload cases; give one output dict per case")
        return list(targets)
    if not callable(oracle):
        raise TensorCodeError("oracle must be callable from an inputs dict to an output dict")
    return [oracle(dict(case)) for case in cases]


def _check_settings(attempts: Any, min_coverage: Any, atol: Any, rtol: Any,
                    feedback_cases: Any, examples: Any, executor: Any) -> None:
    if not isinstance(attempts, int) or attempts < 1:
        raise TensorCodeError(f"attempts must be a positive integer, got {attempts!r}")
    if not (isinstance(min_coverage, (int, float)) and 0.0 <= min_coverage <= 1.0):
        raise TensorCodeError(f"min_coverage must be between 0 and 1, got {min_coverage!r}")
    for name, value in (("atol", atol), ("rtol", rtol)):
        if not (isinstance(value, (int, float)) and value >= 0):
            raise TensorCodeError(f"{name} must be a non-negative number, got {value!r}")
    for name, value in (("feedback_cases", feedback_cases), ("examples", examples)):
        if not isinstance(value, int) or value < 0:
            raise TensorCodeError(f"{name} must be a non-negative integer, got {value!r}")
    check_backend(executor, "executor")

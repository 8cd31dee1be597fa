"""One attempt of the author loop, the selection rule and the search over attempts.

``search`` is shared by ``distill`` and ``repair``: it asks the author, parses and
compiles the reply (never executing it), scores the program on the design cases and
feeds the result back, until a program is acceptable or the attempts run out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import LoweringError, TensorCodeError
from ..integrations.model import ModelRequest, ask
from ..runtime.progress import progress_bar
from . import program as programs
from .cases import Case, Contract
from .prompt import build_prompt
from .report import judge, one_line, summarize

FEEDBACK_POLICY = (
    "Design cases are shown to the author with the teacher's outputs; acceptance cases are "
    "never shown. Each attempt is compiled (never executed) and scored on the design cases; "
    "the author then sees, for every earlier attempt, its source, its compile error or its "
    "design counts and up to {feedback_cases} failing design cases (inputs, teacher output, "
    "program output or runtime error). The loop stops early at the first attempt with no "
    "wrong answer while covered, no runtime error and design coverage of at least "
    "{min_coverage:g}. Among attempts that compiled and reach that coverage, the one with "
    "the fewest wrong-while-covered design cases is selected, then the fewest runtime "
    "errors, then the highest design coverage, then the earliest. Only the selected "
    "program is scored on the acceptance cases, once, after the loop.")


class Scored(NamedTuple):
    """What every attempt that reached the ``scored`` stage has: its source, its design
    report and whether the program can abstain."""

    source: str
    design: dict[str, Any]
    abstains: bool


@dataclass
class Attempt:
    """One reply and what became of it. ``stage`` is how far it got: ``author`` (the
    author failed), ``parse``, ``compile`` (``error`` says why), ``lower`` (the program
    compiled but the backend could not lower it: TensorCode's limitation, not the
    author's mistake) or ``scored``."""

    number: int
    prompt: str
    phase: str = "distill"
    reply: str | None = None
    source: str | None = None
    parameters: dict[str, Any] | None = None
    stage: str = "author"
    error: str | None = None
    design: dict[str, Any] | None = None
    abstains: bool | None = None
    note: str | None = None
    program: Any = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The attempt as JSON-safe data, for ``Distillation.attempts``."""
        return {"number": self.number, "phase": self.phase, "stage": self.stage,
                "prompt": self.prompt, "reply": self.reply, "source": self.source,
                "parameters": self.parameters, "error": self.error, "design": self.design,
                "abstains": self.abstains, "note": self.note}

    def design_report(self) -> dict[str, Any]:
        """The design report of a scored attempt; asking an attempt that stopped earlier
        is a programming error, reported as ``TensorCodeError``."""
        if self.design is None:
            raise TensorCodeError(f"attempt {self.number} stopped at stage {self.stage!r}; "
                                  "only a scored attempt has a design report")
        return self.design

    def scored(self) -> Scored:
        """The source, design report and abstention of a scored attempt (the selected
        one); asking an attempt that stopped earlier is a programming error."""
        if self.source is None or self.abstains is None:
            raise TensorCodeError(f"attempt {self.number} stopped at stage {self.stage!r}; "
                                  "only a scored attempt has a source and a program")
        return Scored(self.source, self.design_report(), self.abstains)

    def summary(self) -> dict[str, Any]:
        """The attempt without its prompt and failures, for the report."""
        return {"number": self.number, "phase": self.phase, "stage": self.stage,
                "error": self.error, "note": self.note,
                "design": None if self.design is None else one_line(self.design)}


def eligible(attempt: Attempt, min_coverage: float) -> bool:
    """Whether the attempt was scored and claims at least ``min_coverage`` of the cases."""
    return attempt.stage == "scored" and attempt.design_report()["coverage"] >= min_coverage


def rank(attempt: Attempt) -> tuple:
    """Smaller is better: wrong while covered, runtime errors, then coverage, then order."""
    design = attempt.design_report()
    return (design["wrong"], design["errors"], -design["coverage"], attempt.number)


def acceptable(attempt: Attempt, min_coverage: float) -> bool:
    """Whether the search may stop here: eligible, never wrong while covered, no errors."""
    if not eligible(attempt, min_coverage):
        return False
    design = attempt.design_report()
    return design["wrong"] == 0 and design["errors"] == 0


def select(attempts: Sequence[Attempt], min_coverage: float) -> Attempt | None:
    """The best eligible attempt by ``rank``, or ``None``."""
    candidates = [a for a in attempts if eligible(a, min_coverage)]
    return min(candidates, key=rank) if candidates else None


@dataclass
class CaseSet:
    """Cases with the teacher's outputs; ``indices`` are their positions in the workload
    (repairs continue the numbering) and ``truth`` optional ground truth."""

    indices: list[int]
    cases: list[Case]
    targets: list[Case]
    truth: list[Case] | None = None

    def __len__(self) -> int:
        return len(self.cases)


def score(program: Any, abstains: bool, cases: CaseSet, outputs: Contract, atol: float,
          rtol: float, feedback_cases: int, against: Sequence[Case] | None = None
          ) -> dict[str, Any]:
    """The report of ``program`` on ``cases`` (against the teacher, or ``against``)."""
    expected = list(against) if against is not None else cases.targets
    produced = programs.run_cases(program, cases.cases)
    verdicts = [judge(p, t, outputs, atol, rtol) for p, t in zip(produced, expected)]
    return summarize(verdicts, cases.cases, expected, cases.indices, feedback_cases, abstains)


def search(*, task: str, inputs: Contract, outputs: Contract, author: Any, attempts: int,
           design: CaseSet, examples: int, atol: float, rtol: float, feedback_cases: int,
           min_coverage: float, executor: str, spec: str, phase: str = "distill",
           first_number: int = 1, starting: Mapping[str, Any] | None = None,
           history: Sequence[Attempt] = (), deadline: float | None = None,
           progress: bool = True) -> list[Attempt]:
    """Run up to ``attempts`` author attempts on the design cases; returns them all.

    The loop ends early at an acceptable attempt, or when the author itself fails (the
    failure is recorded as the last attempt and the attempts so far are kept).
    ``deadline`` bounds the whole search in seconds: each request carries what is left
    of it (``ModelRequest.deadline``), and once it has passed no further attempt starts
    (the attempt that would have is recorded with an error saying so). ``progress``
    shows a bar of the attempts on a terminal (``runtime.progress``).
    """
    bar = progress_bar(attempts, phase, progress, unit="attempt")
    try:
        made = _search(task=task, inputs=inputs, outputs=outputs, author=author,
                       attempts=attempts, design=design, examples=examples, atol=atol,
                       rtol=rtol, feedback_cases=feedback_cases, min_coverage=min_coverage,
                       executor=executor, spec=spec, phase=phase, first_number=first_number,
                       starting=starting, history=history, deadline=deadline, bar=bar)
        if bar is not None:
            bar.update(len(made) - bar.n)
            bar.set_postfix(last=made[-1].stage if made else "none", refresh=False)
        return made
    finally:
        if bar is not None:
            bar.close()


def _search(*, task: str, inputs: Contract, outputs: Contract, author: Any, attempts: int,
            design: CaseSet, examples: int, atol: float, rtol: float, feedback_cases: int,
            min_coverage: float, executor: str, spec: str, phase: str, first_number: int,
            starting: Mapping[str, Any] | None, history: Sequence[Attempt],
            deadline: float | None, bar: Any) -> list[Attempt]:
    shown = list(zip(design.cases, design.targets))[:max(0, examples)]
    made: list[Attempt] = []
    ends = None if deadline is None else time.monotonic() + deadline
    for number in range(first_number, first_number + attempts):
        if bar is not None and made:
            bar.update(1)
            bar.set_postfix(last=made[-1].stage, refresh=False)
        prompt = build_prompt(task=task, inputs=inputs, outputs=outputs, spec=spec,
                              examples=shown, history=[*history, *made], atol=atol, rtol=rtol,
                              min_coverage=min_coverage, starting=starting)
        attempt = Attempt(number=number, prompt=prompt, phase=phase)
        made.append(attempt)
        remaining = None if ends is None else ends - time.monotonic()
        if remaining is not None and remaining <= 0:
            attempt.error = (f"not asked: the deadline of {deadline:g} s for this call "
                             "passed before the attempt started")
            break
        try:
            attempt.reply = ask(author, ModelRequest(prompt=prompt, deadline=remaining,
                                                     metadata={"attempt": number}))
        except Exception as error:  # the author is outside TensorCode; record and stop
            attempt.error = f"the author failed: {type(error).__name__}: {error}"
            break
        attempt.stage = "parse"
        try:
            source, parameters = programs.parse_reply(attempt.reply)
            attempt.source = source
            attempt.parameters = programs.parameters_to_json(parameters)
            attempt.stage = "compile"
            program, abstains = programs.compile_program(source, parameters, inputs, outputs,
                                                         executor)
        except LoweringError as error:
            attempt.stage = "lower"
            attempt.error = (f"the program compiled, but TensorCode's {executor} backend "
                             f"could not lower it (a TensorCode limitation, not a mistake in "
                             f"the program): {error}")
            continue
        except TensorCodeError as error:
            attempt.error = f"did not compile: {error}"
            continue
        attempt.stage = "scored"
        attempt.program = program
        attempt.abstains = abstains
        attempt.design = score(program, abstains, design, outputs, atol, rtol, feedback_cases)
        if attempt.design["coverage"] < min_coverage:
            attempt.note = (f"Coverage {attempt.design['coverage']:.3f} is below the required "
                            f"{min_coverage:g}; claim more cases.")
        if not abstains:
            attempt.note = ((attempt.note + " ") if attempt.note else "") + (
                "The program returns no 'covered' output, so it claims every case.")
        if acceptable(attempt, min_coverage):
            break
    return made


def failure_message(attempts: Sequence[Attempt], min_coverage: float) -> str:
    """Why no attempt was selected, one line per attempt, for ``DistillationError``."""
    lines = []
    for a in attempts:
        if a.stage == "scored":
            lines.append(f"attempt {a.number}: design {one_line(a.design_report())}")
        else:
            lines.append(f"attempt {a.number}: {a.error}")
    compiled = any(a.stage == "scored" for a in attempts)
    if attempts and all(a.reply is None for a in attempts):
        head = "no attempt got an answer from the author"
    elif compiled:
        head = f"no attempt reached the required design coverage of {min_coverage:g}"
    elif any(a.stage == "lower" for a in attempts):
        head = ("no attempt produced a program this backend could run (a program compiled "
                "but the backend failed to lower it; executor='reference' runs it)")
    else:
        head = "no attempt produced a program that compiles"
    return (head + "; every attempt is in error.attempts (prompt, reply, error):\n  "
            + "\n  ".join(lines or ["no attempt was made (attempts=0?)"]))

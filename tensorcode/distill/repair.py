"""``repair``: revise a deployed program with the cases it escalated.

New cases join the design set; a case identical to a hidden acceptance case is dropped
(and counted), because showing it to the author would leak the acceptance set. The
deployed program competes with the revisions under the same selection rule, so a repair
never replaces a program with a worse one on the design cases, and the winner is scored
on the unchanged acceptance set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import TensorCodeError
from . import program as programs
from .attempts import Attempt, CaseSet, score, search, select
from .cases import case_key, paired_cases
from .loop import build_report
from .report import one_line
from .result import Distillation
from .spec import SUBSET_SPEC


@programs.accepts_runner
def repair(program: Distillation, author: Any, cases: Sequence[Mapping[str, Any]],
           targets: Sequence[Mapping[str, Any]], attempts: int = 3, *,
           examples: int | None = None, runner: Any = None) -> Distillation:
    """A revised ``Distillation``: ``cases`` with the fallback's ``targets`` are added to
    the design set, the author is shown the deployed program as its starting point, and
    the best of the deployed program and the revisions is scored on the same hidden
    acceptance cases. ``report["repair"]`` says what was added, excluded and selected.
    ``runner``: where attempts are scored over cases, as in ``distill``."""
    if not isinstance(program, Distillation):
        raise TensorCodeError(f"repair needs a Distillation (distill(...) or "
                              f"Distillation.load(dir)), got {type(program).__name__}")
    if not isinstance(attempts, int) or attempts < 1:
        raise TensorCodeError(f"attempts must be a positive integer, got {attempts!r}")
    new_cases, new_targets = paired_cases(cases, targets, program.inputs, program.outputs)
    hidden = {case_key(c) for c in program.acceptance.cases}
    kept = [(c, t) for c, t in zip(new_cases, new_targets) if case_key(c) not in hidden]
    excluded = len(new_cases) - len(kept)
    first_index = 1 + max([*program.design.indices, *program.acceptance.indices], default=-1)
    design = CaseSet([*program.design.indices, *range(first_index, first_index + len(kept))],
                     [*program.design.cases, *(c for c, _ in kept)],
                     [*program.design.targets, *(t for _, t in kept)])
    settings = dict(program.settings)
    settings["examples"] = settings.get("examples", 64) if examples is None else examples
    settings.setdefault("min_coverage", 0.0)
    atol, rtol = settings["atol"], settings["rtol"]
    feedback, min_coverage = settings["feedback_cases"], settings["min_coverage"]
    # the new cases come first among the examples so the author sees what was missed
    shown = CaseSet([*design.indices[len(program.design):], *design.indices[:len(program.design)]],
                    [*design.cases[len(program.design):], *design.cases[:len(program.design)]],
                    [*design.targets[len(program.design):],
                     *design.targets[:len(program.design)]])
    deployed = Attempt(number=0, prompt="", phase="deployed", source=program.source,
                       parameters=programs.parameters_to_json(program.parameters),
                       stage="scored", abstains=program.abstains)
    deployed.program = program.program
    deployed.design = score(program.program, program.abstains, design, program.outputs, atol,
                            rtol, feedback)
    starting = {"source": program.source, "summary": one_line(deployed.design),
                "parameters": deployed.parameters,
                "parameters_json": json.dumps(deployed.parameters)}

    made = search(task=program.task, inputs=program.inputs, outputs=program.outputs,
                  author=author, attempts=attempts, design=shown,
                  examples=settings["examples"], atol=atol, rtol=rtol, feedback_cases=feedback,
                  min_coverage=min_coverage, executor=program.executor, spec=SUBSET_SPEC,
                  phase="repair", first_number=1 + len(program.attempts), starting=starting)
    for attempt in made:  # rescore in design order so reports list failures consistently
        if attempt.stage == "scored":
            attempt.design = score(attempt.program, attempt.scored().abstains, design,
                                   program.outputs, atol, rtol, feedback)
    # the deployed program stays when no revision is eligible (it is what is serving)
    chosen = select([deployed, *made], min_coverage) or deployed
    report = build_report(chosen, [deployed, *made], design, program.acceptance,
                          program.outputs, settings)
    report["repair"] = {
        "added": len(kept), "excluded_hidden": excluded, "offered": len(new_cases),
        "deployed_design": one_line(deployed.design),
        "selected": "deployed" if chosen is deployed else f"attempt {chosen.number}",
        "acceptance_before": program.report.get("acceptance"),
    }
    report["split"] = dict(program.report.get("split", {}), design=len(design))
    return Distillation(task=program.task, inputs=program.inputs, outputs=program.outputs,
                        program=chosen.program, source=chosen.scored().source, report=report,
                        attempts=[*program.attempts, *(a.to_json() for a in made)],
                        design=design, acceptance=program.acceptance, settings=settings,
                        abstains=chosen.scored().abstains, executor=program.executor)

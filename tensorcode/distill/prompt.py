"""The text an author receives for one attempt.

Everything in a prompt comes from the design cases, the previous attempts on them and
the contracts: acceptance cases never reach this module (the loop passes design data
only, and the tests check every prompt for acceptance inputs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .cases import COVERED, Case, Contract, format_case
from .report import one_line

#: the longest previous program quoted back to the author, in characters
MAX_QUOTED_SOURCE = 6000


def describe_contract(contract: Contract) -> str:
    """The contract as prompt lines, one per name with its shape."""
    lines = []
    for name, shape in contract.items():
        lines.append(f"- {name}: float, shape {list(shape)}" + (" (a scalar)" if not shape else ""))
    return "\n".join(lines)


def build_prompt(*, task: str, inputs: Contract, outputs: Contract, spec: str,
                 examples: Sequence[tuple[Case, Case]], history: Sequence[Any],
                 atol: float, rtol: float, min_coverage: float,
                 starting: Mapping[str, Any] | None = None) -> str:
    """One attempt's prompt: task, contracts, the language, design examples with the
    teacher's outputs, the previous attempts' results and, for a repair, the deployed
    program as the starting point."""
    arguments = ", ".join(inputs)
    returned = ", ".join(f'"{name}": ...' for name in outputs)
    sections = [
        "# Task", task.strip(), "",
        "# Contract",
        f"Write one function `def program({arguments}, <parameters>)` in the language below.",
        "Inputs:", describe_contract(inputs),
        "Outputs (the teacher's, compared within "
        f"atol={atol:g}, rtol={rtol:g}):", describe_contract(outputs),
        f"- {COVERED}: float, a scalar: 1.0 when the program claims the input, 0.0 when the "
        "input should go to the fallback.",
        f'Return them as one dict: return {{{returned}, "{COVERED}": ...}}.',
        "A wrong answer while covered is the failure to avoid; abstaining (covered 0.0) is "
        "allowed and costs one fallback call. Runtime errors count as failures.",
    ]
    if min_coverage > 0:
        sections.append(f"The program must claim at least {min_coverage:.0%} of the cases.")
    sections += ["", "# Language", spec.strip(), ""]
    sections.append(f"# Examples ({len(examples)} cases with the teacher's outputs)")
    for case, target in examples:
        sections.append(f"{format_case(case)} -> {format_case(target)}")
    if starting is not None:
        sections += ["", "# Starting point: the deployed program",
                     "Revise this program; the new cases it missed are among the examples.",
                     f"On the examples: {starting['summary']}",
                     "```python", _quoted(starting["source"]), "```"]
        if starting.get("parameters"):
            sections += ["```json", starting["parameters_json"], "```"]
    if history:
        sections += ["", "# Previous attempts"]
        for attempt in history:
            sections += attempt_feedback(attempt)
    sections += ["", "# Reply",
                 "Reply with the program in one ```python block and, if it takes parameters, "
                 "their starting values in one ```json block mapping each name to a number "
                 "or nested list."]
    return "\n".join(sections) + "\n"


def attempt_feedback(attempt: Any) -> list[str]:
    """What the author is told about one earlier attempt (design cases only)."""
    lines = [f"## Attempt {attempt.number}"]
    if attempt.source:
        lines += ["```python", _quoted(attempt.source), "```"]
    if attempt.stage != "scored":
        lines.append(f"Result: {attempt.error}")
        return lines
    lines.append(f"Result on the examples: {one_line(attempt.design)}")
    if attempt.note:
        lines.append(attempt.note)
    for failure in attempt.design["failures"]:
        produced = failure["error"] or format_case(
            dict(failure["produced"] or {}))
        lines.append(f"- inputs {format_case(failure['inputs'])}: teacher "
                     f"{format_case(failure['expected'])}; program {produced}")
    return lines


def _quoted(source: str) -> str:
    source = source.strip("\n")
    if len(source) > MAX_QUOTED_SOURCE:
        return source[:MAX_QUOTED_SOURCE] + "\n# ... (truncated)"
    return source

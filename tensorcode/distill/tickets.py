"""The measured example: distilling a ticket-routing policy into a keyword program.

240 support tickets are generated from a fixed vocabulary. A ticket's features are
twelve 0/1 indicators, one per keyword of a fixed lexicon (three keywords for each of
four routes). The teacher is an authored policy over the ticket's whole text: when the
ticket names a keyword it routes by the keyword groups (most distinct keywords wins,
ties to the lower route); when it names none it routes by cue words the lexicon does not
contain, which the program cannot see. The author's replies are recorded in
``data/route_tickets_replies.json``: the first indexes with ``[]`` and fails to compile,
the second routes by keyword groups and abstains on tickets without a keyword.

``run_example(save_dir)`` runs the loop, saves the program where ``tensorcode route``
can serve it, serves 200 fresh tickets through a ``Router`` with the teacher as the
fallback, and returns the guide's table with the values measured in this run.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..compiler.backends import REFERENCE
from ..integrations import RecordedModel
from .loop import distill
from .result import ARTIFACT, Distillation

ROUTES = ("billing", "technical", "account", "shipping")
#: the lexicon the program sees: three keywords per route, in route order
KEYWORDS = ("refund", "invoice", "charged",
            "error", "crash", "bug",
            "password", "login", "locked",
            "delivery", "tracking", "package")
#: words only the teacher reads: they decide tickets that name no keyword
CUES = (("money", "price", "pay"),
        ("slow", "broken", "freezes"),
        ("profile", "email", "access"),
        ("arrive", "courier", "address"))
FILLER = ("hello", "please", "help", "today", "my", "the", "thanks", "urgent", "order",
          "again", "still", "since", "yesterday", "with", "is", "not", "can", "you")

TASK = ("Route a customer support ticket to one of four teams from twelve 0/1 keyword "
        "indicators. features[0:3] are the billing keywords (refund, invoice, charged), "
        "features[3:6] technical (error, crash, bug), features[6:9] account (password, "
        "login, locked), features[9:12] shipping (delivery, tracking, package); each is 1.0 "
        "when the ticket contains the word. Return route 0.0 billing, 1.0 technical, 2.0 "
        "account or 3.0 shipping. Tickets are routed by much more than these keywords; "
        "claim only the tickets the keywords decide and leave the others to the fallback.")

REPLIES = "route_tickets_replies.json"
WORKLOAD_SEED = 2024
FRESH_SEED = 7
WORKLOAD_SIZE = 240
FRESH_SIZE = 200


@dataclass(frozen=True)
class Ticket:
    """One generated support ticket and the route it was written for."""

    text: str
    topic: int  # the route the ticket was written for: the ground truth


def generate(count: int, seed: int) -> list[Ticket]:
    """``count`` tickets from a seeded generator: about two thirds name a keyword of
    their topic (sometimes a second one, sometimes one of another topic), the rest only
    cue and filler words."""
    rng = np.random.default_rng(seed)
    tickets = []
    for _ in range(count):
        topic = int(rng.integers(4))
        words = list(rng.choice(FILLER, size=int(rng.integers(3, 7))))
        words += list(rng.choice(CUES[topic], size=int(rng.integers(1, 3))))
        if rng.random() < 0.68:
            own = KEYWORDS[3 * topic:3 * topic + 3]
            words += list(rng.choice(own, size=1 + int(rng.random() < 0.3), replace=False))
            if rng.random() < 0.2:
                other = int((topic + 1 + rng.integers(3)) % 4)
                words.append(str(rng.choice(KEYWORDS[3 * other:3 * other + 3])))
        rng.shuffle(words)
        tickets.append(Ticket(" ".join(str(w) for w in words), topic))
    return tickets


def features(text: str) -> np.ndarray:
    """The twelve keyword indicators of a ticket: what the program sees."""
    words = set(text.split())
    return np.array([1.0 if k in words else 0.0 for k in KEYWORDS])


def teacher(text: str) -> float:
    """The authored policy standing in for a large model: it reads the whole text."""
    words = text.split()
    present = set(words)
    groups = [sum(k in present for k in KEYWORDS[3 * r:3 * r + 3]) for r in range(4)]
    if max(groups) > 0:
        return float(int(np.argmax(groups)))  # argmax takes the lowest route on ties
    cues = [sum(words.count(c) for c in CUES[r]) for r in range(4)]
    return float(int(np.argmax(cues)))


def replies_path() -> Path:
    """The recorded author replies that ship with the package."""
    return Path(str(resources.files("tensorcode.distill").joinpath("data", REPLIES)))


def run_example(save_dir: str | os.PathLike) -> list[str]:
    """Distill, save to ``save_dir``, serve fresh tickets; the table's lines."""
    tickets = generate(WORKLOAD_SIZE, WORKLOAD_SEED)
    workload = [{"features": features(t.text)} for t in tickets]
    targets = [{"route": teacher(t.text)} for t in tickets]
    truth = [{"route": float(t.topic)} for t in tickets]
    author = RecordedModel(replies_path())
    result = distill(TASK, inputs={"features": (12,)}, workload=workload, targets=targets,
                     author=author, attempts=4, holdout=0.5, seed=0, min_coverage=0.5,
                     truth=truth)
    save_dir = Path(save_dir)
    result.save(save_dir)
    program = Distillation.load(save_dir)

    fresh = generate(FRESH_SIZE, FRESH_SEED)
    current: dict[str, Any] = {}
    router = program.router(lambda inputs: {"route": teacher(current["text"])})
    agreed = 0
    for ticket in fresh:
        current["text"] = ticket.text
        answer = router({"features": features(ticket.text)})
        agreed += float(answer["route"]) == teacher(ticket.text)

    escalated = router.rate()
    claimed = next(t for t in fresh if features(t.text).any())
    sample = {"features": features(claimed.text)}
    executor_us = _microseconds(lambda: program.program(sample))
    interpreted = Distillation.load(save_dir, executor=REFERENCE).program
    reference_us = _microseconds(lambda: interpreted(sample), number=100)
    timing_router = program.router(lambda inputs: {"route": teacher(claimed.text)})
    router_us = _microseconds(lambda: timing_router(sample))
    design, acceptance = result.report["design"], result.report["acceptance"]
    separated = result.report["truth"]
    attempts = result.attempts
    failed = [a for a in attempts if a["stage"] != "scored"]
    first_error = failed[0]["error"].splitlines()[0] if failed else ""
    rows = [
        ("Design cases: covered, wrong, uncovered",
         f"{design['cases']}: {design['covered']}, {design['wrong']}, {design['uncovered']}"),
        ("Acceptance cases (never shown): covered, wrong, uncovered",
         f"{acceptance['cases']}: {acceptance['covered']}, {acceptance['wrong']}, "
         f"{acceptance['uncovered']}"),
        ("Fresh tickets served: escalated, agreement with the teacher",
         f"{len(fresh)}: {escalated:.0%}, {agreed / len(fresh):.0%}"),
        ("Artifact", f"{(save_dir / ARTIFACT).stat().st_size:,} bytes"),
        ("CPU reference executor", f"about {_us(reference_us)} per call"),
        (f"CPU {program.executor} executor", f"about {_us(executor_us)} per call "
                                  f"({_us(router_us)} through the router)"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [
        f"Ticket routing: {len(tickets)} generated tickets, twelve keyword indicators, an "
        "authored teacher and recorded author replies",
        f"Author attempts: {len(attempts)}; " + (
            f"attempt {failed[0]['number']} {first_error}; " if failed else "")
        + f"attempt {result.report['selected_attempt']} accepted",
        "",
        f"{'Measure':<{width}}  Value",
        *(f"{name:<{width}}  {value}" for name, value in rows),
        "",
        f"On the acceptance cases the teacher matches the ticket's true topic on "
        f"{separated['teacher_vs_truth']['agreement']:.0%}, the program's claimed answers on "
        f"{_share(separated['program_vs_truth'])} of what it claims.",
        f"Saved to {save_dir}; serve it with: tensorcode route {save_dir} < tickets.jsonl",
    ]
    return lines


def _us(value: float) -> str:
    return f"{value:.1f} microseconds" if value < 10 else f"{value:.0f} microseconds"


def _share(report: dict) -> str:
    precision = report["precision"]
    return "n/a" if precision is None else f"{precision:.0%}"


def _microseconds(call: Any, repeat: int = 7, number: int = 300) -> float:
    """Median microseconds per call over ``repeat`` runs of ``number`` calls."""
    call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            call()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples) * 1e6

"""Train an owned tool, then resume training: the guide's two flows with a Decision.

A ``Decision`` chooses among hypotheses supplied with each input. The script captures
authored examples as an experience (no update), saves and reloads it, fits, writes the
model with ``save_pretrained`` and the training state with ``save_checkpoint``; then, as
a later session would, it rebuilds the tool with ``from_pretrained``, restores the
checkpoint and continues, and checks the resumed run equals an uninterrupted one.

    python examples/tools/decision.py [--backend reference] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import numpy as np

import tensorcode as tc
from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.tools import Decision
from tensorcode.training import Trainer, load_experience

REMEDIES = [{"id": "disk", "text": "free disk space on the host"},
            {"id": "cert", "text": "renew the TLS certificate"},
            {"id": "restart", "text": "restart the stuck service"}]
# inputs: a context and the hypotheses on offer (their number may vary per input)
INPUTS = [{"context": "writes fail: no space left on device", "hypotheses": REMEDIES},
          {"context": "browsers say the certificate expired", "hypotheses": REMEDIES[1:]},
          {"context": "the process hangs but the host is idle", "hypotheses": REMEDIES},
          {"context": "the volume is completely full", "hypotheses": REMEDIES[:2]}]
# targets: a hypothesis id, an index, or a distribution over the supplied hypotheses
TARGETS = ["disk", 0, [0.0, 0.1, 0.9], "disk"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = pathlib.Path(args.workdir or scratch)
        run(work, args.backend)


def adam(backend: str | None):
    """Resuming needs the same optimizer type, so both sessions build it here."""
    return lambda parameters: tc.optim.Adam(backend=backend or DEFAULT_BACKEND)


def run(work: pathlib.Path, backend: str | None) -> None:
    # -- train an owned tool ---------------------------------------------------------------
    model = Decision(dim=16, hidden=16, buckets=1024, seed=0, backend=backend)
    # SGD by default; a factory builds another optimizer over the trainer's parameters
    trainer = Trainer.from_tool(model, lr=0.05, backend=backend, optimizer=adam(backend))
    print(f"training mode after from_tool: {model.training}")
    experience = trainer.capture(INPUTS, TARGETS, source="authored-example:tools-1")
    print(f"captured {len(experience.calls)} call, steps still {trainer.steps}")
    experience.save(work / "experience.json", operations=trainer.operations)
    loaded = load_experience(work / "experience.json", operations=trainer.operations)
    losses = trainer.fit([loaded], epochs=20, progress=False)
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} over {len(losses)} updates")
    model.save_pretrained(work / "model")
    trainer.save_checkpoint(work / "training", progress={"next_example": 4})
    uninterrupted = trainer.fit([loaded], epochs=5, shuffle=False, progress=False)

    # -- resume training (a later session) -------------------------------------------------
    model = Decision.from_pretrained(work / "model", backend=backend)
    trainer = Trainer.from_tool(model, lr=0.05, backend=backend, optimizer=adam(backend))
    progress = trainer.load_checkpoint(work / "training")
    experience = load_experience(work / "experience.json", operations=trainer.operations)
    resumed = trainer.fit([experience], epochs=5, shuffle=False, progress=False)
    print(f"resumed at step {trainer.steps - 5} with progress {progress}")
    print(f"resumed losses equal the uninterrupted run: {resumed == uninterrupted}")

    model.eval()
    for inputs in INPUTS:
        decided = model.decide(inputs)
        shown = ", ".join(f"{i} {p:.2f}" for i, p in zip(decided.ids, decided.probabilities))
        print(f"{inputs['context']!r}: chose {decided.chosen} ({shown})")
    assert np.isclose(decided.probabilities.sum(), 1.0)


if __name__ == "__main__":
    main()

"""Train a Decision and a Planner on authored data sets, report held-out accuracy before
and after, and reload each from ``save_pretrained`` in a fresh process to show the
predictions are identical (part of ``tensorcode demo``).

Each data set (``authored.py``: 320 examples generated from templates written for
TensorCode) is split once (the first 256 examples train, the rest are held out); the
training examples are captured as one batched experience and fitted with Adam, full
batch. ``--predict KIND DIR`` is the fresh process: it loads the saved tools and prints
their held-out predictions as JSON (one process for every tool, so the check pays one
interpreter start).

    python examples/tools/decision_and_planner.py [--backend reference] [--output DIR]
        [--epochs N] [--kind decision|planner]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
from authored import load

from tensorcode import optim
from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.tools import Decision, Planner
from tensorcode.training import Trainer

TRAIN = 256


def _decision_predictions(tool: Decision, examples: list[dict]) -> list[list[float]]:
    results = tool.decide([e["inputs"] for e in examples])
    assert isinstance(results, list)
    return [r.probabilities.tolist() for r in results]


def _planner_predictions(tool: Planner, examples: list[dict]) -> list[list[float]]:
    results = tool.predict_outcomes([e["inputs"] for e in examples])
    assert isinstance(results, list)
    return [list(r.values()) for r in results]


def decision_accuracy(tool: Decision, examples: list[dict]) -> float:
    """The share of examples whose chosen hypothesis is the target."""
    results = tool.decide([e["inputs"] for e in examples])
    assert isinstance(results, list)
    return float(np.mean([r.chosen == e["target"] for r, e in zip(results, examples)]))


def planner_accuracy(tool: Planner, examples: list[dict]) -> float:
    """The share of examples whose top-ranked candidate is the best one."""
    results = tool.plan([e["inputs"] for e in examples])
    best = [r[0].candidate_id if isinstance(r, list) else r.candidate_id for r in results]
    return float(np.mean([b == e["best"] for b, e in zip(best, examples)]))


KINDS: dict[str, Any] = {
    "decision": (Decision, decision_accuracy, _decision_predictions, 16),
    "planner": (Planner, planner_accuracy, _planner_predictions, 30),
}


def train(kind: str, directory: pathlib.Path, lr: float = 0.03, backend: str | None = None,
          epochs: int | None = None) -> tuple[list[str], Any]:
    """Train one tool on its data set and save it to ``directory``; the demo's lines about
    it and its held-out predictions (to compare with a fresh process's)."""
    cls, accuracy, predictions, default_epochs = KINDS[kind]
    epochs = default_epochs if epochs is None else epochs
    examples = load(kind)
    train_set, held_out = examples[:TRAIN], examples[TRAIN:]
    start = time.perf_counter()
    tool = cls(seed=0, backend=backend)
    before = accuracy(tool, held_out)
    trainer = Trainer.from_tool(tool, lr=lr, backend=backend,
                                optimizer=lambda _: optim.Adam(backend=backend or DEFAULT_BACKEND))
    experience = trainer.capture([e["inputs"] for e in train_set],
                                 [e["target"] for e in train_set],
                                 source=f"authored-data:{kind}")
    losses = trainer.fit([experience], epochs=epochs, progress=False)
    tool.eval()
    after = accuracy(tool, held_out)
    tool.save_pretrained(directory)
    elapsed = time.perf_counter() - start
    what = ("chosen hypothesis is the target" if kind == "decision"
            else "top-ranked candidate is the best")
    lines = [f"{cls.__name__}: {len(train_set)} training, {len(held_out)} held-out examples "
             f"(authored templates), {len(losses)} full-batch Adam steps, "
             f"loss {losses[0]:.3f} -> {losses[-1]:.3f} ({elapsed:.1f} s)",
             f"  held-out accuracy ({what}): {before:.1%} before, {after:.1%} after training"]
    return lines, predictions(tool, held_out)


def fresh_predictions(saved: dict[str, pathlib.Path], backend: str | None = None) -> dict:
    """Each saved tool's held-out predictions, computed by one fresh Python process."""
    command = [sys.executable, str(pathlib.Path(__file__).resolve())]
    for kind, directory in saved.items():
        command += ["--predict", kind, str(directory)]
    command += ["--backend", backend] if backend else []
    fresh = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ),
                           check=False)
    if fresh.returncode != 0:
        raise RuntimeError(f"the fresh process failed: {fresh.stderr[-2000:]}")
    return dict(json.loads(fresh.stdout.strip().splitlines()[-1]))


def run_example(output: pathlib.Path, backend: str | None = None,
                epochs: int | None = None, kinds: tuple[str, ...] = tuple(KINDS)
                ) -> list[str]:
    """The demo's tools section: each tool trained, saved, and reloaded in one fresh
    process whose predictions are compared with the trained tool's."""
    lines: list[str] = []
    mine = {}
    for kind in kinds:
        found, mine[kind] = train(kind, output / kind, backend=backend, epochs=epochs)
        lines += found
    fresh = fresh_predictions({kind: output / kind for kind in kinds}, backend)
    for kind in kinds:
        same = fresh.get(kind) == mine[kind]
        lines.append(f"{KINDS[kind][0].__name__}: save_pretrained -> from_pretrained in a "
                     f"fresh process: predictions {'identical' if same else 'DIFFERENT'} "
                     f"({output / kind})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    parser.add_argument("--output", metavar="DIR",
                        help="where to save the trained tools (default: a temporary directory)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="full-batch steps per tool (default: 16 for the Decision, 30 for "
                             "the Planner)")
    parser.add_argument("--kind", action="append", choices=sorted(KINDS),
                        help="train only this tool (repeatable)")
    parser.add_argument("--predict", nargs=2, metavar=("KIND", "DIR"), action="append",
                        help="load a saved tool and print its held-out predictions as JSON "
                             "(repeatable; the fresh process of the check)")
    args = parser.parse_args(argv)
    if args.predict:
        result = {}
        for kind, directory in args.predict:
            if kind not in KINDS:
                parser.error(f"KIND is one of {sorted(KINDS)}")
            cls, _, predictions, _ = KINDS[kind]
            tool = cls.from_pretrained(directory, backend=args.backend)
            result[kind] = predictions(tool, load(kind)[TRAIN:])
        print(json.dumps(result))
        return 0
    kinds = tuple(args.kind or KINDS)
    with tempfile.TemporaryDirectory() as scratch:
        output = pathlib.Path(args.output or scratch)
        print("\n".join(run_example(output, args.backend, args.epochs, kinds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Trace, supervise, save, reload in a fresh process, train, checkpoint and resume.

A hashed n-gram text encoder and a classifier head route support tickets. This script

1. traces the program on labelled tickets and supervises each prediction with its label
   and a provenance string, saving one experience file per ticket;
2. in a fresh process, rebuilds the operations, loads the experiences (validated against
   the operations' fingerprints), trains for half the epochs with Adam and writes a
   directory checkpoint;
3. in another fresh process, loads the checkpoint and trains the remaining epochs;
4. back here, trains the same program without interruption and checks that the resumed
   run ended on bit-identical parameters, then reports accuracy on held-out tickets.

    python examples/trace_and_train.py
    python examples/trace_and_train.py --epochs 20 --backend reference
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

import tensorcode as tc
from tensorcode import trace
from tensorcode.compiler.backends import BACKENDS, DEFAULT_BACKEND
from tensorcode.operations import Classifier, TextEncoder
from tensorcode.training import Trainer, load_experience

LABELS = ["billing", "outage", "account"]
TICKETS = [
    ("I was charged twice for my subscription", "billing"),
    ("please refund the last invoice", "billing"),
    ("my card payment failed but the money is gone", "billing"),
    ("the invoice total is wrong", "billing"),
    ("how do I get a refund for this charge", "billing"),
    ("update the billing address on my invoice", "billing"),
    ("the website is down", "outage"),
    ("the service returns an error page since this morning", "outage"),
    ("the app is not loading at all", "outage"),
    ("your servers seem down again", "outage"),
    ("connection refused when I open the dashboard", "outage"),
    ("everything times out and nothing loads", "outage"),
    ("I forgot my password", "account"),
    ("how do I change my email address", "account"),
    ("please delete my account", "account"),
    ("I cannot log in to my account", "account"),
    ("change the username on my profile", "account"),
    ("reset the password for my login", "account"),
]
HELD_OUT = [
    ("I was charged for an invoice I never got", "billing"),
    ("the dashboard is down and shows an error", "outage"),
    ("I want to change my password", "account"),
    ("refund the double charge please", "billing"),
    ("nothing is loading on the website", "outage"),
    ("delete my profile and my email", "account"),
]


def build(backend: str) -> dict:
    """The program's operations, built the same way in every process."""
    encoder = TextEncoder(16, buckets=2 ** 12, ngrams=(1, 2), seed=1, backend=backend)
    head = Classifier(16, LABELS, seed=2, backend=backend)
    return {"encoder": encoder, "head": head}


def make_trainer(operations: dict, backend: str) -> Trainer:
    return Trainer.from_ops(operations, lr=0.05, backend=backend, seed=0,
                            optimizer=tc.optim.Adam(backend=backend))


def load_all(directory: pathlib.Path, operations: dict) -> list:
    return [load_experience(path, operations=operations)
            for path in sorted(directory.glob("ticket-*.json"))]


def record(directory: pathlib.Path, backend: str) -> None:
    operations = build(backend)
    encoder, head = operations["encoder"], operations["head"]
    directory.mkdir(parents=True, exist_ok=True)
    for k, (text, label) in enumerate(TICKETS):
        session = trace()
        prediction = session.run(lambda: head(encoder(text)))
        session.supervise(prediction, label, source=f"support-team:ticket-{k}")
        session.save(directory / f"ticket-{k:03d}.json", operations=operations, release=True)


def train_stage(workdir: pathlib.Path, backend: str, epochs: int, resume: bool) -> None:
    """Runs in a fresh process: load experiences (and a checkpoint), train, checkpoint."""
    operations = build(backend)
    experiences = load_all(workdir / "experiences", operations)
    trainer = make_trainer(operations, backend)
    done = 0
    if resume:
        done = trainer.load_checkpoint(workdir / "checkpoint")["epochs"]
    losses = trainer.fit(experiences, epochs=epochs, progress=False)
    trainer.save_checkpoint(workdir / "checkpoint", progress={"epochs": done + epochs})
    print(json.dumps({"steps": trainer.steps, "losses": losses}))


def accuracy(operations: dict, tickets: list) -> float:
    encoder, head = operations["encoder"], operations["head"]
    predicted = head.predict(encoder([text for text, _ in tickets]))
    return float(np.mean([p == label for p, (_, label) in zip(predicted, tickets)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=BACKENDS)
    parser.add_argument("--workdir", type=pathlib.Path, default=None)
    parser.add_argument("--stage", choices=["train", "resume"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        train_stage(args.workdir, args.backend, args.epochs, resume=args.stage == "resume")
        return
    workdir = args.workdir or pathlib.Path(tempfile.mkdtemp(prefix="trace-and-train-"))
    record(workdir / "experiences", args.backend)
    print(f"recorded {len(TICKETS)} supervised experiences in {workdir / 'experiences'}")

    first, second = args.epochs // 2, args.epochs - args.epochs // 2
    logs = []
    for stage, epochs in (("train", first), ("resume", second)):
        result = subprocess.run([sys.executable, __file__, "--stage", stage, "--epochs",
                                 str(epochs), "--backend", args.backend, "--workdir",
                                 str(workdir)], check=True, capture_output=True, text=True)
        logs.append(json.loads(result.stdout.strip().splitlines()[-1]))
        print(f"{stage:>6} (fresh process): {epochs} epochs, steps now {logs[-1]['steps']}, "
              f"mean loss of its last epoch {np.mean(logs[-1]['losses'][-len(TICKETS):]):.4f}")

    # the same training without interruption, in this process
    operations = build(args.backend)
    straight = make_trainer(operations, args.backend)
    untrained = accuracy(operations, HELD_OUT)
    losses = straight.fit(load_all(workdir / "experiences", operations), epochs=args.epochs,
                          progress=True)
    resumed_ops = build(args.backend)
    resumed = make_trainer(resumed_ops, args.backend)
    progress = resumed.load_checkpoint(workdir / "checkpoint")
    identical = all(np.array_equal(a, b) for a, b in
                    zip(straight.parameters.payloads(), resumed.parameters.payloads()))
    same_losses = logs[0]["losses"] + logs[1]["losses"] == losses
    per_epoch = [float(np.mean(losses[k:k + len(TICKETS)]))
                 for k in range(0, len(losses), len(TICKETS))]
    print(f"uninterrupted: {args.epochs} epochs, mean loss per epoch "
          f"{per_epoch[0]:.4f} -> {per_epoch[-1]:.4f}")
    print(f"resumed run (progress {progress}) equals the uninterrupted run bit for bit: "
          f"parameters {identical}, losses {same_losses}")
    print(f"training accuracy {accuracy(operations, TICKETS):.2f}; held-out accuracy "
          f"{untrained:.2f} before training, {accuracy(operations, HELD_OUT):.2f} after")
    if not (identical and same_losses):
        sys.exit("the resumed run diverged from the uninterrupted one")


if __name__ == "__main__":
    main()

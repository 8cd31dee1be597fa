"""Train a small ``Chatbot`` on the dialogue ``data/chat.txt`` (written for TensorCode),
print its loss curve in a few points and a reply sampled from a fixed generator seed,
then save and reload it and show the reloaded model gives the same reply from the same
seed (part of ``tensorcode demo``).

``data/chat.txt`` holds turns as line pairs: ``> `` starts what the user says and ``< ``
the reply to it; blank lines are ignored.

    python examples/tools/chatbot_dialogue.py [--backend reference] [--epochs N]
        [--output DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time
from typing import Any

from tensorcode import optim
from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.errors import ArtifactError
from tensorcode.random import Generator
from tensorcode.tools import Chatbot, ChatSession
from tensorcode.training import Trainer

DIALOGUE = pathlib.Path(__file__).resolve().parent / "data" / "chat.txt"

#: the demo's reproducible sample: this prompt, from a generator with this seed
PROMPT = "what is a plan?"
SAMPLE_SEED = 7


def parse_dialogue(text: str, origin: str = "dialogue") -> tuple[list[str], list[str]]:
    """``(inputs, targets)`` from ``> user`` / ``< reply`` line pairs (``ArtifactError``
    naming the line for anything else)."""
    inputs: list[str] = []
    targets: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        mark, said = line[:2], line[2:]
        if mark == "> " and len(inputs) == len(targets):
            inputs.append(said)
        elif mark == "< " and len(inputs) == len(targets) + 1:
            targets.append(said)
        else:
            raise ArtifactError(f"line {number}: expected a "
                                f"{'> user' if len(inputs) == len(targets) else '< reply'} "
                                f"line, got {line[:40]!r}", origin)
    if not inputs or len(inputs) != len(targets):
        raise ArtifactError("the dialogue needs at least one '> user' line, each followed "
                            "by a '< reply' line", origin)
    return inputs, targets


def load_dialogue() -> tuple[list[str], list[str]]:
    """The dialogue ``data/chat.txt``'s ``(inputs, targets)``."""
    return parse_dialogue(DIALOGUE.read_text("utf-8"), str(DIALOGUE))


def sample_reply(bot: Chatbot, seed: int = SAMPLE_SEED, prompt: str = PROMPT) -> str:
    """The reply to ``prompt`` drawn from a fresh generator with ``seed``."""
    return bot.reply(ChatSession(), prompt, Generator(seed))


def run_example(output: pathlib.Path | None = None, backend: str | None = None,
                epochs: int = 100) -> list[str]:
    """Train, summarize, sample, save, reload and sample again; the demo's lines."""
    inputs, targets = load_dialogue()
    start = time.perf_counter()
    bot = Chatbot(seed=0, backend=backend)
    tool: Any = bot  # the trainer's Tool is a protocol; Chatbot is a tools.Tool
    trainer = Trainer.from_tool(tool, lr=0.01, backend=backend,
                                optimizer=lambda _: optim.Adam(backend=backend or DEFAULT_BACKEND))
    experience = trainer.capture(inputs, targets, source="authored-data:chat")
    losses = trainer.fit([experience], epochs=epochs, progress=False)
    bot.eval()
    elapsed = time.perf_counter() - start
    points = sorted({0, len(losses) // 4, len(losses) // 2, 3 * len(losses) // 4,
                     len(losses) - 1})
    curve = ", ".join(f"step {k + 1}: {losses[k]:.3f}" for k in points)
    reply = sample_reply(bot)
    with tempfile.TemporaryDirectory() as scratch:
        directory = pathlib.Path(output) if output is not None else pathlib.Path(scratch) / "bot"
        bot.save_pretrained(directory)
        again = sample_reply(Chatbot.from_pretrained(directory, backend=backend))
    return [f"Chatbot: {len(inputs)} dialogue turns (data/chat.txt, written for TensorCode), "
            f"{len(losses)} full-batch Adam steps ({elapsed:.1f} s)",
            f"  loss curve: {curve}",
            f"  reply to {PROMPT!r} (generator seed {SAMPLE_SEED}): {reply!r}",
            f"  save_pretrained -> from_pretrained, same seed: "
            f"{'same reply' if again == reply else 'DIFFERENT reply ' + repr(again)}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--output", metavar="DIR",
                        help="where to save the trained Chatbot (default: a temporary directory)")
    args = parser.parse_args()
    output = pathlib.Path(args.output) if args.output else None
    print("\n".join(run_example(output, backend=args.backend, epochs=args.epochs)))


if __name__ == "__main__":
    main()

"""Chatbot: train a small character-level model on a few dialogue turns, reply from a
generator (the same state replays the same reply), keep the conversation in a
ChatSession saved apart from the model, and reload both.

    python examples/tools/chatbot.py [--backend reference]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import tensorcode as tc
from tensorcode.tools import Chatbot, ChatSession, VocabularyError
from tensorcode.training import Trainer

INPUTS = ["hello", "how are you?", "bye"]
TARGETS = ["hi! what do you need?", "fine, thanks.", "goodbye!"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    args = parser.parse_args()
    backend = args.backend

    bot = Chatbot(context=6, dim=12, hidden=32, backend=backend)
    trainer = Trainer.from_tool(bot, lr=0.03, backend=backend,
                                optimizer=lambda _: tc.optim.Adam(backend=backend or "numba"))
    experience = trainer.capture(INPUTS, TARGETS, source="authored-example:chat")
    losses = trainer.fit([experience], epochs=80, progress=False)
    bot.eval()
    print(f"Chatbot loss {losses[0]:.3f} -> {losses[-1]:.3f}")

    session = ChatSession()
    generator = tc.random.Generator(seed=1)
    start = generator.clone()
    for text in INPUTS:
        print(f"  > {text}\n  < {bot.reply(session, text, generator)}")
    replay = ChatSession()
    same = [bot.reply(replay, text, start) for text in INPUTS] == [
        m.content for m in session.messages if m.role == "assistant"]
    print(f"the same generator state replays the same replies: {same}")
    try:
        bot.reply(session, "Hello", generator)
    except VocabularyError as error:
        print(f"refused: {error}")

    with tempfile.TemporaryDirectory() as work:
        bot.save_pretrained(pathlib.Path(work) / "bot")
        session.save(pathlib.Path(work) / "chat.json")
        again = Chatbot.from_pretrained(pathlib.Path(work) / "bot", backend=backend)
        history = ChatSession.load(pathlib.Path(work) / "chat.json")
        print(f"reloaded session: {len(history)} messages, equal: {history == session}")
        reply = again.reply(history, "hello", tc.random.Generator(seed=1))
        print(f"reloaded model replies {reply!r}; session now {len(history)} messages")


if __name__ == "__main__":
    main()

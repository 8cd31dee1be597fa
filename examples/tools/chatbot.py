"""Chatbot: train a small character-level transformer on a recorded conversation, reply
in a session (each reply sees the turns before it) from a generator (the same state
replays the same replies), keep the conversation in a ChatSession saved apart from the
model, and reload both.

    python examples/tools/chatbot.py [--backend reference]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import tensorcode as tc
from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.text import Message
from tensorcode.tools import Chatbot, ChatSession, VocabularyError
from tensorcode.training import Trainer

INPUTS = ["hello", "how are you?", "bye"]
TARGETS = ["hi! what do you need?", "fine, thanks.", "goodbye!"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    args = parser.parse_args()
    backend = args.backend

    bot = Chatbot(context=64, dim=16, heads=2, layers=1, backend=backend)
    chosen = backend or DEFAULT_BACKEND
    trainer = Trainer.from_tool(bot, lr=0.02, backend=backend,
                                optimizer=lambda _: tc.optim.Adam(backend=chosen))
    # the conversation to learn, turn by turn: each reply is trained after the turns
    # before it, as it will be asked for in a session
    recorded = ChatSession([Message(role, text) for said, answer in zip(INPUTS, TARGETS)
                            for role, text in (("user", said), ("assistant", answer))])
    inputs, targets = recorded.exchanges()
    experience = trainer.capture(inputs, targets, source="authored-example:chat")
    losses = trainer.fit([experience], epochs=100, progress=False)
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
        original = ChatSession(history.messages)
        reply = again.reply(history, "hello", tc.random.Generator(seed=1))
        same = bot.reply(original, "hello", tc.random.Generator(seed=1)) == reply
        print(f"reloaded model, same session and seed: "
              f"{'same reply' if same else 'DIFFERENT reply'} {reply!r}; "
              f"session now {len(history)} messages")


if __name__ == "__main__":
    main()

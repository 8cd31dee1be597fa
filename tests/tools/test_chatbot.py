"""Chatbot: teacher-forced training through Trainer.from_tool, replies that replay from
the same generator state, the vocabulary policy and malformed inputs refused, sessions
saved apart from the model and loaded strictly, and pretrained directories."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError, TrainingError
from tensorcode.text import Message
from tensorcode.tools import Chatbot, ChatSession, ConfigError, VocabularyError
from tensorcode.tools.chat_example import load_dialogue, parse_dialogue
from tensorcode.training import Trainer, load_experience

REF = "reference"
SMALL = {"context": 4, "dim": 8, "hidden": 16, "max_reply": 20}
INPUTS = ["hello", "bye"]
TARGETS = ["hi there", "see you"]


@pytest.fixture(scope="module")
def trained():
    bot = Chatbot(SMALL, seed=1, backend=REF)
    trainer = Trainer.from_tool(bot, lr=0.05, backend=REF,
                                optimizer=lambda _: tc.optim.Adam(backend=REF))
    experience = trainer.capture(INPUTS, TARGETS, source="test:chat")
    losses = trainer.fit([experience], epochs=60, progress=False)
    bot.eval()
    return bot, losses


def test_training_lowers_the_teacher_forced_loss_and_learns_the_replies(trained):
    bot, losses = trained
    assert losses[-1] < 0.1 * losses[0]
    for said, answer in zip(INPUTS, TARGETS):
        session = ChatSession()
        assert bot.reply(session, said, tc.random.Generator(0)) == answer
        assert session.messages == [Message("user", said), Message("assistant", answer)]


def test_the_first_loss_is_the_cross_entropy_of_the_real_positions_only():
    # padded rows (11 positions -> 16 rows) carry no weight in the loss
    bot = Chatbot(SMALL, seed=2, backend=REF)
    windows, following = bot.teacher_windows(INPUTS, TARGETS)
    assert len(windows) == len("hi there") + len("see you") + 2
    logits = bot.operations["model"](windows)[:len(windows)].astype(np.float64)
    log_p = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1,
                            keepdims=True)) - logits.max(1, keepdims=True)
    expected = -log_p[np.arange(len(following)), following].mean()
    trainer = Trainer.from_tool(bot, lr=1e-12, backend=REF)
    loss = trainer.step(trainer.capture(INPUTS, TARGETS, source="test:chat"))
    assert loss == pytest.approx(expected, rel=1e-5)


def test_the_same_generator_state_replays_the_same_reply():
    bot = Chatbot(SMALL, seed=3, backend=REF, temperature=1.0)  # untrained: varied text
    generator = tc.random.Generator(11)
    first = bot.reply(ChatSession(), "hello", generator.clone())
    assert bot.reply(ChatSession(), "hello", generator.clone()) == first
    drawn = [bot.reply(ChatSession(), "hello", generator) for _ in range(3)]
    assert drawn[0] == first and len(set(drawn)) > 1  # the generator advances


def test_bad_inputs_raise_the_documented_errors(trained):
    bot, _ = trained
    trainer = Trainer.from_tool(bot, backend=REF)
    with pytest.raises(TrainingError, match="equal-length"):
        trainer.capture(["hello", "bye"], ["hi"], source="test")
    with pytest.raises(VocabularyError, match="'H' at position 0"):
        trainer.capture(["Hello"], ["hi"], source="test")
    with pytest.raises(TrainingError, match="'#' at position 2"):
        trainer.capture(["hello"], ["hi#"], source="test")
    with pytest.raises(TypeError):
        trainer.capture("hello", "hi", source="test")
    with pytest.raises(TrainingError, match="teacher_forced"):
        bot.output(["hello"])
    with pytest.raises(VocabularyError):
        bot.reply(ChatSession(), "héllo", tc.random.Generator(0))
    with pytest.raises(TypeError, match="Generator"):
        bot.reply(ChatSession(), "hello", None)
    with pytest.raises(ConfigError, match="alphabet"):
        Chatbot(alphabet="aa")
    with pytest.raises(ConfigError, match="temperature"):
        Chatbot(temperature=0)
    bot.train(False)


def test_a_session_saves_and_loads_apart_from_the_model(tmp_path):
    session = ChatSession([Message("system", "be brief"), Message("user", "hi")])
    path = session.save(tmp_path / "chat.json")
    assert ChatSession.load(path) == session
    good = json.loads(path.read_text())
    bad = {"format": {**good, "format": "tensorcode.tool"},
           "version": {**good, "version": 2},
           "messages[1].role": {**good, "messages": [good["messages"][0],
                                                     {"role": "robot", "content": "x"}]},
           "messages[0]": {**good, "messages": [{"role": "user", "content": "x",
                                                 "extra": 1}]},
           "messages[0].content": {**good, "messages": [{"role": "user", "content": 3}]}}
    for field, document in bad.items():
        (tmp_path / "bad.json").write_text(json.dumps(document))
        with pytest.raises(ArtifactError) as error:
            ChatSession.load(tmp_path / "bad.json")
        assert field in str(error.value), (field, str(error.value))
    (tmp_path / "bad.json").write_text('{"format": 1, "format": 2}')
    with pytest.raises(ArtifactError):
        ChatSession.load(tmp_path / "bad.json")
    with pytest.raises(ArtifactError):
        ChatSession.load(tmp_path / "missing.json")


def test_pretrained_round_trip_replies_identically(trained, tmp_path):
    bot, _ = trained
    directory = bot.save_pretrained(tmp_path / "bot")
    again = Chatbot.from_pretrained(directory, backend=REF)
    assert again.config == bot.config
    for seed in (0, 5):
        assert again.reply(ChatSession(), "hello", tc.random.Generator(seed)) == \
            bot.reply(ChatSession(), "hello", tc.random.Generator(seed))
    document = json.loads((directory / "tool.json").read_text())
    document["config"]["context"] = 5
    (directory / "tool.json").write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match="fingerprint"):
        Chatbot.from_pretrained(directory, backend=REF)


def test_numba_gives_the_reference_interpreter_logits():
    windows = np.array([[0, 0, 3, 4], [1, 5, 6, 2], [7, 8, 9, 10]], np.int64)
    numba, ref = (Chatbot(SMALL, seed=4, backend=b).operations["model"](windows)
                  for b in ("numba", REF))
    assert numba.shape == (4, Chatbot(SMALL).vocab)  # three rows padded to four
    np.testing.assert_allclose(numba, ref, rtol=1e-5, atol=1e-6)


def test_the_shipped_dialogue_parses_and_fits_the_alphabet():
    inputs, targets = load_dialogue()
    assert len(inputs) == len(targets) >= 10
    bot = Chatbot(SMALL)
    for text in inputs + targets:
        bot.encode(text)
    with pytest.raises(ArtifactError, match="line 2"):
        parse_dialogue("> hi\n> again\n")
    with pytest.raises(ArtifactError, match="at least one"):
        parse_dialogue("")


def test_a_captured_chat_experience_saves_loads_and_trains(tmp_path):
    bot = Chatbot(SMALL, seed=5, backend=REF)
    trainer = Trainer.from_tool(bot, lr=0.05, backend=REF)
    experience = trainer.capture(INPUTS, TARGETS, source="test:chat")
    experience.save(tmp_path / "chat-experience.json", operations=trainer.operations,
                    release=True)
    loaded = load_experience(tmp_path / "chat-experience.json",
                             operations=trainer.operations)
    losses = trainer.fit([loaded], epochs=3, progress=False)
    assert len(losses) == 3 and losses[-1] < losses[0]

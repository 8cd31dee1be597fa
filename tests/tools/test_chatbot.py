"""Chatbot: a transformer language model over a conversation, trained teacher-forced
through Trainer.from_tool; replies that see the earlier turns and replay from the same
generator state; rows cut the same way for training and replying; the vocabulary policy
and malformed inputs refused; sessions saved apart from the model and loaded strictly;
pretrained directories, and the earlier character-window model's refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError, TrainingError
from tensorcode.text import Message
from tensorcode.tools import Chatbot, ChatSession, ConfigError, VocabularyError
from tensorcode.tools.chatbot import END, MARKS, PAD, TURN
from tensorcode.training import Trainer, load_experience

REF = "reference"
SMALL = {"context": 32, "dim": 16, "heads": 2, "layers": 1, "max_reply": 20}
INPUTS = ["hello", "bye"]
TARGETS = ["hi there", "see you"]


def conversation(name: str) -> ChatSession:
    """Two exchanges whose second reply is only known from the first turn."""
    return ChatSession([Message("user", f"i am {name}"), Message("assistant", f"hi {name}"),
                        Message("user", "who am i?"), Message("assistant", name)])


@pytest.fixture(scope="module")
def trained():
    bot = Chatbot(SMALL, seed=1, backend=REF)
    trainer = Trainer.from_tool(bot, lr=0.02, backend=REF,
                                optimizer=lambda _: tc.optim.Adam(backend=REF))
    inputs, targets = list(INPUTS), list(TARGETS)
    for name in ("bob", "ann"):
        said, answers = conversation(name).exchanges()
        inputs += said
        targets += answers
    experience = trainer.capture(inputs, targets, source="test:chat")
    losses = trainer.fit([experience], epochs=120, progress=False)
    bot.eval()
    return bot, losses


def test_training_lowers_the_teacher_forced_loss_and_learns_the_replies(trained):
    bot, losses = trained
    assert losses[-1] < 0.1 * losses[0]
    for said, answer in zip(INPUTS, TARGETS):
        session = ChatSession()
        assert bot.reply(session, said, tc.random.Generator(0)) == answer
        assert session.messages == [Message("user", said), Message("assistant", answer)]


def test_a_reply_sees_the_earlier_turns_of_its_session(trained):
    # the same user text, two answers: only the conversation before it tells them apart
    bot, _ = trained
    for name in ("bob", "ann"):
        session = ChatSession(conversation(name).messages[:2])
        assert bot.reply(session, "who am i?", tc.random.Generator(0)) == name
        assert session == conversation(name)


def test_exchanges_are_the_assistant_turns_with_the_conversation_before_them():
    session = ChatSession([Message("system", "be brief"), Message("user", "hi"),
                           Message("assistant", "hello"), Message("assistant", "again"),
                           Message("user", "bye"), Message("assistant", "see you")])
    inputs, targets = session.exchanges()
    assert targets == ["hello", "see you"]
    assert inputs == [ChatSession(session.messages[:2]), ChatSession(session.messages[:5])]
    bot = Chatbot(SMALL)
    assert bot.encode_conversation(inputs[0].messages) == (
        bot.encode("be brief") + [MARKS["system"]] + bot.encode("hi") + [TURN])


def test_training_rows_are_the_rows_a_reply_reads():
    # a conversation longer than the context: every supervised position is predicted
    # from exactly the row (and position in it) that reply would read at that point
    bot = Chatbot(SMALL)
    said = ChatSession([Message("user", "a" * 20), Message("assistant", "b" * 30),
                        Message("user", "where does this long conversation go?")])
    answer = "it goes on past the context, cut into rows on a grid"
    ids, following, supervised = bot.teacher_rows([said], [answer])
    sequence = bot.encode_conversation(said.messages) + bot.encode(answer) + [END]
    assert len(ids) > 1 and ids.shape[1] == SMALL["context"]
    seen = list(zip(*np.nonzero(supervised)))  # row by row, position by position
    targets = [following[r, p] for r, p in seen]
    prompt = len(bot.encode_conversation(said.messages))
    assert targets == sequence[prompt:]  # each reply id and the end mark, once, in order
    for (r, p), q in zip(seen, range(prompt - 1, len(sequence) - 1)):
        row, position = bot.window(sequence[:q + 1])
        assert position == p
        np.testing.assert_array_equal(row[0, :p + 1], ids[r, :p + 1])
    assert bot.row_start(SMALL["context"] - 1) == 0
    assert bot.row_start(SMALL["context"]) == SMALL["context"] // 2


def test_the_first_loss_is_the_cross_entropy_of_the_reply_positions_only():
    # positions of the user's turn and padded rows (5 rows -> 8) carry no weight; the
    # third pair runs past the context and takes three rows
    bot = Chatbot(SMALL, seed=2, backend=REF)
    inputs = INPUTS + ["x" * 40]
    targets = TARGETS + ["a reply past the context"]
    ids, following, supervised = bot.teacher_rows(inputs, targets)
    assert len(ids) == 5 and supervised.sum() == sum(len(t) + 1 for t in targets)
    logits = bot.operations["model"](ids)[:len(ids)].astype(np.float64)
    shift = logits.max(-1, keepdims=True)
    log_p = logits - shift - np.log(np.exp(logits - shift).sum(-1, keepdims=True))
    rows, positions = np.nonzero(supervised)
    expected = -log_p[rows, positions, following[rows, positions]].mean()
    trainer = Trainer.from_tool(bot, lr=1e-12, backend=REF)
    loss = trainer.step(trainer.capture(inputs, targets, source="test:chat"))
    assert loss == pytest.approx(expected, rel=1e-5)


def test_the_same_generator_state_replays_the_same_reply():
    bot = Chatbot(SMALL, seed=3, backend=REF, temperature=1.0)  # untrained: varied text
    generator = tc.random.Generator(11)
    earlier = conversation("bob").messages
    first = bot.reply(ChatSession(earlier), "hello", generator.clone())
    assert bot.reply(ChatSession(earlier), "hello", generator.clone()) == first
    drawn = [bot.reply(ChatSession(earlier), "hello", generator) for _ in range(3)]
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
    with pytest.raises(TypeError, match=r"inputs\[0\]"):
        trainer.capture([3], ["hi"], source="test")
    with pytest.raises(TrainingError, match="ends with the user's turn"):
        trainer.capture([conversation("bob")], ["hi"], source="test")
    with pytest.raises(TrainingError, match="teacher_forced"):
        bot.output(["hello"])
    with pytest.raises(VocabularyError):
        bot.reply(ChatSession(), "héllo", tc.random.Generator(0))
    with pytest.raises(VocabularyError, match=r"session\.messages\[0\]\.content holds 'B'"):
        bot.reply(ChatSession([Message("user", "Bob")]), "hi", tc.random.Generator(0))
    with pytest.raises(TypeError, match="Generator"):
        bot.reply(ChatSession(), "hello", None)
    with pytest.raises(ConfigError, match="alphabet"):
        Chatbot(alphabet="aa")
    with pytest.raises(ConfigError, match="temperature"):
        Chatbot(temperature=0)
    with pytest.raises(ConfigError, match=r"'heads'.*divide dim 16"):
        Chatbot(SMALL, heads=3)
    with pytest.raises(ConfigError, match="'layers'"):
        Chatbot(SMALL, layers=65)
    with pytest.raises(ConfigError, match="'hidden': unknown key"):
        Chatbot(hidden=32)
    bot.train(False)


def test_a_session_saves_and_loads_apart_from_the_model(tmp_path):
    session = ChatSession([Message("system", "be brief"), Message("user", "hi")])
    path = session.save(tmp_path / "chat.json")
    assert ChatSession.load(path) == session
    good = json.loads(path.read_text())
    assert good == {"format": "tensorcode.chat-session", "version": 1,
                    "messages": [{"role": "system", "content": "be brief"},
                                 {"role": "user", "content": "hi"}]}  # the format is kept
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
    earlier = conversation("ann").messages[:2]
    for seed in (0, 5):
        assert again.reply(ChatSession(earlier), "hello", tc.random.Generator(seed)) == \
            bot.reply(ChatSession(earlier), "hello", tc.random.Generator(seed))
    document = json.loads((directory / "tool.json").read_text())
    document["config"]["context"] = 5
    (directory / "tool.json").write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match="fingerprint"):
        Chatbot.from_pretrained(directory, backend=REF)


def test_a_directory_of_the_earlier_character_window_model_is_refused_by_name(tmp_path):
    # what the character-window Chatbot wrote: its config had "hidden", its operation
    # was CharWindowModel; nothing in it maps onto the transformer
    directory = Chatbot(SMALL, backend=REF).save_pretrained(tmp_path / "bot")
    document = json.loads((directory / "tool.json").read_text())
    document["config"] = {"alphabet": "ab", "context": 8, "dim": 16, "hidden": 64,
                          "max_reply": 60, "temperature": 0.5, "top_k": 0, "seed": 0}
    document["operations"]["model"]["qualified_name"] = "tensorcode.tools.CharWindowModel"
    (directory / "tool.json").write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match="earlier character-window model") as error:
        Chatbot.from_pretrained(directory, backend=REF)
    assert error.value.field == "operations.model.qualified_name"
    assert "Trainer.from_tool" in str(error.value)


def test_the_compiled_plan_gives_the_reference_interpreter_logits():
    ids = np.array([[PAD] * 30 + [3, 4], [TURN] + [5] * 30 + [END],
                    list(range(5, 37))], np.int64)
    compiled, ref = (Chatbot(SMALL, seed=4, backend=b).operations["model"](ids)
                     for b in (None, REF))
    assert compiled.shape == (4, SMALL["context"], Chatbot(SMALL).vocab)  # 3 rows -> 4
    np.testing.assert_allclose(compiled, ref, rtol=1e-4, atol=1e-5)


def test_compiled_training_takes_the_reference_updates():
    # three pairs are three rows, padded to the four of the forward plan above
    losses = {}
    for backend in (None, REF):
        options = {"backend": backend} if backend else {}  # None: the default backend
        bot = Chatbot(SMALL, seed=6, **options)
        trainer = Trainer.from_tool(bot, lr=0.02, optimizer=lambda _: tc.optim.Adam(**options))
        experience = trainer.capture(INPUTS + ["thanks"], TARGETS + ["any time"],
                                     source="test:chat")
        losses[backend] = trainer.fit([experience], epochs=3, progress=False)
    np.testing.assert_allclose(losses[None], losses[REF], rtol=1e-4)
    assert losses[REF][-1] < losses[REF][0]


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

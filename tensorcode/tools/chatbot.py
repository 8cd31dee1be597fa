"""``Chatbot``: a small character-level transformer language model that replies in a
conversation, one character at a time, and the ``ChatSession`` (the conversation) saved
apart from the model.

The model is ``tc.nn``'s ``Gpt`` (GPT-2's blocks: causal self-attention and a GELU
feed-forward, pre-norm, the head tied to the token embedding) over character ids, with
``context`` positions, ``layers`` blocks of ``heads`` heads and width ``dim``. A
conversation is one id sequence: each turn's characters followed by the end mark of
its role (user, assistant, system, tool), so the model sees who said what. A reply is
conditioned on the conversation so far (the session's earlier turns and the new user
turn), of which the model reads up to the last ``context`` ids (``row_start``).

Vocabulary policy: the config's ``alphabet`` (default ``ALPHABET``: lowercase letters,
digits, space and ``.,!?'-_``) lists every character a text may hold, used exactly as
written (no case folding); five more ids are the padding and the four end marks. A text
holding any other character raises ``VocabularyError`` naming it and its position.

Training (``Trainer.from_tool(chatbot)``): ``inputs`` and ``targets`` are equal-length
lists. An input is the conversation to reply to: a text (the user's turn alone) or a
``ChatSession`` whose last message is the user's turn; the target is the reply's text
(``ChatSession.exchanges()`` turns a recorded conversation into such pairs). The model
is teacher-forced: each conversation plus ``target + <end of reply>`` is cut into rows
of ``context`` ids, and the model is trained with cross-entropy to predict each
character of the target and the end mark from the true ids before it
(``teacher_forced(inputs, targets)`` is the supervised output; positions outside the
reply and rows padded to a power of two carry zero weight in the loss).

``chatbot.reply(session, text, generator)`` appends the user's ``Message`` and the
reply's to ``session`` and returns the reply, sampled with ``tc.random.sample`` (the
config's ``temperature`` and ``top_k``): the same session, text and generator state
give the same reply.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import log_softmax, maximum
from ..compiler.trace.expr import Expr
from ..errors import ArtifactError, TensorCodeError, TrainingError
from ..files import Fields, atomic_write_json, check_header, read_json
from ..nn import init as initializers
from ..nn.transformer import Gpt, GptConfig
from ..operations.base import Operation, row_bucket
from ..operations.layers import checked_seed, positive_int
from ..runtime.random import Generator, sample
from ..text import ROLES, Message
from . import checks
from .base import CONFIG_FILE, MAX_CONFIG_BYTES, MAX_PRETRAINED_BYTES, ConfigError, Tool

#: the default alphabet: every character a text may hold
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 .,!?'-_"
#: the id that pads a row past the end of its conversation (never supervised or drawn)
PAD = 0
#: the id that ends a turn of each role: the model sees who said what
MARKS = {"user": 1, "assistant": 2, "system": 3, "tool": 4}
#: the end of the user's turn (a reply follows it) and the end of a reply (it stops one)
TURN, END = MARKS["user"], MARKS["assistant"]
#: the ids before the alphabet's
SPECIAL = 1 + len(MARKS)
#: the most blocks a Chatbot config may ask for (a file's config is checked against it
#: before any parameter is built)
MAX_LAYERS = 64
SESSION_FORMAT = "tensorcode.chat-session"
SESSION_VERSION = 1
#: a session file is small: refuse anything larger before reading it
MAX_SESSION_BYTES = 8 * 1024 * 1024
#: the operation of the earlier character-window Chatbot, whose saved models this one
#: refuses by name (its parameters have no place in the transformer)
EARLIER_MODEL = "tensorcode.tools.CharWindowModel"


class VocabularyError(TensorCodeError, ValueError):
    """A text holds a character outside the chatbot's alphabet."""


class ChatTransformer(Operation):
    """Next-id logits ``[rows, context, vocab]`` from id rows ``[rows, context]``: a
    ``tc.nn``'s ``Gpt`` (every position sees the positions before it in its row).

    Rows are padded to a power of two (rows of padding ids), so a few plans serve every
    call; the caller drops or zero-weights the padded rows."""

    qualified_name = "tensorcode.tools.ChatTransformer"

    def __init__(self, vocab: int, context: int, dim: int, heads: int, layers: int,
                 seed: int = 0, backend: str | None = None) -> None:
        self.config = GptConfig(vocab_size=positive_int("vocab", vocab),
                                block_size=positive_int("context", context),
                                n_layer=positive_int("layers", layers),
                                n_head=positive_int("heads", heads),
                                n_embd=positive_int("dim", dim))
        self.seed = checked_seed(seed)
        self._initialize(backend)

    def configuration(self) -> dict:
        c = self.config
        return {"vocab": c.vocab_size, "context": c.block_size, "dim": c.n_embd,
                "heads": c.n_head, "layers": c.n_layer, "dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> Gpt:
        # GPT-2's initialization from the seed when fresh; any values otherwise (the
        # caller feeds the operation's table)
        return Gpt(tape, self.config, init=None if fresh else initializers.zeros(),
                      seed=self.seed * 16)

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        if len(args) != 1:
            raise TypeError(f"ChatTransformer takes (ids,), got {len(args)} arguments")
        ids = np.asarray(args[0])
        context, vocab = self.config.block_size, self.config.vocab_size
        if ids.ndim != 2 or ids.shape[1] != context or ids.shape[0] == 0 \
                or ids.dtype.kind not in "iu":
            raise TypeError(f"ids are integer rows [rows, {context}], got "
                            f"{ids.dtype}{list(ids.shape)}")
        if ids.min() < 0 or ids.max() >= vocab:
            raise ValueError(f"ids must lie in [0, {vocab})")
        padded = np.full((row_bucket(ids.shape[0]), context), PAD, np.int64)
        padded[:ids.shape[0]] = ids
        return [padded]

    def express(self, built: Any, inputs: Sequence[Expr]) -> Expr:
        (ids,) = inputs
        return built(ids)


def masked_cross_entropy(logits: Expr, target: Any) -> Expr:
    """Mean ``-log softmax(logits)[class]`` over the positions whose one-hot target row
    is nonzero (unsupervised and padded positions carry an all-zero row and no weight)."""
    picked = (log_softmax(logits) * target).sum()
    return -picked / maximum(target.sum(), 1.0)


class Chatbot(Tool):
    """A character-level transformer chatbot (see the module docstring).

    Config: ``alphabet``, ``context`` (positions the model reads), ``dim`` (width),
    ``heads``, ``layers``, ``max_reply`` (characters), ``temperature``, ``top_k`` (0: no
    cut), ``seed``."""

    objective: ClassVar[str] = "masked_cross_entropy"
    prediction: ClassVar[str] = "reply"
    losses: ClassVar[dict[str, Any]] = {"masked_cross_entropy": masked_cross_entropy}
    defaults: ClassVar[dict[str, Any]] = {"alphabet": ALPHABET, "context": 64, "dim": 32,
                                          "heads": 2, "layers": 2, "max_reply": 60,
                                          "temperature": 0.5, "top_k": 0, "seed": 0}
    size_keys: ClassVar[tuple[str, ...]] = ("alphabet", "context", "dim")

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        alphabet = config["alphabet"]
        if not isinstance(alphabet, str) or not alphabet or len(set(alphabet)) != len(
                alphabet):
            raise ConfigError("alphabet", "must be a nonempty text of distinct characters")
        for key in ("context", "dim", "heads", "layers", "max_reply"):
            checks.positive(config, key)
        if config["layers"] > MAX_LAYERS:
            raise ConfigError("layers", f"must be at most {MAX_LAYERS}, got {config['layers']}")
        if config["dim"] % config["heads"]:
            raise ConfigError("heads", f"must divide dim {config['dim']}, got "
                              f"{config['heads']}")
        temperature = config["temperature"]
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
                not 0 < temperature < float("inf"):
            raise ConfigError("temperature", f"must be a positive number, got {temperature!r}")
        config["temperature"] = float(temperature)
        top_k = config["top_k"]
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise ConfigError("top_k", f"must be an int >= 0 (0: no cut), got {top_k!r}")
        checks.seed(config)
        self._ids = {c: SPECIAL + k for k, c in enumerate(alphabet)}
        return config

    @property
    def vocab(self) -> int:
        """The number of ids: the alphabet plus the padding and the four end marks."""
        return SPECIAL + len(self.config["alphabet"])

    def planned_parameters(self) -> int:
        c = self.config
        return GptConfig(vocab_size=self.vocab, block_size=c["context"], n_layer=c["layers"],
                         n_head=c["heads"], n_embd=c["dim"]).parameter_count()

    def build_operations(self) -> Mapping[str, Operation]:
        c = self.config
        return {"model": ChatTransformer(self.vocab, c["context"], c["dim"], c["heads"],
                                         c["layers"], seed=c["seed"], backend=self.backend)}

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, backend: str | None = None, *,
                        max_bytes: int = MAX_PRETRAINED_BYTES) -> Chatbot:
        """``Tool.from_pretrained``, refusing first, by name, a directory saved by the
        earlier character-window Chatbot (``ArtifactError``: retrain and save again)."""
        _refuse_earlier_model(pathlib.Path(directory))
        return super().from_pretrained(directory, backend=backend, max_bytes=max_bytes)

    # -- texts and conversations ----------------------------------------------------------
    def encode(self, text: Any, where: str = "text") -> list[int]:
        """The ids of ``text`` (``VocabularyError`` for a character outside the alphabet)."""
        text = checks.text(text, where)
        ids = []
        for position, char in enumerate(text):
            found = self._ids.get(char)
            if found is None:
                raise VocabularyError(f"{where} holds {char!r} at position {position}, "
                                      f"outside the alphabet {self.config['alphabet']!r}; "
                                      "remove or replace it (or configure an alphabet that "
                                      "has it)")
            ids.append(found)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of alphabet ids (padding and marks are dropped)."""
        alphabet = self.config["alphabet"]
        return "".join(alphabet[i - SPECIAL] for i in ids if i >= SPECIAL)

    def encode_conversation(self, messages: Sequence[Message], where: str = "session"
                            ) -> list[int]:
        """The ids of a conversation: each turn's characters, then its role's end mark."""
        ids: list[int] = []
        for k, message in enumerate(messages):
            ids += self.encode(message.content, f"{where}.messages[{k}].content")
            ids.append(MARKS[message.role])
        return ids

    def row_start(self, position: int) -> int:
        """Where the row that predicts the id after ``position`` starts: 0 while the
        conversation fits the context, then on a grid of half the context, so the
        position sees at least half the context before it. Training and replying cut
        rows the same way, so a reply reads rows exactly like those it was trained on."""
        context = self.config["context"]
        if position < context:
            return 0
        stride = max(1, context // 2)
        return ((position - context) // stride + 1) * stride

    def window(self, sequence: Sequence[int]) -> tuple[np.ndarray, int]:
        """The row ``[1, context]`` the model reads to predict the id after ``sequence``
        (from ``row_start``, padded on the right) and the position in it to read."""
        context = self.config["context"]
        position = len(sequence) - 1
        start = self.row_start(position)
        row = np.full((1, context), PAD, np.int64)
        row[0, :position + 1 - start] = sequence[start:position + 1]
        return row, position - start

    def _conversation(self, value: Any, where: str) -> list[int]:
        """The ids of one training input: a text or a ``ChatSession`` ending with the
        user's turn."""
        if isinstance(value, ChatSession):
            if not value.messages or value.messages[-1].role != "user":
                last = value.messages[-1].role if value.messages else "no message"
                raise TrainingError(f"{where}: a conversation to reply to ends with the "
                                    f"user's turn, got {last!r} last; append the "
                                    "Message('user', ...) the target answers")
            return self.encode_conversation(value.messages, where)
        return self.encode(checks.text(value, where), where) + [TURN]

    def teacher_rows(self, inputs: Any, targets: Any
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Teacher-forced rows: ids ``[rows, context]``, the id after each position and
        whether that position is supervised (a reply character or the end mark). A
        conversation longer than the context is cut into rows where ``row_start`` says,
        as ``reply`` cuts them."""
        if isinstance(inputs, str) or not isinstance(inputs, (list, tuple)) or not inputs:
            raise TypeError("Chatbot inputs are a nonempty list of texts or ChatSessions")
        if isinstance(targets, str) or not isinstance(targets, (list, tuple)):
            raise TrainingError("Chatbot targets are a list of texts, one per input")
        if len(targets) != len(inputs):
            raise TrainingError(f"Chatbot inputs and targets must be equal-length lists: "
                                f"{len(inputs)} inputs but {len(targets)} targets")
        context = self.config["context"]
        ids, following, supervised = [], [], []
        for k, (said, answer) in enumerate(zip(inputs, targets)):
            prompt = self._conversation(said, f"inputs[{k}]")
            try:
                reply = self.encode(answer, f"targets[{k}]") + [END]
            except (TypeError, VocabularyError) as error:
                raise TrainingError(str(error)) from None
            sequence = np.asarray(prompt + reply, np.int64)
            n = len(sequence) - 1  # positions with an id after them
            position = len(prompt) - 1  # the first supervised position
            while position < n:
                start = self.row_start(position)
                stop = min(n, start + context)
                row = np.full(context, PAD, np.int64)
                after = np.full(context, PAD, np.int64)
                mask = np.zeros(context, bool)
                row[:stop - start] = sequence[start:stop]
                after[:stop - start] = sequence[start + 1:stop + 1]
                mask[position - start:stop - start] = True
                ids.append(row)
                following.append(after)
                supervised.append(mask)
                position = stop
        return np.stack(ids), np.stack(following), np.stack(supervised)

    # -- the objective --------------------------------------------------------------------
    def teacher_forced(self, inputs: Any, targets: Any) -> Any:
        """Logits ``[padded rows, context, vocab]`` for every position given the true
        ids before it: the supervised output (``check_target`` weights the reply's)."""
        ids, _, _ = self.teacher_rows(inputs, targets)
        return self.operations["model"](ids)

    def supervised_output(self, inputs: Any) -> Any:
        """Not defined from the inputs alone: the supervised output is teacher-forced."""
        raise TrainingError("a Chatbot's supervised output reads the target replies "
                            "(teacher forcing): use teacher_forced(inputs, targets), or "
                            "Trainer.from_tool(chatbot).capture(inputs, targets, ...)")

    def output(self, inputs: Any) -> Any:
        """Not defined from the inputs alone (see ``supervised_output``)."""
        return self.supervised_output(inputs)

    def check_target(self, inputs: Any, target: Any) -> Any:
        """One-hot rows ``[padded rows, context, vocab]``, zero where unsupervised."""
        ids, following, supervised = self.teacher_rows(inputs, target)
        onehot = np.zeros((row_bucket(len(ids)), ids.shape[1], self.vocab), np.float32)
        rows, positions = np.nonzero(supervised)
        onehot[rows, positions, following[rows, positions]] = 1.0
        return onehot

    # -- replying -------------------------------------------------------------------------
    def next_logits(self, sequence: Sequence[int]) -> np.ndarray:
        """Next-id logits ``[vocab]`` after ``sequence`` (one plan call)."""
        row, position = self.window(sequence)
        return np.asarray(self.operations["model"](row))[0, position]

    def reply(self, session: ChatSession, text: str, generator: Generator) -> str:
        """Reply to ``text`` after the conversation in ``session``, appending the user's
        and the assistant's ``Message`` to it; sampled with ``generator`` (advanced), so
        the same session, text and generator state replay the same reply. Stops at the
        end mark or ``max_reply`` characters. Each character is predicted from up to the
        last ``context`` ids of the conversation (earlier turns, ``text``, the reply so
        far; ``window``)."""
        if not isinstance(session, ChatSession):
            raise TypeError(f"session must be a ChatSession, got {type(session).__name__}")
        if not isinstance(generator, Generator):
            raise TypeError("reply needs a tc.random.Generator (the same state replays the "
                            f"same reply), got {type(generator).__name__}")
        sequence = self.encode_conversation(session.messages) + self.encode(text) + [TURN]
        start = len(sequence)
        c = self.config
        never = [PAD] + [mark for mark in MARKS.values() if mark != END]
        for _ in range(c["max_reply"]):
            logits = self.next_logits(sequence)
            logits[never] = -np.inf  # never part of a reply
            drawn = int(sample(logits, generator, c["temperature"], c["top_k"] or None))
            if drawn == END:
                break
            sequence.append(drawn)
        answer = self.decode(sequence[start:])
        session.append(Message("user", text))
        session.append(Message("assistant", answer))
        return answer


def _refuse_earlier_model(directory: pathlib.Path) -> None:
    """Raise ``ArtifactError`` when ``directory`` holds a Chatbot saved with the earlier
    character-window model; anything else is left to ``Tool.from_pretrained``."""
    path = directory / CONFIG_FILE
    if not path.is_file():
        return
    try:
        document = read_json(path, MAX_CONFIG_BYTES, what="tool file")
    except ArtifactError:
        return
    operations = document.get("operations") if isinstance(document, dict) else None
    model = operations.get("model") if isinstance(operations, dict) else None
    if isinstance(model, dict) and model.get("qualified_name") == EARLIER_MODEL:
        raise ArtifactError(
            f"is {EARLIER_MODEL!r}: the directory holds a Chatbot saved with the earlier "
            "character-window model, whose parameters have no place in this Chatbot's "
            f"transformer ({ChatTransformer.qualified_name!r}); train a Chatbot on the same "
            "dialogue with Trainer.from_tool and save it again", path=path,
            field="operations.model.qualified_name")


class ChatSession:
    """A conversation: a list of ``Message`` turns, saved and loaded apart from the
    model (``save(path)`` writes strict JSON atomically; ``ChatSession.load(path)``
    validates every field and raises ``ArtifactError`` naming it)."""

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self.messages: list[Message] = []
        for message in messages:
            self.append(message)

    def append(self, message: Message) -> None:
        """Add one turn."""
        if not isinstance(message, Message):
            raise TypeError(f"a session holds Message turns, got {type(message).__name__}")
        self.messages.append(message)

    def __len__(self) -> int:
        return len(self.messages)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatSession) and other.messages == self.messages

    def __repr__(self) -> str:
        return f"ChatSession({len(self.messages)} messages)"

    def exchanges(self) -> tuple[list[ChatSession], list[str]]:
        """Training pairs from a recorded conversation: for each assistant turn that
        answers a user turn, the conversation up to that user turn (a ``ChatSession``)
        and the assistant's text; what ``Trainer.capture`` takes for a Chatbot."""
        inputs: list[ChatSession] = []
        targets: list[str] = []
        for k, message in enumerate(self.messages):
            if message.role == "assistant" and k and self.messages[k - 1].role == "user":
                inputs.append(ChatSession(self.messages[:k]))
                targets.append(message.content)
        return inputs, targets

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Write the session to ``path`` atomically (old file or new, never half)."""
        return atomic_write_json(path, {
            "format": SESSION_FORMAT, "version": SESSION_VERSION,
            "messages": [m.to_record() for m in self.messages]})

    @classmethod
    def load(cls, path: str | os.PathLike) -> ChatSession:
        """A session read back from ``save``'s file, every field checked."""
        r = Fields(path)
        document = r.object(read_json(path, MAX_SESSION_BYTES, what="chat session"),
                            "(document)")
        r.keys(document, "(document)", ("format", "version", "messages"))
        check_header(document, SESSION_FORMAT, SESSION_VERSION, path)
        messages = []
        for k, entry in enumerate(r.list(document["messages"], "messages")):
            field = f"messages[{k}]"
            r.keys(r.object(entry, field), field, ("role", "content"))
            role = r.choice(entry["role"], f"{field}.role", ROLES)
            messages.append(Message(role, r.string(entry["content"], f"{field}.content")))
        return cls(messages)


__all__ = ["Chatbot", "ChatSession", "ChatTransformer", "VocabularyError", "ALPHABET",
           "masked_cross_entropy", "MARKS", "PAD", "TURN", "END"]

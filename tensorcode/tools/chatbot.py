"""``Chatbot``: a small character-level model that replies to a text, one character at a
time, and the ``ChatSession`` (its conversation) saved apart from the model.

The model reads a fixed window of the last ``context`` characters and scores the next
one (a makemore-style MLP over a character window: an embedding per character, one
``tanh`` hidden layer, logits over the vocabulary). It is deliberately small: its
training step lowers in seconds, and a reply costs one plan call per character.

Vocabulary policy: the config's ``alphabet`` (default ``ALPHABET``: lowercase letters,
digits, space and ``.,!?'-_``) lists every character a text may hold, used exactly as
written (no case folding); three more ids mark the start (the window's left padding),
the end of the user's turn and the end of the reply. A text holding any other
character raises ``VocabularyError`` naming it and its position.

Training (``Trainer.from_tool(chatbot)``): ``inputs`` and ``targets`` are equal-length
lists of texts (a user turn and the reply to it). The model is teacher-forced: for each
pair the sequence ``input + <turn> + target + <end>`` is cut into windows, and the model
is trained with cross-entropy to predict each character of the target and the end mark
from the true characters before it (``teacher_forced(inputs, targets)`` is the
supervised output; rows padded to a power of two carry zero weight in the loss).

``chatbot.reply(session, text, generator)`` appends the user's ``Message`` and the
reply's to ``session`` and returns the reply, sampled with ``tc.random.sample`` (the
config's ``temperature`` and ``top_k``): the same generator state gives the same reply.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from .. import nn
from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import log_softmax, maximum
from ..compiler.trace.expr import Expr
from ..errors import TensorCodeError, TrainingError
from ..files import Fields, atomic_write_json, read_json
from ..nn import init as initializers
from ..operations.base import Operation, row_bucket
from ..operations.layers import checked_seed, positive_int
from ..runtime.random import Generator, sample
from ..text import ROLES, Message
from . import checks
from .base import ConfigError, Tool

#: the default alphabet: every character a text may hold
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 .,!?'-_"
#: the ids before the alphabet's: window padding, end of the user's turn, end of reply
START, TURN, END = 0, 1, 2
SPECIAL = 3
SESSION_FORMAT = "tensorcode.chat-session"
SESSION_VERSION = 1
#: a session file is small: refuse anything larger before reading it
MAX_SESSION_BYTES = 8 * 1024 * 1024


class VocabularyError(TensorCodeError, ValueError):
    """A text holds a character outside the chatbot's alphabet."""


class CharWindowModel(Operation):
    """Next-character logits ``[rows, vocab]`` from windows of ids ``[rows, context]``.

    Rows are padded to a power of two (zero windows), so a few plans serve every call;
    the caller drops or zero-weights the padded rows."""

    qualified_name = "tensorcode.tools.CharWindowModel"

    def __init__(self, vocab: int, context: int, dim: int, hidden: int, seed: int = 0,
                 backend: str | None = None) -> None:
        self.vocab, self.context = positive_int("vocab", vocab), positive_int("context",
                                                                               context)
        self.dim, self.hidden = positive_int("dim", dim), positive_int("hidden", hidden)
        self.seed = checked_seed(seed)
        self._initialize(backend)

    def configuration(self) -> dict:
        return {"vocab": self.vocab, "context": self.context, "dim": self.dim,
                "hidden": self.hidden, "dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> tuple[nn.Embedding, nn.Linear,
                                                              nn.Linear]:
        def pick(init: Any) -> Any:
            return init if fresh else initializers.zeros()

        embedding = nn.Embedding(tape, self.vocab, self.dim, name="embedding",
                                 init=pick(initializers.normal(self.seed * 16, 1.0)))
        hidden = nn.Linear(tape, self.context * self.dim, self.hidden, name="hidden",
                           init=pick(initializers.xavier(self.seed * 16 + 1)))
        out = nn.Linear(tape, self.hidden, self.vocab, name="out",
                        init=pick(initializers.xavier(self.seed * 16 + 2)))
        return embedding, hidden, out

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        if len(args) != 1:
            raise TypeError(f"CharWindowModel takes (windows,), got {len(args)} arguments")
        windows = np.asarray(args[0])
        if windows.ndim != 2 or windows.shape[1] != self.context or windows.shape[0] == 0 \
                or windows.dtype.kind not in "iu":
            raise TypeError(f"windows are integer ids [rows, {self.context}], got "
                            f"{windows.dtype}{list(windows.shape)}")
        if windows.min() < 0 or windows.max() >= self.vocab:
            raise ValueError(f"window ids must lie in [0, {self.vocab})")
        rows = row_bucket(windows.shape[0])
        padded = np.zeros((rows, self.context), np.int64)
        padded[:windows.shape[0]] = windows
        return [padded]

    def express(self, built: Any, inputs: Sequence[Expr]) -> Expr:
        embedding, hidden, out = built
        (ids,) = inputs
        rows = ids.shape[0]
        flat = embedding(ids).reshape((rows, self.context * self.dim))
        return out(hidden(flat).tanh())


def masked_cross_entropy(logits: Expr, target: Any) -> Expr:
    """Mean ``-log softmax(logits)[class]`` over the rows whose one-hot target row is
    nonzero (padded rows carry an all-zero row and no weight)."""
    picked = (log_softmax(logits) * target).sum()
    return -picked / maximum(target.sum(), 1.0)


class Chatbot(Tool):
    """A character-level chatbot (see the module docstring).

    Config: ``alphabet``, ``context`` (window length), ``dim``, ``hidden``,
    ``max_reply`` (characters), ``temperature``, ``top_k`` (0: no cut), ``seed``."""

    objective: ClassVar[str] = "masked_cross_entropy"
    prediction: ClassVar[str] = "reply"
    losses: ClassVar[dict[str, Any]] = {"masked_cross_entropy": masked_cross_entropy}
    defaults: ClassVar[dict[str, Any]] = {"alphabet": ALPHABET, "context": 8, "dim": 16,
                                          "hidden": 64, "max_reply": 60, "temperature": 0.5,
                                          "top_k": 0, "seed": 0}
    size_keys: ClassVar[tuple[str, ...]] = ("alphabet", "context", "dim", "hidden")

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        alphabet = config["alphabet"]
        if not isinstance(alphabet, str) or not alphabet or len(set(alphabet)) != len(
                alphabet):
            raise ConfigError("alphabet", "must be a nonempty text of distinct characters")
        for key in ("context", "dim", "hidden", "max_reply"):
            checks.positive(config, key)
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
        """The number of ids: the alphabet plus the three marks."""
        return SPECIAL + len(self.config["alphabet"])

    def build_operations(self) -> Mapping[str, Operation]:
        c = self.config
        return {"model": CharWindowModel(self.vocab, c["context"], c["dim"], c["hidden"],
                                         seed=c["seed"], backend=self.backend)}

    # -- texts and windows ----------------------------------------------------------------
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
        """The text of alphabet ids (marks are dropped)."""
        alphabet = self.config["alphabet"]
        return "".join(alphabet[i - SPECIAL] for i in ids if i >= SPECIAL)

    def _window(self, sequence: Sequence[int], end: int) -> list[int]:
        context = self.config["context"]
        before = list(sequence[max(0, end - context):end])
        return [START] * (context - len(before)) + before

    def teacher_windows(self, inputs: Any, targets: Any) -> tuple[np.ndarray, np.ndarray]:
        """Teacher-forced windows ``[positions, context]`` and the id after each: what
        ``teacher_forced`` scores and ``check_target`` supervises."""
        if isinstance(inputs, str) or not isinstance(inputs, (list, tuple)) or not inputs:
            raise TypeError("Chatbot inputs are a nonempty list of texts")
        if isinstance(targets, str) or not isinstance(targets, (list, tuple)):
            raise TrainingError("Chatbot targets are a list of texts, one per input")
        if len(targets) != len(inputs):
            raise TrainingError(f"Chatbot inputs and targets must be equal-length lists of "
                                f"texts: {len(inputs)} inputs but {len(targets)} targets")
        windows, following = [], []
        for k, (said, answer) in enumerate(zip(inputs, targets)):
            prompt = self.encode(said, f"inputs[{k}]") + [TURN]
            try:
                reply = self.encode(answer, f"targets[{k}]") + [END]
            except (TypeError, VocabularyError) as error:
                raise TrainingError(str(error)) from None
            sequence = prompt + reply
            for end in range(len(prompt), len(sequence)):
                windows.append(self._window(sequence, end))
                following.append(sequence[end])
        return np.asarray(windows, np.int64), np.asarray(following, np.int64)

    # -- the objective --------------------------------------------------------------------
    def teacher_forced(self, inputs: Any, targets: Any) -> Any:
        """Logits ``[padded positions, vocab]`` for each target character (and end
        mark) given the true characters before it: the supervised output."""
        windows, _ = self.teacher_windows(inputs, targets)
        return self.operations["model"](windows)

    def supervised_output(self, inputs: Any) -> Any:
        """Not defined from the inputs alone: the supervised output is teacher-forced."""
        raise TrainingError("a Chatbot's supervised output reads the target replies "
                            "(teacher forcing): use teacher_forced(inputs, targets), or "
                            "Trainer.from_tool(chatbot).capture(inputs, targets, ...)")

    def output(self, inputs: Any) -> Any:
        """Not defined from the inputs alone (see ``supervised_output``)."""
        return self.supervised_output(inputs)

    def check_target(self, inputs: Any, target: Any) -> Any:
        """One-hot rows ``[padded positions, vocab]`` (zero rows for padding)."""
        windows, following = self.teacher_windows(inputs, target)
        onehot = np.zeros((row_bucket(len(windows)), self.vocab), np.float32)
        onehot[np.arange(len(following)), following] = 1.0
        return onehot

    # -- replying -------------------------------------------------------------------------
    def next_logits(self, sequence: Sequence[int]) -> np.ndarray:
        """Next-id logits ``[vocab]`` after ``sequence`` (one plan call)."""
        window = np.asarray([self._window(sequence, len(sequence))], np.int64)
        return np.asarray(self.operations["model"](window))[0]

    def reply(self, session: ChatSession, text: str, generator: Generator) -> str:
        """Reply to ``text``, appending the user's and the assistant's ``Message`` to
        ``session``; sampled with ``generator`` (advanced), so the same generator state
        replays the same reply. Stops at the end mark or ``max_reply`` characters. The
        model sees ``text`` (its last ``context`` characters) and the reply so far, not
        the earlier turns: the session records the conversation, it does not condition
        the reply."""
        if not isinstance(session, ChatSession):
            raise TypeError(f"session must be a ChatSession, got {type(session).__name__}")
        if not isinstance(generator, Generator):
            raise TypeError("reply needs a tc.random.Generator (the same state replays the "
                            f"same reply), got {type(generator).__name__}")
        sequence = self.encode(text) + [TURN]
        start = len(sequence)
        c = self.config
        for _ in range(c["max_reply"]):
            logits = self.next_logits(sequence)
            logits[START] = logits[TURN] = -np.inf  # never part of a reply
            drawn = int(sample(logits, generator, c["temperature"], c["top_k"] or None))
            if drawn == END:
                break
            sequence.append(drawn)
        answer = self.decode(sequence[start:])
        session.append(Message("user", text))
        session.append(Message("assistant", answer))
        return answer


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
        if r.string(document["format"], "format") != SESSION_FORMAT:
            raise r.fail("format", f"is {document['format']!r}, expected {SESSION_FORMAT!r}")
        if r.integer(document["version"], "version") != SESSION_VERSION:
            raise r.fail("version", f"{document['version']} is not supported (this reader "
                         f"reads version {SESSION_VERSION})")
        messages = []
        for k, entry in enumerate(r.list(document["messages"], "messages")):
            field = f"messages[{k}]"
            r.keys(r.object(entry, field), field, ("role", "content"))
            role = r.choice(entry["role"], f"{field}.role", ROLES)
            messages.append(Message(role, r.string(entry["content"], f"{field}.content")))
        return cls(messages)


__all__ = ["Chatbot", "ChatSession", "CharWindowModel", "VocabularyError", "ALPHABET",
           "masked_cross_entropy"]

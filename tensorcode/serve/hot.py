"""The fast path of a single request: a body the program claims, straight to answer bytes.

Most requests a router serves are well-formed cases its program claims. For those this
module skips what the general path spends its time on (a dict per document, the
validator's walk, a dict per answer, a JSON writer): msgspec decodes the body into a
typed struct of exactly the contract, the bound compiled call returns Python floats and
the answer is the router's precomputed bytes around the numbers' text. Whatever it does
not take (``None``) goes to the general path, the shared strict reader and validator of
``distill.inputs`` and ``distill.router.decide``, so every refusal, escalation and
message is the general path's own.

A body is taken only when the general path would provably read the same numbers and
answer the same:

- it holds no backslash, so every key is its raw text and no repeated key hides behind
  an escape;
- msgspec decodes it as the contract's struct (in C): an object of exactly the
  contract's names (an unknown or a missing one fails), each value a number (never a
  boolean, a string or ``null``) or nested lists of exactly the declared lengths, every
  number finite (``NaN``/``Infinity`` are not JSON and msgspec refuses a number past
  float64's range, written as a decimal or as an integer);
- it has one colon per member (plus those inside the names), so no key was repeated
  (msgspec, like orjson, keeps a repeated key's last value; the strict reader refuses);
- the program claims the case and its outputs are finite.

The nesting is the contract's (at most a few levels) and the size was checked before.
"""

from __future__ import annotations

import math
import threading
from typing import Annotated, Any

import numpy as np

from ..distill.cases import CLAIM_THRESHOLD, COVERED
from ..distill.inputs import MAX_DEPTH
from ..distill.router import PROGRAM
from ..extras import installed
from .answers import dumps

#: the serve extra's typed JSON decoder; without it every request takes the general path
msgspec: Any = installed("msgspec")

_INF = math.inf


def value_type(shape: tuple[int, ...]) -> Any:
    """The msgspec type of one input of ``shape``: a float, or lists of exactly the
    declared lengths nesting floats."""
    kind: Any = float
    for size in reversed(shape):
        kind = Annotated[list[kind], msgspec.Meta(min_length=size, max_length=size)]
    return kind


def contract_struct(contract: dict[str, tuple[int, ...]], what: str) -> Any:
    """A msgspec struct type of exactly ``contract``'s names (renamed from ``f0``,
    ``f1``, ... so any text is a valid name) that refuses unknown ones."""
    fields = [(f"f{i}", value_type(shape)) for i, shape in enumerate(contract.values())]
    return msgspec.defstruct(what, fields, forbid_unknown_fields=True,
                             rename={f"f{i}": name for i, name in enumerate(contract)})


class SingleAnswer:
    """``answer(body)``: the JSON bytes of the program's answer for a body it claims,
    else ``None`` (see the module's rules). Built by ``single_answer``."""

    def __init__(self, decoder: Any, colons: int, run: Any, at_covered: int,
                 at_outputs: tuple[int, ...], pieces: tuple[bytes, ...],
                 shape: tuple[int, ...]) -> None:
        self._decode = decoder.decode
        self._colons = colons
        self._run = run
        self._at_covered = at_covered
        self._at_outputs = at_outputs
        self._pieces = pieces
        # msgspec raises UnicodeDecodeError (a ValueError) for text that is not UTF-8
        self._errors = (msgspec.MsgspecError, ValueError)
        self._shape = shape
        self._local = threading.local()

    def _buffer(self) -> np.ndarray:
        """This thread's input array, made once: filling it costs less than making an
        array per call (the call reads it before the next fill on this thread)."""
        buffer = np.empty(self._shape, dtype=np.float64)
        self._local.buffer = buffer
        return buffer

    def answer(self, body: bytes) -> bytes | None:
        if b"\\" in body:
            return None
        try:
            case = self._decode(body)
        except self._errors:
            return None
        if body.count(b":") != self._colons:
            return None
        buffer = getattr(self._local, "buffer", None)
        if buffer is None:
            buffer = self._buffer()
        buffer[...] = case.f0
        try:
            produced = self._run(buffer)
        except Exception:  # a failing program: the general path escalates and says why
            return None
        if self._at_covered >= 0 and not CLAIM_THRESHOLD < produced[self._at_covered] < _INF:
            return None  # abstained, or a non-finite covered: the general path escalates
        pieces = self._pieces
        if len(self._at_outputs) == 1:
            value = produced[self._at_outputs[0]]
            if not math.isfinite(value):
                return None
            return pieces[0] + dumps(value) + pieces[1]
        parts = [pieces[0]]
        for at, piece in zip(self._at_outputs, pieces[1:]):
            value = produced[at]
            if not math.isfinite(value):
                return None
            parts.append(dumps(value))
            parts.append(piece)
        return b"".join(parts)


def single_answer(inputs: dict[str, tuple[int, ...]], outputs: dict[str, tuple[int, ...]],
                  program: Any) -> SingleAnswer | None:
    """The fast path for a router of one input and scalar outputs over a compiled plan
    with a bound scalar call (``Algorithm.validated_scalars``), else ``None``."""
    if msgspec is None or len(inputs) != 1 or any(outputs[name] != () for name in outputs):
        return None
    (shape,) = inputs.values()
    if len(shape) + 1 > MAX_DEPTH:
        return None
    algorithm = getattr(program, "algorithm", program)
    scalars = getattr(algorithm, "validated_scalars", None)
    direct = scalars() if callable(scalars) else None
    if direct is None:
        return None
    run, names = direct
    if any(name not in names for name in outputs):
        return None
    decoder = msgspec.json.Decoder(contract_struct(inputs, "Case"))
    colons = sum(1 + name.count(":") for name in inputs)
    at_covered = names.index(COVERED) if COVERED in names else -1
    at_outputs = tuple(names.index(name) for name in outputs)
    labels = [dumps(name) + b":" for name in outputs]
    tail = b',"escalated":false,"reason":null,"path":' + dumps(PROGRAM) + b"}"
    pieces = tuple([b"{" + labels[0]] + [b"," + label for label in labels[1:]] + [tail])
    return SingleAnswer(decoder, colons, run, at_covered, at_outputs, pieces, shape)


__all__ = ["SingleAnswer", "contract_struct", "single_answer", "value_type"]

"""The author interface: a ``Model`` answers a ``ModelRequest`` with reply text.

Distillation only needs text in and text out, so the protocol is one method. Anything
with ``complete(request) -> str`` is a model; a plain callable from prompt text to reply
text is accepted wherever a model is (``as_author``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import TensorCodeError


class ModelError(TensorCodeError):
    """A model could not produce a reply: refused, timed out, failed or answered with
    something that is not a chat completion. The message says which and what to do."""

    def __init__(self, message: str, status: int | None = None, attempts: int = 1) -> None:
        self.status = status
        self.attempts = attempts
        super().__init__(message)


@dataclass(frozen=True)
class ModelRequest:
    """One request to an author.

    ``prompt`` is the user message; ``system`` an optional system message;
    ``max_tokens`` and ``temperature`` are passed through when set (``None`` leaves the
    server's default); ``metadata`` is for the caller's bookkeeping (the distillation
    loop puts the attempt number there) and is never sent. ``deadline``, when set, is
    how many seconds the whole request may take (``distill`` passes what is left of its
    own deadline); a model that can bound its wait honours it.
    """

    prompt: str
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str):
            raise TypeError(f"ModelRequest.prompt must be text, got {type(self.prompt).__name__}")
        if self.deadline is not None and not (
                isinstance(self.deadline, (int, float)) and not isinstance(self.deadline, bool)
                and self.deadline > 0):
            raise ModelError(f"ModelRequest.deadline must be positive seconds or None, got "
                             f"{self.deadline!r}")


@runtime_checkable
class Model(Protocol):
    """Anything that turns a request into reply text."""

    def complete(self, request: ModelRequest) -> str:  # pragma: no cover - protocol
        """The reply text to ``request``."""
        ...


def as_author(author: Any) -> Callable[[ModelRequest], str]:
    """Normalize an author (a ``Model`` or a callable from prompt text to reply text) to
    a function of a request; anything else is refused with a clear message."""
    if hasattr(author, "complete") and callable(author.complete):
        return author.complete
    if callable(author):
        return lambda request: author(request.prompt)
    raise TypeError(f"an author is a Model with complete(ModelRequest) -> str or a callable "
                    f"from prompt text to reply text; got {type(author).__name__}")


def ask(author: Any, request: ModelRequest) -> str:
    """One reply from ``author``; a reply that is not text is a ``ModelError``."""
    reply = as_author(author)(request)
    if not isinstance(reply, str):
        raise ModelError(f"the author returned {type(reply).__name__}, not reply text; an "
                         "author must return the reply as a string")
    return reply

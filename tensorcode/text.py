"""``Message``: one turn of a conversation (a role and its content), as a record.

A frozen record, so traces capture it and experience files hold it, through the
``message`` codec entry: ``session.save(path, operations, codecs={"message": Message})``
and ``load_experience(path, operations, codecs={"message": Message})``. Without the
entry a file holding messages is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

#: the roles a message may have
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class Message:
    """A conversation turn: ``role`` (one of ``ROLES``) and the text ``content``."""

    role: str
    content: str
    record_fields: ClassVar[tuple[str, ...]] = ("role", "content")

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"a message role is one of {ROLES}, got {self.role!r}")
        if not isinstance(self.content, str):
            raise TypeError(f"a message's content is a text, got "
                            f"{type(self.content).__name__}")

    def to_record(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content}

    @classmethod
    def from_record(cls, fields: dict[str, Any]) -> Message:
        return cls(fields["role"], fields["content"])


def message_codecs() -> dict[str, type]:
    """The allowlist entry for ``Message`` records: ``{"message": Message}``."""
    return {"message": Message}


__all__ = ["Message", "ROLES", "message_codecs"]

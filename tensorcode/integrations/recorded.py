"""Replaying recorded replies, so a distillation run is reproducible without a model.

A recording is a JSON file ``{"format": "tensorcode.recorded-replies", "version": 1,
"replies": ["...", ...]}``. Replies are handed out in order, one per request; the
prompts received are kept so a test or a reader can see what the author was shown.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from ..files import atomic_write_json as write_json_atomic
from ..files import check_header, read_json
from .model import ModelError, ModelRequest

FORMAT = "tensorcode.recorded-replies"
VERSION = 1
MAX_FILE_BYTES = 8 * 1024 * 1024


class RecordedModel:
    """A ``Model`` that replays ``replies`` in order; ``prompts`` lists what it was asked."""

    def __init__(self, replies: str | os.PathLike | Sequence[str]) -> None:
        if isinstance(replies, (str, os.PathLike)):
            self.path: str | None = str(replies)
            self.replies = load_replies(replies)
        else:
            self.path = None
            replies = list(replies)
            for i, reply in enumerate(replies):
                if not isinstance(reply, str):
                    raise TypeError(f"reply {i} is {type(reply).__name__}; replies are text")
            self.replies = replies
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = f"{self.path!r}" if self.path else f"{len(self.replies)} replies"
        return f"RecordedModel({where})"

    @property
    def remaining(self) -> int:
        """Replies not handed out yet."""
        return len(self.replies) - len(self.prompts)

    def complete(self, request: ModelRequest | str) -> str:
        """The next recorded reply (the prompt is kept in ``prompts``); running out
        raises ``ModelError``."""
        prompt = request if isinstance(request, str) else request.prompt
        with self._lock:
            index = len(self.prompts)
            if index >= len(self.replies):
                raise ModelError(f"the recording has {len(self.replies)} replies and all were "
                                 "used; record more replies or ask for fewer attempts")
            self.prompts.append(prompt)
            return self.replies[index]


def load_replies(path: str | os.PathLike) -> list[str]:
    """Validated replies from a recording file (``ArtifactError`` names what is wrong)."""
    path = Path(path)

    document: Any = read_json(path, MAX_FILE_BYTES)
    if not isinstance(document, dict):
        raise ArtifactError("expected a JSON object with 'format', 'version' and 'replies'", path)
    check_header(document, FORMAT, VERSION, path)
    replies = document.get("replies")
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        raise ArtifactError("expected a list of reply strings", path, "replies")
    return list(replies)


def save_replies(path: str | os.PathLike, replies: Sequence[str], note: str = "") -> None:
    """Write a recording atomically (temp file, fsync, replace, fsync the directory)."""
    document: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    if note:
        document["note"] = note
    document["replies"] = [str(r) for r in replies]
    write_json_atomic(path, document)

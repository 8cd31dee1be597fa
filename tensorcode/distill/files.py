"""Atomic JSON files and bounded, validated reads.

A saved program is read by other processes (``tensorcode route``) while it may be
rewritten, so every write goes to a temp file in the same directory, is fsynced, replaces
the target in one ``os.replace`` and fsyncs the directory: the path holds the old file or
the new one, never half of either.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ArtifactError

MAX_JSON_BYTES = 64 * 1024 * 1024


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                             dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    fsync_directory(directory)


def write_json_atomic(path: str | os.PathLike, document: Any) -> None:
    text = json.dumps(document, indent=1, sort_keys=False, allow_nan=False)
    write_bytes_atomic(path, (text + "\n").encode("utf-8"))


def fsync_directory(directory: str | os.PathLike) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(descriptor)
    except OSError:  # pragma: no cover - some filesystems refuse directory fsync
        pass
    finally:
        os.close(descriptor)


def read_json(path: str | os.PathLike, limit: int = MAX_JSON_BYTES) -> Any:
    """A JSON document from ``path``, refusing files over ``limit`` bytes and anything
    that is not JSON (``ArtifactError`` names the file)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limit:
            raise ArtifactError(f"the file is {size} bytes, more than the {limit} allowed", path)
        raw = path.read_bytes()
    except OSError as error:
        raise ArtifactError(f"cannot read: {error.strerror}", path) from None
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as error:
        raise ArtifactError(f"not valid JSON ({error})", path) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")

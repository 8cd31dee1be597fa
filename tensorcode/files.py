"""Atomic file writes and bounded JSON reads, shared by every artifact TensorCode saves.

A reader (another process serving a program, a resumed training run) must never see
half a file: bytes go to a temp file in the target's directory, are fsynced, replace the
target in one ``os.replace``, and the directory is fsynced so the rename survives a
crash. The path then holds the old file or the new one, never a mixture.
"""

from __future__ import annotations

import json
import os
import pathlib
import uuid
from typing import Any, BinaryIO, Callable

from .errors import ArtifactError

#: JSON artifacts larger than this are refused before they are parsed
MAX_JSON_BYTES = 64 * 1024 * 1024


def fsync_directory(directory: str | os.PathLike) -> None:
    """Make a rename or unlink in ``directory`` durable (a no-op where the platform or
    filesystem cannot fsync a directory)."""
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


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> Any:
    """Write ``path`` through a temp file in the same directory: ``write(file)``, fsync,
    ``os.replace``, fsync the directory. Returns what ``write`` returned; on any failure
    the temp file is removed and ``path`` is untouched."""
    path = pathlib.Path(path)
    directory = path.parent
    temp = directory / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(temp, "wb") as handle:
            result = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            temp.unlink()
        except FileNotFoundError:
            pass
        raise
    fsync_directory(directory)
    return result


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> pathlib.Path:
    """``path`` holds exactly ``data`` afterwards, or its old contents if this failed."""
    atomic_write(path, lambda handle: handle.write(data))
    return pathlib.Path(path)


def atomic_write_json(path: str | os.PathLike, document: Any) -> pathlib.Path:
    """Strict JSON (no NaN or infinity), indented, newline-terminated, written atomically."""
    text = json.dumps(document, indent=1, allow_nan=False)
    return atomic_write_bytes(path, (text + "\n").encode("utf-8"))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: str | os.PathLike, limit: int = MAX_JSON_BYTES,
              what: str = "file") -> Any:
    """A JSON document from ``path``, refusing files over ``limit`` bytes, non-UTF-8
    text, NaN/infinity constants and anything that is not JSON (``ArtifactError`` names
    the file)."""
    path = pathlib.Path(path)
    try:
        size = path.stat().st_size
        if size > limit:
            raise ArtifactError(f"the {what} is {size} bytes, more than the {limit} allowed",
                                path)
        raw = path.read_bytes()
    except OSError as error:
        raise ArtifactError(f"cannot read the {what}: {error.strerror or error}", path) from None
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise ArtifactError(f"the {what} is not UTF-8 text", path) from None
    except RecursionError:
        raise ArtifactError("the JSON nests too deeply", path) from None
    except ValueError as error:
        raise ArtifactError(f"not valid JSON ({error})", path) from None


__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_json", "fsync_directory",
           "read_json", "MAX_JSON_BYTES"]

"""Atomic file and directory writes, shared by every artifact TensorCode saves.

A reader (another process serving a program, a resumed training run) must never see
half a file: bytes go to a temp file in the target's directory, are fsynced, replace the
target in one ``os.replace``, and the directory is fsynced so the rename survives a
crash. The path then holds the old file or the new one, never a mixture.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

from .strict_json import dumps


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


#: the temporaries a writer leaves beside its target: ``.NAME.tmp-PID-HEX`` (a file or
#: a directory being filled) and ``.NAME.old-PID-HEX`` (a directory renamed aside)
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?:tmp|old)-(?P<pid>[0-9]{1,10})-[0-9a-f]{8}$")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (a process we may not signal
    exists too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def remove_stale_temporaries(directory: str | os.PathLike, name: str | None = None) -> int:
    """Remove the temporaries that writers killed mid-save left in ``directory`` (those
    of ``name`` only, where given): a ``.NAME.tmp-PID-*`` or ``.NAME.old-PID-*`` whose
    process no longer exists. A live writer's temporaries (this process's included)
    are left alone. Best effort: returns how many were removed. Every atomic save calls
    this for its target, so a kill costs disk only until the next save there."""
    removed = 0
    try:
        entries = list(os.scandir(os.fspath(directory)))
    except OSError:
        return 0
    for entry in entries:
        match = _TEMPORARY.match(str(entry.name))
        if match is None or (name is not None and match["name"] != name) or \
                _alive(int(match["pid"])):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed += 1
        except OSError:
            pass
    return removed


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> Any:
    """Write ``path`` through a temp file in the same directory: ``write(file)``, fsync,
    ``os.replace``, fsync the directory. Returns what ``write`` returned; on any failure
    the temp file is removed and ``path`` is untouched. Temporaries of ``path`` that a
    killed writer left behind are removed first (``remove_stale_temporaries``)."""
    path = pathlib.Path(path)
    directory = path.parent
    remove_stale_temporaries(directory, path.name)
    temp = directory / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(temp, "wb") as handle:
            result = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    fsync_directory(directory)
    return result


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> pathlib.Path:
    """``path`` holds exactly ``data`` afterwards, or its old contents if this failed."""
    atomic_write(path, lambda handle: handle.write(data))
    return pathlib.Path(path)


def atomic_write_json(path: str | os.PathLike, document: Any) -> pathlib.Path:
    """Strict JSON (no NaN or infinity), indented, newline-terminated, written atomically."""
    return atomic_write_bytes(path, dumps(document))


def atomic_write_text(path: str | os.PathLike, text: str) -> pathlib.Path:
    """``path`` holds ``text`` as UTF-8 afterwards, or its old contents if this failed."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def replace_directory(target: str | os.PathLike, fill: Callable[[pathlib.Path], Any],
                      owned: Iterable[str]) -> pathlib.Path:
    """Build a directory artifact beside ``target`` with ``fill(temp_dir)``, fsync it and
    rename it into place, so a reader sees the old artifact or the new one.

    ``owned`` names the files the artifact consists of. Where ``target`` does not exist
    the commit is one rename. Where it holds only owned files, the old directory is
    renamed aside, the new one renamed in and the old removed (a crash between the two
    renames leaves the old artifact complete under ``.<name>.old-<id>`` beside it).
    Where it holds anything else, the new files replace the owned ones one at a time,
    each atomically, in ``owned`` order (so list the commit record last), and the rest
    is left alone."""
    target = pathlib.Path(target)
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(parent, target.name)
    owned = list(owned)
    temp = parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    try:
        fill(temp)
        for entry in temp.iterdir():
            _fsync_file(entry)
        fsync_directory(temp)
        if target.is_dir() and not {p.name for p in target.iterdir()} <= set(owned):
            for name in owned:
                if (temp / name).exists():
                    os.replace(temp / name, target / name)
            fsync_directory(target)
            shutil.rmtree(temp, ignore_errors=True)
            return target
        old = None
        if target.exists():
            old = parent / f".{target.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            os.replace(target, old)
        os.replace(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_directory(parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target


def _fsync_file(path: pathlib.Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "atomic_write_json",
           "fsync_directory", "replace_directory", "remove_stale_temporaries"]

"""Who may have written a file that will be executed or trusted: the rule ssh applies to
``~/.ssh``, in one place.

Whatever TensorCode executes from disk (a plan cache entry, an exported library) is read
only from a real (not linked) file or directory owned by the current user and writable
by nobody else: another user who can write there could swap the code between our check
and our use. ``check_owned`` raises ``Untrusted`` saying which rule failed.
"""

from __future__ import annotations

import os
import pathlib
import stat


class Untrusted(Exception):
    """A directory or file that cannot be trusted or used; the text says why."""


def check_owned(path: pathlib.Path, directory: bool) -> None:
    """Refuse ``path`` unless it is a real (not linked) directory or regular file owned
    by the current user and writable by nobody else (``OSError`` when it is missing)."""
    check_status(path, path.lstat(), directory)


def check_status(path: pathlib.Path, info: os.stat_result, directory: bool) -> None:
    """``check_owned`` of ``info``, the status of ``path`` (from ``lstat``, or ``fstat``
    of a descriptor opened without following links: the file then read is the one
    checked)."""
    kind = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    if not kind:
        raise Untrusted(f"{path} is not a {'directory' if directory else 'regular file'}")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise Untrusted(f"{path} is owned by uid {info.st_uid}, not by the current user")
    if info.st_mode & 0o022:
        raise Untrusted(f"{path} is writable by its group or by others "
                        f"(mode {stat.S_IMODE(info.st_mode):o})")


__all__ = ["Untrusted", "check_owned", "check_status"]

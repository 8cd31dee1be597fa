"""The plan cache's directory, trusted the way ssh trusts ``~/.ssh``: the rules both
compiled backends' caches follow, in one place.

Whatever executes from the cache (a Numba module and its machine code, an llvm object)
is read only from a directory the current user owns and nobody else can write:
``plans_directory()`` checks (and creates, ``0700``) the cache root, ``plans`` and its
``__pycache__`` (Numba's machine code), and ``check_owned`` (``files.ownership``: the rule exported
libraries follow too) an entry before it is read.
``locked`` serializes the processes filling one entry, and ``warn_once`` reports an
entry that was not used once per process. Importing this module loads neither backend.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import warnings
from collections.abc import Iterator

from ...errors import CacheError
from ...files.ownership import Untrusted, check_owned
from .counters import cache_dir


@contextlib.contextmanager
def locked(path: pathlib.Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (a lock file) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not POSIX: atomic renames only
            pass
        try:
            yield
        finally:
            try:
                import fcntl
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            except ImportError:  # pragma: no cover
                pass


_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """``message`` as a ``RuntimeWarning``, the first time ``key`` is seen in this
    process (an unusable entry is reported once, however often it is looked up)."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=5)


def trusted_directory(path: pathlib.Path) -> pathlib.Path:
    """``path``, created ``0700`` if missing, checked by ``check_owned`` and writable."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        check_owned(path, directory=True)
    except OSError as error:
        raise Untrusted(f"{path}: {error.strerror or error}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise Untrusted(f"{path} is not writable")
    return path


def plans_directory() -> pathlib.Path:
    """The cache's ``plans`` directory, checked: the cache root, ``plans`` and its
    ``__pycache__`` (Numba's machine code) each a real directory owned by the current
    user, writable by no one else and writable by us (each created ``0700``). Raises
    ``CacheError`` saying why the cache cannot be used."""
    try:
        root = trusted_directory(cache_dir())
        plans = trusted_directory(root / "plans")
        trusted_directory(plans / "__pycache__")
    except Untrusted as error:
        raise CacheError(f"the plan cache cannot be used: {error}") from None
    return plans


__all__ = ["Untrusted", "check_owned", "locked", "plans_directory", "trusted_directory",
           "warn_once"]

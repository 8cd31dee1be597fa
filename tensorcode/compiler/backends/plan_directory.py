"""The plan cache's directory, trusted the way ssh trusts ``~/.ssh``: the rules both
compiled backends' caches follow, in one place.

Whatever executes from the cache (a compiled Numba function, an llvm object) is read
only from a directory the current user owns and nobody else can write:
``plans_directory()`` checks (and creates, ``0700``) the cache root, ``plans`` and its
``__pycache__`` (compiled Numba functions), and ``check_owned``/``check_status``
(``files.ownership``: the rule exported libraries follow too) a file before and after it
is opened (``tagged_file`` then checks its authentication tag).
``locked`` serializes the processes filling one entry (its lock a regular file of ours,
nothing else), ``warn_once`` reports an entry that was not used once per process, and
``source_digest`` hashes the source a cache's entries depend on, for their keys.
Importing this module loads neither backend.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import stat
import warnings
from collections.abc import Iterator, Sequence

from ...errors import CacheError
from ...files.ownership import Untrusted, check_owned, check_status
from .counters import cache_dir

#: open flags that refuse a link at the path and never wait on a FIFO's other end
NO_FOLLOW = (getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_CLOEXEC", 0))


@contextlib.contextmanager
def locked(path: pathlib.Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (a lock file, created owner-only) for the duration
    of the block. Raises ``Untrusted`` when something that is not a regular file of the
    current user holds the path (a directory, a FIFO, a link): nothing else is opened,
    or waited on, as a lock."""
    try:
        with contextlib.suppress(FileNotFoundError):  # before opening: no FIFO or device
            _check_lock(path, path.lstat())
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | NO_FOLLOW, 0o600)
    except OSError as error:
        raise Untrusted(f"{path}: {error.strerror or error}") from None
    try:
        _check_lock(path, os.fstat(descriptor))  # the file opened is the one checked
        try:
            import fcntl
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not POSIX: atomic renames only
            pass
        yield
    finally:
        os.close(descriptor)  # closing the descriptor releases its lock


def _check_lock(path: pathlib.Path, info: os.stat_result) -> None:
    """A lock file holds nothing: it must be a regular file of ours, whatever its mode."""
    if not stat.S_ISREG(info.st_mode):
        raise Untrusted(f"{path} is not a regular file")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise Untrusted(f"{path} is owned by uid {info.st_uid}, not by the current user")


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
    ``__pycache__`` (compiled Numba functions) each a real directory owned by the current
    user, writable by no one else and writable by us (each created ``0700``). Raises
    ``CacheError`` saying why the cache cannot be used."""
    try:
        root = trusted_directory(cache_dir())
        plans = trusted_directory(root / "plans")
        trusted_directory(plans / "__pycache__")
    except Untrusted as error:
        raise CacheError(f"the plan cache cannot be used: {error}") from None
    return plans



def source_digest(names: Sequence[str]) -> str:
    """A SHA-256 of the source files of ``names`` (every module of a package, a single
    module's file), found without importing them: a warm process that only loads plans
    imports no code generator. Part of a cache key, so edited source never loads code
    compiled from the old."""
    import importlib.util

    files: set[pathlib.Path] = set()
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:  # pragma: no cover - a broken install
            raise CacheError(f"cannot find the source of {name} to key the plan cache")
        origin = pathlib.Path(spec.origin)
        files.update(origin.parent.glob("*.py") if spec.submodule_search_locations
                     else [origin])
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.read_bytes())
    return digest.hexdigest()

__all__ = ["NO_FOLLOW", "Untrusted", "check_owned", "check_status", "locked",
           "plans_directory", "source_digest", "trusted_directory", "warn_once"]

"""The secret that authenticates executable plan cache entries, kept outside the cache.

Every executable thing in the plan cache (the llvm backend's objects, the Numba
backend's index and machine code files) is used only when its HMAC-SHA-256 tag, keyed by
this secret, is valid: whoever can write the cache directory but not read the secret
cannot make an entry that is loaded.

The secret is 32 random bytes in the file named by ``TENSORCODE_CACHE_SECRET``, or else
``tensorcode/cache-secret`` under the user's config directory (``XDG_CONFIG_HOME`` or
``~/.config``), created on first use (mode ``0600`` in a ``0700`` directory). A secret file
that is not a regular file of the current user readable by it alone (or a directory
writable by others) is refused with a ``CacheError``, as ssh refuses a loose key.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import pathlib
import stat
import threading

from ...errors import CacheError

SECRET_ENV = "TENSORCODE_CACHE_SECRET"

_SECRETS: dict[str, bytes] = {}
_LOCK = threading.Lock()


def secret_path() -> pathlib.Path:
    """Where the cache secret lives (see the module docstring)."""
    env = os.environ.get(SECRET_ENV)
    if env:
        return pathlib.Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME")
    root = pathlib.Path(base).expanduser() if base else pathlib.Path.home() / ".config"
    return root / "tensorcode" / "cache-secret"


def _check_private(path: pathlib.Path, directory: bool) -> None:
    info = path.lstat()
    kind = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    what = "directory" if directory else "file"
    if not kind:
        raise CacheError(f"the cache secret's {what} {path} is not a real {what}")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise CacheError(f"the cache secret's {what} {path} is not owned by the current user")
    loose = 0o022 if directory else 0o077
    if info.st_mode & loose:
        raise CacheError(f"the cache secret's {what} {path} is open to others (mode "
                         f"{stat.S_IMODE(info.st_mode):o}); make it owner-only or delete it")


def secret() -> bytes:
    """The cache secret, created (owner-only) on first use."""
    path = secret_path()
    with _LOCK:
        known = _SECRETS.get(str(path))
        if known is not None:
            return known
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _check_private(path.parent, directory=True)
            if not os.path.lexists(path):
                _create(path)
            _check_private(path, directory=False)
            value = path.read_bytes()
        except OSError as error:
            raise CacheError(f"the cache secret {path} cannot be used: "
                             f"{error.strerror or error}") from None
        if len(value) != 32:
            raise CacheError(f"the cache secret {path} is not 32 bytes; delete it")
        _SECRETS[str(path)] = value
        return value


def _create(path: pathlib.Path) -> None:
    """Write a new secret to a private temporary file and link it into place, so a
    process racing this one sees either no secret or the whole one; the first link
    wins and every process then reads that one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(os.urandom(32))
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process linked first
            os.link(temporary, path)
    finally:
        os.unlink(temporary)


def forget() -> None:
    """Forget the secrets read by this process (read again on next use: after the file
    was replaced, and in tests)."""
    with _LOCK:
        _SECRETS.clear()


def authenticate(*parts: bytes) -> bytes:
    """The HMAC-SHA-256 of ``parts`` (joined unambiguously) under the secret."""
    mac = hmac.new(secret(), digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "little"))
        mac.update(part)
    return mac.digest()


__all__ = ["SECRET_ENV", "secret", "secret_path", "authenticate", "forget"]

"""The secret that authenticates executable plan cache entries, kept outside the cache.

Every executable thing in the plan cache (the llvm backend's objects, the Numba
backend's index and machine code files) is used only when its HMAC-SHA-256 tag, keyed by
this secret, is valid: whoever can write the cache directory but not read the secret
cannot make an entry that is loaded.

The secret is 32 random bytes in the file named by ``TENSORCODE_CACHE_SECRET``, or else
``tensorcode/cache-secret`` under the user's config directory (``XDG_CONFIG_HOME`` or
``~/.config``), created on first use (mode ``0600`` in a ``0700`` directory). A secret file
that is not a regular file of the current user readable by it alone (or a directory
writable by others) is refused with a ``CacheError``, as ssh refuses a loose key, and so
is a secret inside the plan cache directory (it would travel with every copy of it).
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
from .counters import cache_dir

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
    cache = cache_dir()
    with _LOCK:
        known = _SECRETS.get(f"{path}\0{cache}")
        if known is not None:
            return known
        _check_outside(path, cache)
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
        _SECRETS[f"{path}\0{cache}"] = value
        return value


def _check_outside(path: pathlib.Path, cache: pathlib.Path) -> None:
    """Refuse a secret inside the plan cache: it would travel with every copy of the
    cache (a backup, a CI cache step, a shared volume), and whoever holds a copy could
    tag entries that every process using the secret then loads."""
    resolved, root = path.resolve(), cache.resolve()
    if resolved == root or resolved.is_relative_to(root):
        raise CacheError(f"the cache secret {path} lies inside the plan cache {cache}; "
                         f"point {SECRET_ENV} at a file outside it (the default, under "
                         "the user's config directory, is)")


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
    mac = authenticator(*parts[:-1], length=len(parts[-1]) if parts else 0)
    if parts:
        mac.update(parts[-1])
    return mac.digest()


def authenticator(*parts: bytes, length: int) -> hmac.HMAC:
    """The HMAC ``authenticate(*parts, last)`` computes, fed with ``parts`` and the length
    of a ``last`` part of ``length`` bytes that the caller then feeds chunk by chunk
    (``update``): a file's tag is checked while the file is streamed, not after it was
    read whole."""
    mac = hmac.new(secret(), digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "little"))
        mac.update(part)
    mac.update(length.to_bytes(8, "little"))
    return mac


__all__ = ["SECRET_ENV", "secret", "secret_path", "authenticate", "authenticator", "forget"]

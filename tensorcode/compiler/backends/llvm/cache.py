"""The authenticated plan cache of the LLVM backend.

An entry is one file, ``<cache>/plans/l_<key>.o``: ``MAGIC``, a 32-byte HMAC-SHA-256 tag,
then the object code. The tag is keyed by a secret that lives outside the cache
(``secret_path``) and covers the format, the cache directory's resolved path, the
entry's key and the object: an entry this process did not write with this secret for
this directory and key (planted, copied from another cache directory or machine,
restored by a CI cache step, or modified, whatever hash was stored beside it) has no
valid tag, and is recompiled and counted (``untrusted_entries``), never loaded. A tagged
object is still checked against the symbol allowlist before it is loaded
(``objects.load``).

The secret is 32 random bytes in ``TENSORCODE_CACHE_SECRET`` (a file path) or else
``tensorcode/cache-secret`` under the user's config directory (``XDG_CONFIG_HOME`` or
``~/.config``), created on first use, readable by its owner alone; a secret file that is
not a regular file owned by the user with mode ``0600`` (or its directory writable by
others) is refused with a ``CacheError``, as ssh refuses a loose key.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import pathlib
import stat
import threading

from ....errors import CacheError

MAGIC = b"tensorcode.llvm1"  # 16 bytes
TAG_BYTES = 32
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
            try:
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(os.urandom(32))
                    handle.flush()
                    os.fsync(handle.fileno())
            _check_private(path, directory=False)
            value = path.read_bytes()
        except OSError as error:
            raise CacheError(f"the cache secret {path} cannot be used: "
                             f"{error.strerror or error}") from None
        if len(value) != 32:  # being written by another process: read once more
            value = path.read_bytes()
            if len(value) != 32:
                raise CacheError(f"the cache secret {path} is not 32 bytes; delete it")
        _SECRETS[str(path)] = value
        return value


def tag(directory: pathlib.Path, key: str, data: bytes) -> bytes:
    message = b"\0".join([MAGIC, str(directory.resolve()).encode(), key.encode(), data])
    return hmac.new(secret(), message, hashlib.sha256).digest()


def entry_path(directory: pathlib.Path, key: str) -> pathlib.Path:
    return directory / f"l_{key}.o"


def read(directory: pathlib.Path, key: str) -> bytes | None:
    """The object of entry ``key`` when its tag is valid; None when the entry is absent;
    ``ValueError`` (saying why) when it exists and must not be used."""
    from ..numba_cache import Untrusted, check_owned

    path = entry_path(directory, key)
    if not os.path.lexists(path):
        return None
    try:
        check_owned(path, directory=False)
        content = path.read_bytes()
    except (OSError, Untrusted) as error:
        raise ValueError(str(error)) from None
    head = len(MAGIC) + TAG_BYTES
    if len(content) < head or content[:len(MAGIC)] != MAGIC:
        raise ValueError("not a TensorCode LLVM cache entry")
    data = content[head:]
    if not hmac.compare_digest(content[len(MAGIC):head], tag(directory, key, data)):
        raise ValueError("its authentication tag is not valid here")
    return data


def write(directory: pathlib.Path, key: str, data: bytes) -> None:
    """Write entry ``key`` atomically, owner-only (the caller holds its lock)."""
    from ....files.atomic import atomic_write_bytes

    path = entry_path(directory, key)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(path.lstat().st_mode):
            path.unlink()
    atomic_write_bytes(path, MAGIC + tag(directory, key, data) + data)
    os.chmod(path, 0o600)


__all__ = ["MAGIC", "SECRET_ENV", "secret", "secret_path", "tag", "read", "write",
           "entry_path"]

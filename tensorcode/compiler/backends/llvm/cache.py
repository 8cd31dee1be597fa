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

The secret and the tag function are ``backends/secret.py``'s (shared with the Numba
backend's cache manifests).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import pathlib
import stat

from ..secret import SECRET_ENV, authenticate, secret, secret_path

MAGIC = b"tensorcode.llvm1"  # 16 bytes
TAG_BYTES = 32


def tag(directory: pathlib.Path, key: str, data: bytes) -> bytes:
    return authenticate(MAGIC, str(directory.resolve()).encode(), key.encode(), data)


def entry_path(directory: pathlib.Path, key: str) -> pathlib.Path:
    return directory / f"l_{key}.o"


def read(directory: pathlib.Path, key: str) -> bytes | None:
    """The object of entry ``key`` when its tag is valid; None when the entry is absent;
    ``ValueError`` (saying why) when it exists and must not be used."""
    from ..plan_directory import Untrusted, check_owned

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

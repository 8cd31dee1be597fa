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

The secret and the tag function are ``backends/secret.py``'s, the file format and its
checks ``backends/tagged_file.py``'s (shared with the Numba backend's cache).
"""

from __future__ import annotations

import pathlib

from .. import tagged_file
from ..secret import SECRET_ENV, authenticate, secret, secret_path

MAGIC = b"tensorcode.llvm1"  # 16 bytes
TAG_BYTES = tagged_file.TAG_BYTES


def _context(directory: pathlib.Path, key: str) -> tuple[bytes, bytes]:
    return str(directory.resolve()).encode(), key.encode()


def tag(directory: pathlib.Path, key: str, data: bytes) -> bytes:
    return authenticate(MAGIC, *_context(directory, key), data)


def entry_path(directory: pathlib.Path, key: str) -> pathlib.Path:
    return directory / f"l_{key}.o"


def read(directory: pathlib.Path, key: str) -> bytearray | None:
    """The object of entry ``key`` when its tag is valid (streamed, under the size limit
    of ``tagged_file``); None when the entry is absent; ``ValueError`` (saying why) when
    something is there that must not be used."""
    from ..plan_directory import Untrusted

    try:
        return tagged_file.read(entry_path(directory, key), MAGIC, _context(directory, key))
    except Untrusted as error:
        raise ValueError(str(error)) from None


def write(directory: pathlib.Path, key: str, data: bytes) -> None:
    """Write entry ``key`` atomically, owner-only (the caller holds its lock);
    ``ValueError`` when a directory holds its path (the object is then not cached)."""
    from ..plan_directory import Untrusted

    try:
        tagged_file.write(entry_path(directory, key), MAGIC, _context(directory, key), data)
    except (OSError, Untrusted) as error:
        raise ValueError(str(error)) from None


__all__ = ["MAGIC", "SECRET_ENV", "secret", "secret_path", "tag", "read", "write",
           "entry_path"]

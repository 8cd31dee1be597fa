"""Authenticated cache files: the one way both compiled backends write and read what
they will load as code (an llvm object, a Numba compile result, which is a pickle).

A tagged file is ``magic`` (16 bytes naming the format), a 32-byte HMAC-SHA-256 tag
(``secret.authenticator``) and the payload. The tag covers the magic, the caller's
context (the cache directory's resolved path and the entry's name) and the payload, so
a file this process did not write with the secret, for this directory and this name
(planted, copied, swapped, modified with a recomputed hash) has no valid tag.

``read`` refuses anything at the path but a regular file of the current user that no
one else can write (checked before opening, then again on the descriptor it opened,
without following links or waiting on a FIFO), refuses a payload over its limit from
the file's size before reading a byte, and streams the payload into one buffer while
computing its tag: the buffer is returned only when the tag is valid, and the caller
uses exactly those bytes (nothing is read from disk twice). ``write`` tags the bytes in
hand, never a file on disk, and replaces the file atomically, owner-only.
"""

from __future__ import annotations

import hmac
import io
import os
import pathlib
import stat
from collections.abc import Sequence
from typing import BinaryIO

from .plan_directory import NO_FOLLOW, Untrusted, check_owned, check_status
from .secret import authenticate, authenticator

TAG_BYTES = 32
#: the largest payload read from a cache file (256 MiB): a plan's object or compile
#: result is a few MiB at most, and a larger file (a sparse file of gigabytes, say) is
#: refused from its size, before anything is allocated for it
LIMIT = 256 << 20
_CHUNK = 1 << 20


def read(path: pathlib.Path, magic: bytes, context: Sequence[bytes],
         limit: int = LIMIT) -> bytearray | None:
    """The payload of the tagged file at ``path``; None when there is none; ``Untrusted``
    (saying why) when something is there that must not be used."""
    try:
        check_owned(path, directory=False)  # before opening: no FIFO, device or directory
        descriptor = os.open(path, os.O_RDONLY | NO_FOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise Untrusted(f"{path}: {error.strerror or error}") from None
    try:
        info = os.fstat(descriptor)
        check_status(path, info, directory=False)  # the file opened is the one checked
    except (OSError, Untrusted) as error:
        os.close(descriptor)
        raise Untrusted(str(error)) from None
    try:
        with io.FileIO(descriptor, "rb") as handle:
            head = len(magic) + TAG_BYTES
            length = info.st_size - head
            if length < 0:
                raise Untrusted("too short to be a cache entry")
            if length > limit:
                raise Untrusted(f"{info.st_size} bytes, more than a cache entry may hold "
                                f"({limit})")
            header = bytearray(head)
            with memoryview(header) as view:
                _fill(handle, view, path, None)
            if header[:len(magic)] != magic:
                raise Untrusted("not a TensorCode cache entry of this kind")
            mac = authenticator(magic, *context, length=length)
            payload = bytearray(length)
            with memoryview(payload) as view:
                _fill(handle, view, path, mac)
    except OSError as error:
        raise Untrusted(f"{path}: {error.strerror or error}") from None
    if not hmac.compare_digest(header[len(magic):], mac.digest()):
        raise Untrusted("its authentication tag is not valid here")
    return payload


def _fill(handle: io.FileIO, view: memoryview, path: pathlib.Path,
          mac: hmac.HMAC | None) -> None:
    """Read ``len(view)`` bytes into ``view`` chunk by chunk, feeding each to ``mac``."""
    done = 0
    while done < len(view):
        n = handle.readinto(view[done:done + _CHUNK])
        if not n:
            raise Untrusted("it changed while it was read")
        if mac is not None:
            mac.update(view[done:done + n])
        done += n


def write(path: pathlib.Path, magic: bytes, context: Sequence[bytes], payload: bytes) -> None:
    """Write ``payload`` tagged, atomically and owner-only (``Untrusted`` when a directory
    holds the path: it is not removed)."""
    from ...files.atomic import atomic_write  # local: kept out of the import

    try:
        if stat.S_ISDIR(path.lstat().st_mode):
            raise Untrusted(f"{path} is a directory")
    except FileNotFoundError:
        pass
    tag = authenticate(magic, *context, payload)

    def fill(handle: BinaryIO) -> None:
        if hasattr(os, "fchmod"):
            os.fchmod(handle.fileno(), 0o600)
        for part in (magic, tag, payload):
            handle.write(part)

    atomic_write(path, fill)  # replaces a FIFO or a link at the path, never follows it


__all__ = ["LIMIT", "TAG_BYTES", "read", "write"]

"""A large tensor file's SHA-256 is computed in a thread that starts once the bytes are
written (while the caller's fsync waits on the disk): the digest is the file's, and a
write that fails ends without starting or leaving a thread behind."""

from __future__ import annotations

import hashlib
import io
import threading
from typing import Any

import numpy as np
import pytest

from tensorcode.files.tensorfile import start_tensors

BIG = {"a": np.arange(1_500_000, dtype=np.float32), "b": np.ones((700, 1000), np.float64)}


def test_the_deferred_digest_is_the_files_sha256():
    handle = io.BytesIO()
    finish = start_tensors(handle, BIG, {"k": "v"})
    assert finish() == hashlib.sha256(handle.getvalue()).hexdigest()


class Failing(io.BytesIO):
    def __init__(self, after: int) -> None:
        super().__init__()
        self.left = after

    def write(self, data: Any, /) -> int:
        self.left -= 1
        if self.left < 0:
            raise OSError("disk full")
        return super().write(data)


def test_a_failed_write_starts_no_hashing_thread():
    before = threading.active_count()
    with pytest.raises(OSError, match="disk full"):
        start_tensors(Failing(after=5), BIG)
    assert threading.active_count() == before

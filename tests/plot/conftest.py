"""Shared helpers of the plot tests: reading an image's size back from its file."""

from __future__ import annotations

import pathlib
import struct

import pytest


def png_size(path: pathlib.Path) -> tuple[int, int]:
    """(width, height) from a PNG's header; fails the test if the file is not a PNG."""
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def read_png_size():
    return png_size

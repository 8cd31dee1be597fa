"""Shared helpers of the plot tests: reading an image's size back from its file, and
simulating an installation without the plot extra."""

from __future__ import annotations

import pathlib
import struct
import sys

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


@pytest.fixture
def no_matplotlib(monkeypatch):
    """Make every ``import matplotlib...`` fail as it would with the package absent."""
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)

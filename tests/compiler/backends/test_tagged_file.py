"""Authenticated cache files (``backends.tagged_file``): read only when the very bytes
read carry this secret's tag for this directory and name, and only from a regular file
of the current user that no one else can write, under a size limit checked first."""

from __future__ import annotations

import os

import pytest

from tensorcode.compiler.backends import secret as secrets
from tensorcode.compiler.backends import tagged_file
from tensorcode.compiler.backends.plan_directory import Untrusted

MAGIC = b"tensorcode.test1"


@pytest.fixture
def place(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORCODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(secrets.SECRET_ENV, str(tmp_path / "secret" / "key"))
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    return directory


def _context(path):
    return str(path.parent.resolve()).encode(), path.name.encode()


def test_what_was_written_is_read_back_owner_only(place):
    path = place / "entry"
    tagged_file.write(path, MAGIC, _context(path), b"payload" * 1000)
    assert tagged_file.read(path, MAGIC, _context(path)) == b"payload" * 1000
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert tagged_file.read(place / "missing", MAGIC, _context(place / "missing")) is None


def test_a_changed_swapped_or_foreign_file_is_refused(place, tmp_path, monkeypatch):
    path, other = place / "entry", place / "other"
    tagged_file.write(path, MAGIC, _context(path), b"genuine")
    tagged_file.write(other, MAGIC, _context(other), b"genuine")
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(Untrusted, match="authentication tag"):
        tagged_file.read(path, MAGIC, _context(path))
    os.replace(other, path)  # another entry's genuine file under this name
    with pytest.raises(Untrusted, match="authentication tag"):
        tagged_file.read(path, MAGIC, _context(path))
    with pytest.raises(Untrusted, match="of this kind"):
        tagged_file.read(path, b"tensorcode.test2", _context(path))
    tagged_file.write(path, MAGIC, _context(path), b"genuine")
    monkeypatch.setenv(secrets.SECRET_ENV, str(tmp_path / "another" / "key"))
    with pytest.raises(Untrusted, match="authentication tag"):  # another secret's
        tagged_file.read(path, MAGIC, _context(path))


def test_what_is_not_a_private_regular_file_is_refused_without_opening_it(place):
    fifo, directory, link, loose = (place / name for name in ("fifo", "dir", "link", "loose"))
    os.mkfifo(fifo)  # opening it for reading would wait for a writer
    directory.mkdir()
    tagged_file.write(loose, MAGIC, _context(loose), b"genuine")
    link.symlink_to(loose)
    os.chmod(loose, 0o620)
    for path in (fifo, directory, link):
        with pytest.raises(Untrusted, match="not a regular file"):
            tagged_file.read(path, MAGIC, _context(path))
    with pytest.raises(Untrusted, match="writable by its group"):
        tagged_file.read(loose, MAGIC, _context(loose))
    with pytest.raises(Untrusted, match="is a directory"):
        tagged_file.write(directory, MAGIC, _context(directory), b"x")
    tagged_file.write(fifo, MAGIC, _context(fifo), b"replaced")  # the FIFO is replaced
    assert tagged_file.read(fifo, MAGIC, _context(fifo)) == b"replaced"


def test_a_file_over_the_limit_is_refused_from_its_size(place):
    path = place / "entry"
    tagged_file.write(path, MAGIC, _context(path), b"x" * 100)
    assert tagged_file.read(path, MAGIC, _context(path), limit=100) == b"x" * 100
    with pytest.raises(Untrusted, match="more than a cache entry may hold"):
        tagged_file.read(path, MAGIC, _context(path), limit=99)
    with open(path, "r+b") as handle:
        handle.truncate(8 << 30)  # sparse
    with pytest.raises(Untrusted, match="more than a cache entry may hold"):
        tagged_file.read(path, MAGIC, _context(path))
    path.write_bytes(MAGIC)
    with pytest.raises(Untrusted, match="too short"):
        tagged_file.read(path, MAGIC, _context(path))

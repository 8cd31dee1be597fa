"""The escalation log: every case a router did not claim, appended as one JSON line.

It is what ``tensorcode repair`` reads, so it must not lose what the service answered.
Each record is written with one ``write`` on a file opened for appending (it reaches
the operating system before the request is answered, so a crashed process loses
nothing); ``fsync`` runs in a background thread every ``sync_every`` records or
``sync_interval`` seconds, whichever comes first, and on ``close``, so the disk flush
never stalls a request. A file past ``max_bytes`` is rotated: ``log.jsonl`` becomes
``log.jsonl.1`` (older ones shift up, ``keep`` are kept).

Reading is strict and bounded: each line is parsed by the shared reader; a torn last
line (a crash mid-write) is skipped and counted, never guessed at.
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..distill.cases import case_key
from ..distill.inputs import InputError, check_case, read_document
from ..errors import ArtifactError, TensorCodeError
from ..files import check_header, fsync_directory

LOGGER = logging.getLogger("tensorcode.serve")

FORMAT = "tensorcode.escalation"
VERSION = 1
#: lines longer than this are not records (a record is a case and an answer)
MAX_LINE_BYTES = 1 << 20


class EscalationLog:
    """Append-only JSON-lines log with batched fsync and size rotation; thread-safe."""

    def __init__(self, path: str | os.PathLike, *, max_bytes: int = 64 << 20, keep: int = 5,
                 sync_every: int = 256, sync_interval: float = 1.0) -> None:
        if max_bytes <= 0 or keep < 0 or sync_every < 1 or sync_interval <= 0:
            raise TensorCodeError("max_bytes and sync_every must be positive, keep "
                                  "non-negative and sync_interval positive seconds")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = int(max_bytes)
        self.keep = int(keep)
        self.sync_every = int(sync_every)
        self.sync_interval = float(sync_interval)
        self._lock = threading.Lock()
        self._fd = self._open()
        self._size = os.fstat(self._fd).st_size
        self._unsynced = 0
        self._written = 0
        self._torn = False  # the last write was cut short: start the next on a new line
        self._closed = False
        self._wake = threading.Event()
        self._syncer = threading.Thread(target=self._sync_loop, name="escalation-log-fsync",
                                        daemon=True)
        self._syncer.start()
        atexit.register(self.close)

    def __repr__(self) -> str:
        return f"EscalationLog({str(self.path)!r})"

    @property
    def written(self) -> int:
        """Records appended by this object."""
        return self._written

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record (a JSON object) as one line. A failed write (a full disk)
        raises ``OSError`` and loses only this record: a short write is completed or,
        when the disk refuses the rest, the next record starts on a new line, so the
        reader skips the torn one instead of losing both."""
        line = (json.dumps({"format": FORMAT, "version": VERSION, **record},
                           separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
        with self._lock:
            if self._closed:
                raise TensorCodeError(f"the escalation log {self.path} is closed")
            if self._torn:
                line = b"\n" + line
            if self._size and self._size + len(line) > self.max_bytes:
                self._rotate()
            written = 0
            try:
                while written < len(line):  # os.write may write less than it was given
                    step = os.write(self._fd, line[written:])
                    if step <= 0:
                        raise OSError(errno.EIO, "the write made no progress")
                    written += step
            finally:
                self._size += written
                if written:
                    self._torn = written < len(line)
            self._unsynced += 1
            self._written += 1
            if self._unsynced >= self.sync_every:
                self._wake.set()

    def sync(self) -> None:
        """fsync what was appended so far."""
        with self._lock:
            if not self._closed and self._unsynced:
                os.fsync(self._fd)
                self._unsynced = 0

    def close(self) -> None:
        """Sync and close (idempotent; also run at interpreter exit)."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._unsynced:
                    os.fsync(self._fd)
            except OSError as error:  # the records reached the OS; say the flush failed
                LOGGER.error("escalation log %s: fsync at close failed: %s", self.path, error)
            finally:
                os.close(self._fd)
                self._closed = True
        self._wake.set()
        atexit.unregister(self.close)

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _rotate(self) -> None:
        """Called with the lock held: sync, shift the old files up, start a new one."""
        os.fsync(self._fd)
        os.close(self._fd)
        if self.keep == 0:
            os.unlink(self.path)
        else:
            for k in range(self.keep - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{k}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{k + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._fd = self._open()
        self._size = 0
        self._unsynced = 0
        fsync_directory(self.path.parent)

    def _sync_loop(self) -> None:
        while True:
            self._wake.wait(self.sync_interval)
            self._wake.clear()
            with self._lock:
                if self._closed:
                    return
                if self._unsynced:
                    try:
                        os.fsync(self._fd)
                    except OSError as error:  # a full or failing disk: the appends say so
                        LOGGER.error("escalation log %s: fsync failed: %s", self.path, error)
                    self._unsynced = 0


@dataclass
class Escalations:
    """What a log holds: ``records`` in file order, and how many lines were skipped
    because they were torn or not records (``skipped``, with ``problems`` saying why)."""

    records: list[dict[str, Any]]
    skipped: int
    problems: list[str]


def _open_log(path: Path) -> BinaryIO:
    """The log opened for reading; a file that cannot be opened is a clear error, while one
    that fails later, mid-read, is not dressed up as a missing log."""
    try:
        return open(path, "rb")
    except OSError as error:
        raise TensorCodeError(f"cannot read the escalation log {path}: "
                              f"{error.strerror}") from None


def read_escalations(paths: Iterable[str | os.PathLike]) -> Escalations:
    """Every record of the given log files (rotated ones first when you list them
    oldest first). A line that is not a record is skipped and reported, never guessed."""
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in paths:
        path = Path(path)
        with _open_log(path) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                problem = None
                if not line.endswith(b"\n"):
                    problem = "torn (no line end: a write was cut short)"
                elif len(line) > MAX_LINE_BYTES:
                    problem = f"longer than {MAX_LINE_BYTES} bytes"
                else:
                    try:
                        record = read_document(line, MAX_LINE_BYTES)
                    except InputError as error:
                        problem = str(error)
                    else:
                        try:
                            check_header(record, FORMAT, VERSION)
                        except ArtifactError as error:
                            problem = str(error)
                        else:
                            records.append(record)
                            continue
                problems.append(f"{path}:{number}: {problem}")
    return Escalations(records, len(problems), problems)


def rotated_files(path: str | os.PathLike) -> list[Path]:
    """``path`` and its rotated predecessors, oldest first."""
    path = Path(path)
    older = sorted((p for p in path.parent.glob(f"{path.name}.*") if p.suffix[1:].isdigit()),
                   key=lambda p: -int(p.suffix[1:]))
    return [*older, *([path] if path.exists() else [])]


@dataclass
class RepairCases:
    """Escalated cases of one router with the teacher's answers, ready for ``repair``:
    ``cases`` and ``targets`` pair up; the counts say what was left out and why."""

    cases: list[dict[str, Any]]
    targets: list[dict[str, Any]]
    other_router: int
    unanswered: int
    duplicates: int
    invalid: list[str]


def repair_cases(records: Iterable[Mapping[str, Any]], router: str,
                 inputs: Mapping[str, tuple[int, ...]], outputs: Mapping[str, tuple[int, ...]]
                 ) -> RepairCases:
    """The records of ``router`` that carry a teacher's answer (``target``), validated
    against the router's contracts, each distinct case once (the first answer kept).
    Records without an answer (no fallback, or it failed) cannot teach anything and are
    counted as ``unanswered``."""
    chosen = RepairCases([], [], 0, 0, 0, [])
    seen: set[str] = set()
    for number, record in enumerate(records):
        if record.get("router") != router:
            chosen.other_router += 1
            continue
        if record.get("target") is None:
            chosen.unanswered += 1
            continue
        try:
            case = check_case(record.get("inputs"), dict(inputs), "inputs.")
            target = check_case(record.get("target"), dict(outputs), "target.")
        except InputError as error:
            chosen.invalid.append(f"record {number}: {error}")
            continue
        key = case_key(case)
        if key in seen:
            chosen.duplicates += 1
            continue
        seen.add(key)
        chosen.cases.append(case)
        chosen.targets.append(target)
    return chosen


__all__ = ["FORMAT", "VERSION", "EscalationLog", "Escalations", "RepairCases",
           "read_escalations", "repair_cases", "rotated_files"]

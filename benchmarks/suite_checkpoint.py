"""Checkpoint save and load throughput (MB/s) against safetensors alone.

``tc.checkpoint.save``/``load`` of a directory checkpoint (and the single-file form)
against ``safetensors.numpy.save_file``/``load_file`` on the same float32 parameters, in
the same run. A TensorCode save also computes the file's SHA-256, fsyncs the file and
the directory, renames atomically and writes ``training.json``; a load verifies the
checksum and every name, shape and dtype. ``save_file`` does none of that, so a
``save_file + fsync`` row shows what durability alone costs.

The savers (and then the loaders) are timed in turn, one call each per round, so a
machine whose load changes during the run slows every peer alike; each row is the
median of its rounds. Every saver writes its own path and starts with nothing of the
others' left to write: the plain ``save_file`` row's file is fsynced after its timing
(untimed), so its dirty pages neither reach the disk during another row's fsync nor
make the next overwrite of the same file nearly free (a file whose data never reached
the disk has no blocks to free).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np

from .harness import Row

SUITE = "checkpoint"
TENSORS = 4


def _load_and_hash(load_file, path: pathlib.Path) -> str:
    """``load_file`` and a SHA-256 over the bytes it loaded: what a verified load must at
    least do, done the plain way (two passes)."""
    import hashlib

    digest = hashlib.sha256()
    for array in load_file(str(path)).values():
        digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
    return digest.hexdigest()


def alternating_medians(fns: list[Callable[[], object]], repeat: int, warmup: int,
                        settle: dict[int, Callable[[], object]] | None = None) -> list[float]:
    """Median seconds per call of each of ``fns``, timed in turn: one call of each per
    round, ``repeat`` rounds after ``warmup``; ``settle[k]`` runs untimed after each
    call of ``fns[k]``."""
    settle = settle or {}
    for _ in range(warmup):
        for k, fn in enumerate(fns):
            fn()
            if k in settle:
                settle[k]()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, (fn, times) in enumerate(zip(fns, samples)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
            if k in settle:
                settle[k]()
    return [statistics.median(times) for times in samples]


def _fsync(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def run(quick: bool) -> list[Row]:
    from safetensors.numpy import load_file, save_file

    import tensorcode as tc

    nbytes = 10_000_000 if quick else 100_000_000
    repeat = 5 if quick else 7
    note_size = "; --quick: 1e7 bytes stand in for 1e8" if quick else ""
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    per = nbytes // 4 // TENSORS
    for k in range(TENSORS):
        tape.parameter(rng.standard_normal(per).astype(np.float32), name=f"layer{k}.weights")
    network = tape.into_network()
    parameters = network.parameters()
    total = sum(p.nbytes for p in parameters.payloads())
    named = dict(zip(tc.checkpoint.parameter_keys(parameters.layout), parameters.payloads()))
    root = pathlib.Path(tempfile.mkdtemp(prefix="tensorcode-bench-ckpt-"))
    rows: list[Row] = []
    megabytes = total / 1e6

    def rate(seconds: float) -> float:
        return megabytes / seconds

    try:
        directory = root / "ckpt"
        single = root / "single.safetensors"
        plain = root / "plain.safetensors"
        unsynced = root / "unsynced.safetensors"

        def save_plain_fsync() -> None:
            save_file(named, str(plain))
            _fsync(plain)

        work = f"save {total / 1e6:.0f} MB f32"
        savers = [
            ("tensorcode", lambda: tc.checkpoint.save(directory, parameters),
             "directory: sha256 + fsync + atomic rename + training.json", True),
            ("tensorcode single file", lambda: tc.checkpoint.save_file(single, parameters),
             "one safetensors file, manifest in metadata", False),
            ("safetensors save_file", lambda: save_file(named, str(unsynced)),
             "no checksum, no fsync, not atomic", False),
            ("save_file + fsync", save_plain_fsync, "no checksum, not atomic", False),
        ]
        medians = alternating_medians([fn for _, fn, _, _ in savers], repeat, warmup=1,
                                      settle={2: lambda: _fsync(unsynced)})
        for (peer, _fn, note, base), seconds in zip(savers, medians):
            rows.append(Row(SUITE, work, peer, rate(seconds), unit="MB/s",
                            lower_is_better=False, note=note + note_size, baseline=base))

        work = f"load {total / 1e6:.0f} MB f32"
        template = network.parameters()
        loaders = [
            ("tensorcode", lambda: tc.checkpoint.load(directory, template),
             "verifies sha256, names, shapes, dtypes; builds a table", True),
            ("tensorcode single file", lambda: tc.checkpoint.load(single, template),
             "same checks", False),
            ("safetensors load_file", lambda: load_file(str(plain)), "no checks", False),
            ("load_file + sha256", lambda: _load_and_hash(load_file, plain),
             "load_file, then SHA-256 of the same bytes (the verification's floor)", False),
        ]
        medians = alternating_medians([fn for _, fn, _, _ in loaders], repeat, warmup=1)
        for (peer, _fn, note, base), seconds in zip(loaders, medians):
            rows.append(Row(SUITE, work, peer, rate(seconds), unit="MB/s",
                            lower_is_better=False, note=note + note_size, baseline=base))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows

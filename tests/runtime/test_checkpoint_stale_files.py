"""A directory checkpoint drops the tensor file it superseded from the directory at once;
the filesystem frees that file's blocks when a background thread closes the last
descriptor, so no descriptor is left open and the checkpoint loads as usual."""

from __future__ import annotations

import os
import pathlib
import time

import numpy as np
import pytest

import tensorcode as tc


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not pathlib.Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_superseded_tensor_file_is_gone_and_its_descriptor_closed(tmp_path):
    tape = tc.Tape()
    tape.parameter(np.arange(2_000_000, dtype=np.float32), name="w")
    parameters = tape.into_network().parameters()
    tc.checkpoint.save(tmp_path, parameters)
    first = set(tmp_path.glob("tensors-*.safetensors"))
    before = _open_descriptors()
    tc.checkpoint.save(tmp_path, parameters)
    current = set(tmp_path.glob("tensors-*.safetensors"))
    assert len(current) == 1 and not current & first
    deadline = time.monotonic() + 30
    while _open_descriptors() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _open_descriptors() <= before
    restored = tc.checkpoint.load(tmp_path, parameters)
    assert restored.parameters.equals(parameters)

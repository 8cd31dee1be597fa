"""The projection arithmetic of docs/distributed.md, and that the package loads Ray
only when a name that needs it is used."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tensorcode.distributed import project
from tensorcode.errors import TensorCodeError

W4 = 784 * 256 + 256 + 256 * 10 + 10


def test_the_w4_projection_by_hand():
    p = project(W4, 128, 8, 10, flops_per_s=1e11)
    assert p.flops_per_step == 6 * W4 * 128
    assert p.compute_s == pytest.approx(6 * W4 * 128 / 8 / 1e11)
    assert p.gradient_bytes == 4 * W4
    # ring all-reduce: 2 (M - 1) / M of the gradient bytes through each link
    assert p.allreduce_s == pytest.approx(2 * 7 / 8 * 4 * W4 * 8 / 10e9)
    # the driver's star: parameters out to and gradients back from every worker
    assert p.star_bytes == 2 * 8 * 4 * W4
    assert p.speedup == pytest.approx(p.single_machine_s / (p.compute_s + p.allreduce_s))
    assert project(W4, 128, 1, 10, flops_per_s=1e11).allreduce_s == 0.0
    with pytest.raises(TensorCodeError, match="machines must be a positive number"):
        project(W4, 128, 0, 10, flops_per_s=1e11)


def test_importing_the_package_or_the_projection_does_not_import_ray():
    code = ("import sys, tensorcode, tensorcode.distributed as d; d.project(10, 1, 2, 1, "
            "flops_per_s=1.0); assert 'ray' not in sys.modules, 'ray was imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ), timeout=120)
    assert result.returncode == 0, result.stderr

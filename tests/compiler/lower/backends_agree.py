"""The check the partition and epilogue tests share: a split kernel's result is the same
bits on both compiled backends at 1, 2 and 3 threads, and within float32 rounding of
the reference interpreter."""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.compiler.backends import threads


def same_bits_everywhere(network, y):
    """``y`` the same bits on llvm and numba at 1, 2 and 3 threads, and within float32
    rounding of the reference interpreter."""
    answers = {}
    for backend in ("llvm", "numba"):
        plan = network.entry([y]).lower(backend)
        for n in (1, 2, 3):
            tc.set_num_threads(n)
            answers[backend, n] = plan.forward(network.parameters()).of(y).copy()
    tc.set_num_threads(threads.available_cpus())
    first = answers["llvm", 1]
    assert all(np.array_equal(first, other) for other in answers.values())
    want = network.entry([y]).lower("reference").forward(network.parameters()).of(y)
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4)

"""The equalities TensorCode promises between backends (docs/compiler.md, "Which results
are equal"), as one assertion the optimizer tests share.

Compiled backends agree with each other bit for bit. The reference agrees with them bit
for bit when every op is correctly rounded IEEE arithmetic; through a transcendental op
(``registry.is_transcendental``: Adam's ``beta ** step``) it computes with NumPy's
CPU-dispatched kernels, which differ from the C library on AVX-512 machines, so it is
held within a few ulps instead."""

from __future__ import annotations

import numpy as np

#: the most ulps (of the larger magnitude) a result through a transcendental op may differ
#: by from the reference after a dozen optimizer steps
MAX_ULPS = 16


def assert_promised_equal(ours, reference, exact: bool, what: str = "") -> None:
    ours, reference = np.asarray(ours), np.asarray(reference)
    if exact:
        assert np.array_equal(ours, reference), f"{what}: not bit for bit"
        return
    assert ours.dtype == reference.dtype and ours.shape == reference.shape, what
    spacing = np.spacing(np.maximum(np.abs(ours), np.abs(reference)))
    ulps = np.abs(ours.astype(np.float64) - reference) / spacing
    assert np.all(ulps <= MAX_ULPS), f"{what}: {np.max(ulps)} ulps apart"

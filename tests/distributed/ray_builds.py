"""Networks the distributed tests record on every worker (written for these tests).

Ray pickles these functions by value (the session fixture registers this module), so
the workers need not import the tests.
"""

from __future__ import annotations

import os
import time

import numpy as np

import tensorcode as tc


def regression(rows: int = 8, dtype: str = "float32", misbehave: str | None = None):
    """A [3, 4, 1] tanh regression with a mean squared error over ``rows`` rows.

    ``misbehave`` (``"raise"`` or ``"hang"``) happens only inside a Ray worker (the
    driver records normally), to test how failures are reported."""
    if misbehave is not None and os.environ.get("TENSORCODE_TEST_IN_WORKER") == "1":
        if misbehave == "raise":
            raise ValueError("this worker cannot record the network")
        time.sleep(60)
    tape = tc.Tape()
    rng = np.random.default_rng(0)
    w = tape.parameter(rng.normal(0, 0.5, (3, 4)).astype(dtype), name="w")
    b = tape.parameter(np.zeros(4, dtype), name="b")
    v = tape.parameter(rng.normal(0, 0.5, (4, 1)).astype(dtype), name="v")
    x = tape.input(np.zeros((rows, 3), dtype), name="x")
    y = tape.input(np.zeros((rows, 1), dtype), name="y")
    loss = tc.mse((x @ w + b).tanh() @ v, y)
    adjoints = tape.differentiate(loss, [w, b, v])
    return tape.into_network(), adjoints


def data(rows: int, seed: int = 1, dtype: str = "float32") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 3)).astype(dtype)
    return {"x": x, "y": np.sin(x.sum(axis=1, keepdims=True)).astype(dtype)}

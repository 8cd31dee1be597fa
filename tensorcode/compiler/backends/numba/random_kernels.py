"""The compiled categorical sampler, called from generated plan code (``loops.Sample``).

``philox.categorical_row`` (the sort, the cumulative weights over ``philox.exp``, the
top-k and top-p cut and the inverse CDF) is compiled here by Numba from its own code:
each function is rebuilt over a shared globals table in which every sibling it calls is
its compiled twin, so the reference interpreter and this backend run one definition.
The rows' uniforms come from the Philox stream the loop program draws
(``lower/random_fills.py``), as every other random draw's numbers do.

Not cached on its own (no ``cache=True``): Numba would write that cache beside this
file, inside the installed package. A plan that samples holds its compiled code, and the
plan is cached in the plan cache.
"""

from __future__ import annotations

import types
from typing import Any

import numba
import numpy as np

from ...core import philox

_SHARED = ("exp", "categorical_row")


def _compile_shared() -> dict[str, Any]:
    table: dict[str, Any] = dict(vars(philox))
    for name in _SHARED:
        fn = getattr(philox, name)
        table[name] = numba.njit(nogil=True)(types.FunctionType(fn.__code__, table, name))
    return table


_categorical_row = _compile_shared()["categorical_row"]


@numba.njit(nogil=True)
def sample_rows(out, start, rows, logits, lstart, classes, uniforms, ustart, temperature,
                top_k, top_p):
    """One index per row of ``logits`` (``rows`` x ``classes`` from ``lstart``), row
    ``r`` at the uniform ``uniforms[ustart + r]``."""
    z = np.empty(classes, np.float64)
    for r in range(rows):
        for j in range(classes):
            z[j] = np.float64(logits[lstart + r * classes + j]) / temperature
        out[start + r] = _categorical_row(z, uniforms[ustart + r], top_k, top_p)


__all__ = ["sample_rows"]

"""Compiled fills for the random primitives, called from generated plan code.

The functions of ``philox.py`` (the Philox mixing and the exact float transforms) are
compiled here by Numba from their own code: each is rebuilt over a shared globals table
in which every sibling it calls is its compiled twin, so the reference interpreter and
this backend run one definition and draw the same bits. The ``fill_*`` loops below walk
the counter blocks of one random node and write its output flat, element ``e`` from
words ``e * words ...`` of the stream (``philox.py`` documents the layout).

None of them is cached on its own (no ``cache=True``): Numba would write that cache
beside this file, inside the installed package. A plan that calls a fill holds its
compiled code, and the plan is cached in the plan cache; a process that compiles a new
plan which draws compiles the fills it calls once.
"""

from __future__ import annotations

import types
from typing import Any

import numba
import numpy as np

from ...core import philox

_SHARED = ("philox4x32", "unit_f64", "log", "exp", "cos_turns", "normal", "categorical_row")


def _compile_shared() -> dict[str, Any]:
    table: dict[str, Any] = dict(vars(philox))
    for name in _SHARED:
        fn = getattr(philox, name)
        # the mixing is inlined into each fill's loop, where LLVM vectorizes it
        compiled = types.FunctionType(fn.__code__, table, name)
        if name == "philox4x32":
            table[name] = numba.njit(nogil=True, inline="always")(compiled)
        else:
            table[name] = numba.njit(nogil=True)(compiled)
    return table


_JIT = _compile_shared()
_philox = _JIT["philox4x32"]
_normal = _JIT["normal"]
_unit_f64 = _JIT["unit_f64"]
_categorical_row = _JIT["categorical_row"]

_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_S8 = np.uint32(8)
_S11 = np.uint32(11)
_S21 = np.uint64(21)
_ZERO = np.uint32(0)
_F24 = np.float32(2.0 ** -24)
_F53 = np.float64(2.0 ** -53)


@numba.njit(nogil=True, inline="always")
def _key(key):
    k0 = np.uint32(np.uint64(key[0]) & _MASK)
    k1 = np.uint32(np.uint64(key[1]) & _MASK)
    base = ((np.uint64(key[3]) & _MASK) << _S32) | (np.uint64(key[2]) & _MASK)
    return k0, k1, base


@numba.njit(nogil=True, inline="always")
def _block(k0, k1, base, offset, b):
    counter = base + offset + np.uint64(b)
    return _philox(np.uint32(counter), np.uint32(counter >> _S32), _ZERO, _ZERO, k0, k1)


@numba.njit(nogil=True, inline="always")
def _f64(a, b):
    """``((a << 21) + (b >> 11)) * 2**-53``: ``philox.unit_f64`` in integers."""
    return np.float64((np.uint64(a) << _S21) + np.uint64(b >> _S11)) * _F53


@numba.njit(nogil=True)
def fill_uniform_f32(out, start, size, key, offset):
    """``size`` float32 uniforms in [0, 1): ``(w >> 8) * 2**-24``, one word each."""
    out = out[start:start + size]  # indices from 0: no wraparound check, so it vectorizes
    k0, k1, base = _key(key)
    off = np.uint64(offset)
    first = base + off
    full = size // 4
    for b in range(full):
        counter = first + np.uint64(b)
        w0, w1, w2, w3 = _philox(np.uint32(counter), np.uint32(counter >> _S32), _ZERO, _ZERO,
                                 k0, k1)
        e = 4 * b
        out[e] = np.float32(w0 >> _S8) * _F24
        out[e + 1] = np.float32(w1 >> _S8) * _F24
        out[e + 2] = np.float32(w2 >> _S8) * _F24
        out[e + 3] = np.float32(w3 >> _S8) * _F24
    if full * 4 < size:
        w = _block(k0, k1, base, off, full)
        for j in range(size - full * 4):
            out[full * 4 + j] = np.float32(w[j] >> _S8) * _F24


@numba.njit(nogil=True)
def fill_uniform_f64(out, start, size, key, offset):
    """``size`` float64 uniforms in [0, 1) from 53 bits of two words each."""
    out = out[start:start + size]  # indices from 0: no wraparound check, so it vectorizes
    k0, k1, base = _key(key)
    off = np.uint64(offset)
    full = size // 2
    for b in range(full):
        w0, w1, w2, w3 = _block(k0, k1, base, off, b)
        e = 2 * b
        out[e] = _f64(w0, w1)
        out[e + 1] = _f64(w2, w3)
    if full * 2 < size:
        w0, w1, w2, w3 = _block(k0, k1, base, off, full)
        out[size - 1] = _f64(w0, w1)


@numba.njit(nogil=True)
def fill_normal(out, start, size, key, offset):
    """``size`` standard normals (Box-Muller of one block each), rounded to ``out``."""
    out = out[start:start + size]  # indices from 0: no wraparound check, so it vectorizes
    k0, k1, base = _key(key)
    off = np.uint64(offset)
    for b in range(size):
        w0, w1, w2, w3 = _block(k0, k1, base, off, b)
        out[b] = _normal(np.float64(w0), np.float64(w1), np.float64(w2),
                                 np.float64(w3))


@numba.njit(nogil=True)
def fill_bernoulli(out, start, size, key, offset, threshold):
    """``size`` 0/1 draws: 1 when a word is below ``threshold`` (``p * 2**32``)."""
    out = out[start:start + size]  # indices from 0: no wraparound check, so it vectorizes
    k0, k1, base = _key(key)
    off = np.uint64(offset)
    t = np.uint64(threshold)
    one = out.dtype.type(1)
    zero = out.dtype.type(0)
    full = size // 4
    for b in range(full):
        w0, w1, w2, w3 = _block(k0, k1, base, off, b)
        e = 4 * b
        out[e] = one if w0 < t else zero
        out[e + 1] = one if w1 < t else zero
        out[e + 2] = one if w2 < t else zero
        out[e + 3] = one if w3 < t else zero
    if full * 4 < size:
        w = _block(k0, k1, base, off, full)
        for j in range(size - full * 4):
            out[full * 4 + j] = one if w[j] < t else zero


@numba.njit(nogil=True)
def fill_categorical(out, start, rows, logits, lstart, classes, key, offset, temperature,
                     top_k, top_p):
    """One index per row of ``logits`` (``rows`` x ``classes`` from ``lstart``)."""
    out = out[start:start + rows]
    k0, k1, base = _key(key)
    off = np.uint64(offset)
    z = np.empty(classes, np.float64)
    for r in range(rows):
        for j in range(classes):
            z[j] = np.float64(logits[lstart + r * classes + j]) / temperature
        half = r // 2
        w = _block(k0, k1, base, off, half)
        lane = 2 * (r - 2 * half)
        u = _unit_f64(np.float64(w[lane]), np.float64(w[lane + 1]))
        out[r] = _categorical_row(z, u, top_k, top_p)


__all__ = ["fill_uniform_f32", "fill_uniform_f64", "fill_normal", "fill_bernoulli",
           "fill_categorical"]

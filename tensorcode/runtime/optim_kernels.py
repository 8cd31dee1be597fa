"""Compiled update loops for the built-in optimizers: one call per dtype buffer.

Each kernel walks a flat per-dtype buffer slot by slot (``offsets`` bounds the slots, so
per-parameter scalars such as Adam's bias corrections stay per slot) and follows
PyTorch's single-tensor update in PyTorch's order of operations. Every scalar arrives
already cast to the buffer's dtype, so float32 arithmetic stays float32 as it does in
PyTorch (a Python float would silently promote it to float64 inside Numba).

Two details keep the loops vectorized: each slot is walked through zero-based views (an
index Numba cannot prove non-negative costs a wraparound check per access), and
``error_model="numpy"`` makes a division by zero give inf/nan as NumPy and PyTorch do,
instead of a per-element check that raises ``ZeroDivisionError``.

This module imports numba at import time; ``tensorcode.runtime.optim`` imports it
lazily, on the first compiled step, so ``import tensorcode`` never loads numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, error_model="numpy")
def sgd_update(parameter, gradient, buffer, out, offsets, present, neg_lr, weight_decay,
               momentum, one_minus_dampening, nesterov, maximize):  # pragma: no cover - jitted
    """``out = parameter - lr * direction``; ``buffer`` (momentum) is updated in place.

    A slot whose ``present`` flag is 0 has no momentum buffer yet: like PyTorch, its
    first buffer is the (decayed) gradient itself, without dampening."""
    use_momentum = momentum != 0
    use_decay = weight_decay != 0
    for slot in range(offsets.shape[0] - 1):
        first = present[slot] == 0
        # per-slot views indexed from zero: indices provably non-negative, so the loop
        # needs no wraparound handling and vectorizes
        start, stop = offsets[slot], offsets[slot + 1]
        p_, g_, o_ = parameter[start:stop], gradient[start:stop], out[start:stop]
        b_ = buffer[start:stop] if use_momentum else buffer
        for i in range(stop - start):
            d = g_[i]
            if maximize:
                d = -d
            if use_decay:
                d = d + weight_decay * p_[i]
            if use_momentum:
                b = d if first else b_[i] * momentum + one_minus_dampening * d
                b_[i] = b
                d = d + momentum * b if nesterov else b
            o_[i] = p_[i] + neg_lr * d


@njit(cache=True, error_model="numpy")
def adam_update(parameter, gradient, exp_avg, exp_avg_sq, max_exp_avg_sq, out, offsets,
                neg_step_size, bias_correction2_sqrt, decay_factor, weight_decay, weight1,
                one_minus_weight1, beta2, one_minus_beta2, eps, decoupled, amsgrad,
                maximize):  # pragma: no cover - jitted
    """One Adam/AdamW step; moments are updated in place, the parameters go to ``out``.

    ``neg_step_size`` and ``bias_correction2_sqrt`` are per slot. ``weight1`` is
    ``1 - beta1``, the weight of PyTorch's ``exp_avg.lerp_(grad, 1 - beta1)``, whose CPU
    kernel switches formula at a weight of one half."""
    use_decay = weight_decay != 0
    small = abs(weight1) < 0.5
    for slot in range(offsets.shape[0] - 1):
        step_size = neg_step_size[slot]
        bc2 = bias_correction2_sqrt[slot]
        start, stop = offsets[slot], offsets[slot + 1]
        p_, g_, o_ = parameter[start:stop], gradient[start:stop], out[start:stop]
        m_, v_ = exp_avg[start:stop], exp_avg_sq[start:stop]
        w_ = max_exp_avg_sq[start:stop] if amsgrad else max_exp_avg_sq
        for i in range(stop - start):
            d = g_[i]
            if maximize:
                d = -d
            p = p_[i]
            if use_decay:
                if decoupled:
                    p = p * decay_factor
                else:
                    d = d + weight_decay * p
            m = m_[i]
            m = m + weight1 * (d - m) if small else d - (d - m) * one_minus_weight1
            m_[i] = m
            v = v_[i] * beta2 + one_minus_beta2 * d * d
            v_[i] = v
            if amsgrad:
                w = w_[i]
                if not (w >= v):  # NaN-propagating maximum, like torch.maximum
                    w = v if (v >= w or v != v) else w
                w_[i] = w
                denom = np.sqrt(w) / bc2 + eps
            else:
                denom = np.sqrt(v) / bc2 + eps
            o_[i] = p + step_size * m / denom

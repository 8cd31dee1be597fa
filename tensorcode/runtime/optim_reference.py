"""The built-in optimizers' NumPy path (``backend="reference"``).

The same operations as the compiled loops in ``optim_kernels``, in the same order, on
whole flat buffers at a time; tests hold the two paths equal bit for bit. The arguments
are the kernels' arguments, so ``optim`` calls either with one tuple.
"""

from __future__ import annotations

import numpy as np


def sgd_update(parameter, gradient, buffer, out, offsets, present, neg_lr, weight_decay,
               momentum, one_minus_dampening, nesterov, maximize) -> None:
    """``optim_kernels.sgd_update`` on whole buffers at a time."""
    d = -gradient if maximize else gradient.copy()
    if weight_decay != 0:
        d = d + weight_decay * parameter
    if momentum != 0:
        first = np.repeat(present == 0, np.diff(offsets))
        b = np.where(first, d, buffer * momentum + one_minus_dampening * d)
        buffer[:] = b
        d = d + momentum * b if nesterov else b
    out[:] = parameter + neg_lr * d


def adam_update(parameter, gradient, exp_avg, exp_avg_sq, max_exp_avg_sq, out, offsets,
                neg_step_size, bias_correction2_sqrt, decay_factor, weight_decay, weight1,
                one_minus_weight1, beta2, one_minus_beta2, eps, decoupled, amsgrad,
                maximize) -> None:
    """``optim_kernels.adam_update`` on whole buffers at a time."""
    sizes = np.diff(offsets)
    d = -gradient if maximize else gradient
    p = parameter
    if weight_decay != 0:
        if decoupled:
            p = p * decay_factor
        else:
            d = d + weight_decay * p
    if abs(weight1) < 0.5:
        m = exp_avg + weight1 * (d - exp_avg)
    else:
        m = d - (d - exp_avg) * one_minus_weight1
    exp_avg[:] = m
    v = exp_avg_sq * beta2 + one_minus_beta2 * d * d
    exp_avg_sq[:] = v
    if amsgrad:
        np.maximum(max_exp_avg_sq, v, out=max_exp_avg_sq)
        v = max_exp_avg_sq
    denom = np.sqrt(v) / np.repeat(bias_correction2_sqrt, sizes) + eps
    out[:] = p + np.repeat(neg_step_size, sizes) * m / denom

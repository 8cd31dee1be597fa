"""Calibration: make scores mean what they say, and measure how far they are from it.

``TemperatureCalibration`` divides logits by one learned temperature, fitted on held-out
logits by minimizing the negative log-likelihood. The NLL is convex in the inverse
temperature, so a bounded one-dimensional search finds the global minimum; it is an
operation, so the temperature lives in its parameter table and is saved with it.
``evaluate_calibration`` reports expected and maximum calibration error (equal-width
confidence bins), NLL, Brier score and accuracy. ``fit_threshold`` picks the lowest
confidence threshold whose accepted examples meet an error budget *on the sample*: an
empirical statement about that sample, not a guarantee on new inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compiler.plans.tape import Tape
from ..compiler.trace.expr import Expr
from ..errors import ShapeError, TensorCodeError
from ..operations.base import Operation, as_float_array


def _logits_and_labels(logits: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels)
    if z.ndim != 2 or z.shape[0] == 0 or z.shape[1] < 2:
        raise ShapeError(f"logits must be [examples, classes] with at least one example and "
                         f"two classes, got {list(z.shape)}")
    if not np.all(np.isfinite(z)):
        raise ValueError("logits hold NaN or infinity")
    if y.dtype.kind not in "iu" or y.shape != (z.shape[0],):
        raise ShapeError(f"labels must be {z.shape[0]} integer class indices, got "
                         f"{y.dtype}{list(y.shape)}")
    if y.min() < 0 or y.max() >= z.shape[1]:
        raise ValueError(f"labels must lie in [0, {z.shape[1]}), got [{y.min()}, {y.max()}]")
    return z, y.astype(np.int64)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def negative_log_likelihood(logits: Any, labels: Any) -> float:
    """Mean ``-log softmax(logits)[label]`` in float64."""
    z, y = _logits_and_labels(logits, labels)
    return float(-_log_softmax(z)[np.arange(len(y)), y].mean())


class _Temperature:
    def __init__(self, symbol: Expr) -> None:
        self.temperature = symbol


class TemperatureCalibration(Operation):
    """``forward(logits) = logits / temperature`` with the temperature (float32 scalar,
    initially 1) in the operation's parameter table."""

    qualified_name = "tensorcode.training.TemperatureCalibration"
    pads_rows = True

    def __init__(self, backend: str | None = None) -> None:
        self._initialize(backend)

    def configuration(self) -> dict:
        return {"dtype": "float32"}

    def build(self, tape: Tape, fresh: bool = False) -> _Temperature:
        return _Temperature(tape.parameter(np.float32(1.0), name="temperature"))

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        if len(args) != 1:
            raise TypeError(f"TemperatureCalibration takes one input, got {len(args)}")
        return [as_float_array("TemperatureCalibration", args[0])]

    def express(self, built: _Temperature, inputs: Sequence[Expr]) -> Expr:
        return inputs[0] / built.temperature

    @property
    def temperature(self) -> float:
        """The current temperature (the logits are divided by it)."""
        return float(self.parameters.payloads()[0])

    def forward(self, logits: Any) -> np.ndarray:
        """The calibrated logits."""
        return self(logits)

    def fit(self, logits: Any, labels: Any) -> dict:
        """Fit the temperature on held-out ``logits`` ``[examples, classes]`` and integer
        ``labels``; returns ``{temperature, nll_before, nll_after, examples}``."""
        from scipy.optimize import minimize_scalar

        z, y = _logits_and_labels(logits, labels)
        picked = z[np.arange(len(y)), y]

        def nll(log_beta: float) -> float:
            beta = math.exp(log_beta)
            scaled = beta * z
            top = scaled.max(axis=1)
            lse = top + np.log(np.exp(scaled - top[:, None]).sum(axis=1))
            return float(np.mean(lse - beta * picked))

        result = minimize_scalar(nll, bounds=(-12.0, 12.0), method="bounded",
                                 options={"xatol": 1e-10, "maxiter": 500})
        if not result.success:
            raise TensorCodeError(f"temperature fit did not converge: {result.message}")
        temperature = math.exp(-float(result.x))
        before = nll(0.0)
        self.load_payloads([np.float32(temperature)])
        return {"temperature": float(np.float32(temperature)), "nll_before": before,
                "nll_after": float(result.fun), "examples": len(y)}


def evaluate_calibration(logits: Any, labels: Any, bins: int = 15) -> dict:
    """Calibration metrics of ``softmax(logits)`` against integer ``labels``.

    ``ece``: sum over equal-width confidence bins of (bin share) x |accuracy - mean
    confidence|; ``mce``: the largest such gap over nonempty bins; ``nll``: mean negative
    log-likelihood; ``brier``: mean over examples of the squared distance between the
    probability vector and the one-hot label; ``accuracy``: top-1. Bin ``b`` holds
    confidences in ``(b/bins, (b+1)/bins]`` (the first also holds 0)."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive int, got {bins!r}")
    z, y = _logits_and_labels(logits, labels)
    log_p = _log_softmax(z)
    p = np.exp(log_p)
    n = len(y)
    confidence = p.max(axis=1)
    predicted = p.argmax(axis=1)
    correct = (predicted == y).astype(np.float64)
    index = np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)
    ece, mce = 0.0, 0.0
    for b in range(bins):
        members = index == b
        count = int(members.sum())
        if count == 0:
            continue
        gap = abs(float(correct[members].mean()) - float(confidence[members].mean()))
        ece += count / n * gap
        mce = max(mce, gap)
    one_hot = np.zeros_like(p)
    one_hot[np.arange(n), y] = 1.0
    return {"ece": ece, "mce": mce, "nll": float(-log_p[np.arange(n), y].mean()),
            "brier": float(((p - one_hot) ** 2).sum(axis=1).mean()),
            "accuracy": float(correct.mean()), "examples": n, "bins": bins}


@dataclass(frozen=True)
class ThresholdFit:
    """Accept predictions with ``confidence >= threshold``: on the calibration sample
    that accepts ``coverage`` of the examples with an error rate of ``error``."""

    threshold: float
    coverage: float
    error: float
    accepted: int
    examples: int


def fit_threshold(confidences: Any, correct: Any, max_error: float) -> ThresholdFit:
    """The lowest threshold whose accepted examples have an empirical error rate of at
    most ``max_error``, which is the one with the largest coverage. When no threshold
    qualifies, nothing is accepted (``threshold`` is infinity). Ties in confidence are
    accepted or rejected together."""
    c = np.asarray(confidences, dtype=np.float64)
    ok = np.asarray(correct)
    if c.ndim != 1 or c.shape != ok.shape or c.size == 0:
        raise ShapeError(f"confidences and correct must be equal-length 1-D arrays, got "
                         f"{list(c.shape)} and {list(ok.shape)}")
    if not np.all(np.isfinite(c)):
        raise ValueError("confidences hold NaN or infinity")
    if ok.dtype.kind not in "biu" or not np.all((ok == 0) | (ok == 1)):
        raise ValueError("correct must be booleans (or 0/1)")
    if isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or \
            not 0 <= max_error <= 1:
        raise ValueError(f"max_error must be a number in [0, 1], got {max_error!r}")
    order = np.argsort(-c, kind="stable")
    c_sorted = c[order]
    wrong = np.cumsum(1 - ok[order].astype(np.int64))
    n = c.size
    best = None
    for k in range(n):
        if k + 1 < n and c_sorted[k + 1] == c_sorted[k]:
            continue  # a tie: the threshold takes the whole group or none of it
        accepted = k + 1
        error = wrong[k] / accepted
        if error <= max_error:
            best = (float(c_sorted[k]), accepted, float(error))
    if best is None:
        return ThresholdFit(math.inf, 0.0, 0.0, 0, n)
    threshold, accepted, error = best
    return ThresholdFit(threshold, accepted / n, error, accepted, n)


__all__ = ["TemperatureCalibration", "evaluate_calibration", "fit_threshold", "ThresholdFit",
           "negative_log_likelihood"]

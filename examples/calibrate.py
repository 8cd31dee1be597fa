"""Calibrate an overconfident classifier and pick an abstention threshold.

An MLP trained to near-zero loss on a small sample of overlapping classes becomes
overconfident: its top probability is far above its accuracy. This script trains one
with the Trainer (batches traced and supervised with integer labels), fits a
``TemperatureCalibration`` on a held-out calibration split, reports calibration on a
separate test split before and after, and fits a confidence threshold for a 5% error
budget on the calibration split (an empirical statement about that sample, checked
again on the test split).

    python examples/calibrate.py
    python examples/calibrate.py --backend reference
"""

from __future__ import annotations

import argparse

import numpy as np

import tensorcode as tc
from tensorcode import trace
from tensorcode.compiler.backends import BACKENDS, DEFAULT_BACKEND
from tensorcode.operations import MlpOperation
from tensorcode.training import (
    TemperatureCalibration,
    Trainer,
    evaluate_calibration,
    fit_threshold,
)

CLASSES, FEATURES = 3, 8


def sample(generator: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Three Gaussian classes whose centres sit close enough to overlap."""
    centres = np.random.default_rng(0).normal(0.0, 1.0, size=(CLASSES, FEATURES))
    labels = generator.integers(0, CLASSES, size=n)
    points = centres[labels] + generator.normal(0.0, 1.2, size=(n, FEATURES))
    return points.astype(np.float32), labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=BACKENDS)
    parser.add_argument("--epochs", type=int, default=150)
    args = parser.parse_args()

    rng = np.random.default_rng(42)
    train_x, train_y = sample(rng, 96)
    calib_x, calib_y = sample(rng, 2000)
    test_x, test_y = sample(rng, 2000)

    model = MlpOperation([FEATURES, 64, CLASSES], activation="tanh", seed=3, backend=args.backend)
    batches = []
    for start in range(0, len(train_x), 32):
        session = trace()
        logits = session.run(lambda: model(train_x[start:start + 32]))
        session.supervise(logits, [int(k) for k in train_y[start:start + 32]],
                          source="synthetic:gaussian-classes")
        batches.append(session)
    trainer = Trainer.from_ops({"model": model}, lr=0.01, backend=args.backend,
                               optimizer=tc.optim.Adam(backend=args.backend))
    losses = trainer.fit(batches, epochs=args.epochs, progress=True)
    print(f"trained {trainer.steps} steps: training loss {np.mean(losses[:3]):.3f} -> "
          f"{np.mean(losses[-3:]):.4f}")

    calibration = TemperatureCalibration(backend=args.backend)
    report = calibration.fit(model(calib_x), calib_y)
    print(f"temperature {report['temperature']:.3f} (calibration NLL "
          f"{report['nll_before']:.3f} -> {report['nll_after']:.3f})")

    raw = model(test_x)
    before = evaluate_calibration(raw, test_y)
    after = evaluate_calibration(calibration.forward(raw), test_y)
    print(f"{'test split':<12}{'ECE':>8}{'MCE':>8}{'NLL':>8}{'Brier':>8}{'acc':>8}")
    for name, metrics in (("raw", before), ("calibrated", after)):
        print(f"{name:<12}" + "".join(f"{metrics[k]:>8.3f}"
                                      for k in ("ece", "mce", "nll", "brier", "accuracy")))

    def confidences(logits: np.ndarray) -> np.ndarray:
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (shifted / shifted.sum(axis=1, keepdims=True)).max(axis=1)

    calibrated_calib = calibration.forward(model(calib_x))
    threshold = fit_threshold(confidences(calibrated_calib),
                              calibrated_calib.argmax(axis=1) == calib_y, max_error=0.05)
    calibrated_test = calibration.forward(raw)
    accepted = confidences(calibrated_test) >= threshold.threshold
    test_error = float(np.mean(calibrated_test.argmax(axis=1)[accepted] != test_y[accepted])) \
        if accepted.any() else 0.0
    print(f"threshold {threshold.threshold:.3f} for a 5% error budget: calibration split "
          f"coverage {threshold.coverage:.3f}, error {threshold.error:.3f}; test split "
          f"coverage {accepted.mean():.3f}, error {test_error:.3f}")


if __name__ == "__main__":
    main()

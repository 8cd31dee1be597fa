"""Learning rates are clones: one spec, several states.

Each learning rate descends from a clone of the same initial table; nothing about the
network is copied.

    python examples/guide/learning_rates.py [--plot PATH]   (the plate needs the plot extra)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tensorcode as tc
from tensorcode.guide import GuideResult, main

RATES = (0.005, 0.02, 0.05)


def line_fit(tape: tc.Tape):
    """Record a line ``w * x + b`` and its squared error on three points."""
    w = tape.parameter(0.0)
    b = tape.parameter(0.0)
    # three samples of the line y = 2x + 1, as leaves; the loss sums squared errors
    loss = None
    for x, y in [(1.0, 3.0), (2.0, 5.0), (3.0, 7.0)]:
        error = w * tape.leaf(x) + b - tape.leaf(y)
        squared = error * error
        loss = squared if loss is None else loss + squared
    return w, b, loss


def descend(rate: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The plain gradient-descent rule at ``rate``, for ``Parameters.step``."""
    return lambda p, g: p - g * rate


def run(quick: bool = False, steps: int = 300) -> GuideResult:
    """Train the same line from clones of one initial table at each rate."""
    network, (w, b, loss) = tc.Tape.record(line_fit)
    initial = network.parameters()
    curves: dict[str, list[float]] = {}
    finals = {}
    lines = []
    for rate in RATES:
        parameters = initial.clone()  # cloning the state is all a what-if costs
        losses = []
        for _ in range(steps):
            run_ = network.forward(parameters)
            losses.append(float(run_.of(loss)))
            gradients = run_.backward(loss).parameters(parameters)
            parameters = parameters.step(gradients, descend(rate))
        fw, fb = float(parameters.of(w)), float(parameters.of(b))
        label = f"lr {rate}: w {fw:.2f}, b {fb:.2f}"
        curves[label] = losses
        finals[rate] = {"w": fw, "b": fb, "first_loss": losses[0], "last_loss": losses[-1]}
        lines.append(f"{label}   loss {losses[0]:.3g} -> {losses[-1]:.3g}")
    lines.append(f"initial table untouched: w {float(initial.of(w)):g}, b {float(initial.of(b)):g}")
    return GuideResult("learning_rates", "one spec, three learning rates", lines,
                       data={"curves": curves}, claims={"finals": finals})


if __name__ == "__main__":
    main("learning_rates", run, __doc__)

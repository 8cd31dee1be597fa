"""Twins: a tanh MLP fit to a noisy sine, read back through the trained expression.

Training records the derivative and runs forward-only: each step reads the recorded
gradients. The fit line is the trained expression itself fed an even grid in place of
the training samples: same nodes, different feed.

    python examples/guide/noisy_sine.py [--plot PATH]   (the plate needs the plot extra)
"""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.guide import GuideResult, main
from tensorcode.guide.steps import descend, gradient_reader


def run(quick: bool = False, steps: int = 1500, backend: str | None = None) -> GuideResult:
    """Fit an MLP to noisy samples of a sine."""
    features = tc.init.uniform(3, 3.0)((96, 1))
    noise = tc.init.normal(5, 0.1)((96, 1))
    targets = (np.sin(features) + noise).astype(np.float32)

    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [1, 16, 1], activation="tanh", init=tc.init.xavier(7))
    inputs = tape.input(features, name="x")
    predicted = mlp(inputs)
    error = predicted - tape.input(targets, name="y")
    loss = (error * error).sum()
    adjoints = tape.differentiate(loss, mlp.parameters())
    network = tape.into_network()

    read, how = gradient_reader(network, adjoints, backend)
    parameters, losses = descend(read, network.parameters(), steps, np.float32(0.002))

    grid = np.linspace(-3.0, 3.0, 96, dtype=np.float32).reshape(96, 1)
    fit = network.forward(parameters, {inputs: grid}).of(predicted).reshape(-1)
    worst = float(np.max(np.abs(fit[8:-8] - np.sin(grid[8:-8, 0]))))
    lines = [
        f"training: {how}",
        f"loss (sum of squared errors) {losses[0]:.3f} -> {losses[-1]:.3f} over {steps} steps",
        f"fit on an even grid of 96 points: max |fit - sin x| inside [-2.5, 2.5] = {worst:.3f}",
    ]
    return GuideResult("noisy_sine", "a tanh mlp fit to noisy sin x", lines,
                       data={"samples_x": features.reshape(-1).tolist(),
                             "samples_y": targets.reshape(-1).tolist(),
                             "grid": grid.reshape(-1).tolist(), "fit": fit.tolist(),
                             "losses": losses},
                       claims={"first_loss": losses[0], "last_loss": losses[-1],
                               "worst_inner_error": worst})


if __name__ == "__main__":
    main("noisy_sine", run, __doc__)

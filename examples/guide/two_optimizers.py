"""Two optimizers, one recorded gradient: plain SGD against Adam on one regression.

Both runs start from the same initial table and read the same recorded gradients; the
optimizer is a caller-owned instrument the loop hands the gradients to, and the learning
rate stays an argument of every step.

    python examples/guide/two_optimizers.py [--plot PATH]   (the plate needs the plot extra)
"""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.guide import GuideResult, main
from tensorcode.guide.steps import gradient_reader


def run(quick: bool = False, steps: int = 400, backend: str | None = None) -> GuideResult:
    """Train one regression with plain SGD and with Adam from the same initial table."""
    if quick:
        steps = min(steps, 100)
    # A tanh MLP fit to sin x over 48 samples, recorded once.
    features = tc.init.uniform(3, 3.0)((48, 1))
    targets = np.sin(features).astype(np.float32)
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [1, 16, 1], activation="tanh", init=tc.init.xavier(7))
    error = mlp(tape.input(features, name="x")) - tape.input(targets, name="y")
    loss = (error * error).sum()
    adjoints = tape.differentiate(loss, mlp.parameters())
    network = tape.into_network()
    read, how = gradient_reader(network, adjoints, backend)

    # The loop owns the state and the learning rate; the optimizer is the strategy it
    # hands the gradients to. Hyperparameters are written at the call site.
    runs = [("sgd, lr 0.003", tc.optim.Sgd(), 0.003),
            ("adam, lr 0.005", tc.optim.Adam(betas=(0.9, 0.999), eps=1e-8), 0.005)]
    curves: dict[str, list[float]] = {}
    for label, optimizer, learning_rate in runs:
        parameters = network.parameters()
        losses = []
        for _ in range(steps):
            value, gradients = read(parameters)
            losses.append(value)
            parameters = optimizer.step(parameters, gradients, lr=learning_rate)
        curves[label] = losses

    lines = [f"training: {how}"]
    claims: dict = {"steps": steps}
    for label, losses in curves.items():
        lines.append(f"{label}: sum of squared errors {losses[0]:.3f} -> {losses[-1]:.4f} "
                     f"over {steps} steps")
        claims[label] = {"first_loss": losses[0], "last_loss": losses[-1]}
    return GuideResult("two_optimizers", "two optimizers, one recorded gradient", lines,
                       data={"curves": curves}, claims=claims)


if __name__ == "__main__":
    main("two_optimizers", run, __doc__)

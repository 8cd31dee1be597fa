"""Twins: the two moons separated by a [2, 16, 16, 1] tanh MLP.

A grid-shaped twin of the training expression shares every parameter symbol and draws
the decision surface; an entry that declares only the training roots never schedules it.

    python examples/guide/two_moons.py [--plot PATH]   (the plate needs the plot extra)
"""

from __future__ import annotations

import math

import numpy as np

import tensorcode as tc
from tensorcode.guide import GuideResult, main
from tensorcode.guide.steps import descend, gradient_reader

X_SPAN = (-1.5, 2.5)
Y_SPAN = (-1.0, 1.5)


def moons() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two interleaved half-moons of a hundred noisy points each, labels +1 and -1."""
    noise = tc.init.normal(5, 0.1)((200, 2)).reshape(-1)
    xs, ys, labels = [], [], []
    for moon in range(2):
        for index in range(100):
            angle = math.pi * index / 99.0
            if moon == 0:
                x, y = math.cos(angle), math.sin(angle)
            else:
                x, y = 1.0 - math.cos(angle), 0.5 - math.sin(angle)
            at = 2 * (moon * 100 + index)
            xs.append(x + noise[at])
            ys.append(y + noise[at + 1])
            labels.append(1.0 if moon == 0 else -1.0)
    return (np.array(xs, np.float32), np.array(ys, np.float32),
            np.array(labels, np.float32).reshape(200, 1))


def run(quick: bool = False, steps: int = 2000, columns: int = 48, rows: int = 16,
        backend: str | None = None) -> GuideResult:
    """Separate the two moons with a [2, 16, 16, 1] tanh MLP and draw its decision surface."""
    xs, ys, labels = moons()
    features = np.stack([xs, ys], axis=1)

    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [2, 16, 16, 1], activation="tanh", init=tc.init.xavier(7))
    predicted = mlp(tape.input(features, name="points"))
    error = predicted - tape.input(labels, name="labels")
    loss = (error * error).sum()
    adjoints = tape.differentiate(loss, mlp.parameters())
    # a grid-shaped twin of the same parameters rasterizes the surface
    centers = np.array([[X_SPAN[0] + (c + 0.5) / columns * (X_SPAN[1] - X_SPAN[0]),
                         Y_SPAN[0] + (r + 0.5) / rows * (Y_SPAN[1] - Y_SPAN[0])]
                        for r in range(rows) for c in range(columns)], np.float32)
    surface = mlp(tape.input(centers, name="grid"))
    network = tape.into_network()

    read, how = gradient_reader(network, adjoints, backend)
    parameters, losses = descend(read, network.parameters(), steps, np.float32(0.0003))

    final = network.forward(parameters)
    accuracy = float(np.mean(np.sign(final.of(predicted)) == labels))
    values = final.of(surface).reshape(rows, columns)
    lines = [
        f"training: {how}",
        f"loss (sum of squared errors) {losses[0]:.2f} -> {losses[-1]:.2f} over {steps} steps",
        f"training accuracy (sign of the output): {accuracy:.1%}",
        f"surface {rows}x{columns} read from the grid-shaped twin",
    ]
    return GuideResult("two_moons", "the learned decision surface", lines,
                       data={"surface": values.tolist(), "columns": columns, "rows": rows,
                             "extents": [list(X_SPAN), list(Y_SPAN)],
                             "class_pos": [xs[:100].tolist(), ys[:100].tolist()],
                             "class_neg": [xs[100:].tolist(), ys[100:].tolist()],
                             "losses": losses},
                       claims={"first_loss": losses[0], "last_loss": losses[-1],
                               "accuracy": accuracy})


if __name__ == "__main__":
    main("two_moons", run, __doc__)

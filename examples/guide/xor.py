"""Feeds are the data: XOR learned by a [2, 4, 1] tanh MLP fed two samples per run.

The graph is recorded over a [2, 2] input and trains on any number of two-sample
minibatches without growing; afterwards it rasterizes its learned surface through the
very same two-row expression, two grid cells per run.

    python examples/guide/xor.py [--plot PATH]   (the plate needs the plot extra)
"""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.guide import GuideResult, main

MINIBATCHES = [
    (np.array([[0.0, 0.0], [0.0, 1.0]], np.float32), np.array([[-1.0], [1.0]], np.float32)),
    (np.array([[1.0, 0.0], [1.0, 1.0]], np.float32), np.array([[1.0], [-1.0]], np.float32)),
]


def run(quick: bool = False, steps: int = 3000, columns: int = 24, rows: int = 12
        ) -> GuideResult:
    """Learn XOR with a [2, 4, 1] tanh MLP and draw its decision surface."""
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [2, 4, 1], activation="tanh", init=tc.init.uniform(7, 0.5))
    x = tape.input(np.zeros((2, 2), np.float32), name="x")  # the defaults fix the shapes
    y = tape.input(np.zeros((2, 1), np.float32), name="y")
    predicted = mlp(x)
    error = predicted - y
    loss = (error * error).sum()
    network = tape.into_network()

    parameters = network.parameters()
    rate = np.float32(0.05)
    for step in range(steps):
        batch_x, batch_y = MINIBATCHES[step % 2]
        run_ = network.forward(parameters, {x: batch_x, y: batch_y})
        gradients = run_.backward(loss).parameters(parameters)
        parameters = parameters.step(gradients, lambda p, g: p - g * rate)

    corners = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
    answers = np.concatenate([network.forward(parameters, {x: corners[k:k + 2]}).of(predicted)
                              for k in (0, 2)]).reshape(-1)
    expected = np.array([-1.0, 1.0, 1.0, -1.0])
    # the surface, two grid cells per run through the same expression
    centers = np.array([[(c + 0.5) / columns, (r + 0.5) / rows]
                        for r in range(rows) for c in range(columns)], np.float32)
    surface = np.concatenate([network.forward(parameters, {x: centers[k:k + 2]}).of(predicted)
                              for k in range(0, len(centers), 2)]).reshape(rows, columns)
    signs_right = bool(np.all(np.sign(answers) == expected))
    lines = [f"xor({int(a)}, {int(b)}) = {v:+.3f}   (want {int(t):+d})"
             for (a, b), v, t in zip(corners, answers, expected)]
    lines.append(f"signs right: {signs_right}; surface {rows}x{columns} drawn two cells per run")
    return GuideResult("xor", "the learned xor surface", lines,
                       data={"surface": surface.tolist(), "columns": columns, "rows": rows,
                             "extents": [[0.0, 1.0], [0.0, 1.0]]},
                       claims={"answers": answers.tolist(), "signs_right": signs_right})


if __name__ == "__main__":
    main("xor", run, __doc__)

"""Spec and state: training does not version the graph.

A hundred steps of the loop step the caller's table; the network prints the same lines
afterwards and still answers the recorded initial.

    python examples/guide/spec_and_state.py [--plot PATH]   (the plate needs the plot extra)
"""

from __future__ import annotations

import tensorcode as tc
from tensorcode.guide import GuideResult, main

SAMPLES = [(1.0, 2.0), (2.0, 4.0), (3.0, 6.0)]


def regression(tape: tc.Tape):
    """Record ``(w * x - y)^2`` with default feeds that fix the input types."""
    w = tape.parameter(0.0)  # float64 scalar, like the recorded initial
    x = tape.input(0.0)      # the default feed fixes shape and dtype
    y = tape.input(0.0)
    error = w * x - y
    return w, x, y, error * error


def run(quick: bool = False) -> GuideResult:
    """Step the caller's table a hundred times and show the network is unchanged."""
    network, (w, x, y, loss) = tc.Tape.record(regression)
    before = network.describe()
    parameters = network.parameters()
    for step in range(100):
        sample_x, sample_y = SAMPLES[step % len(SAMPLES)]
        run_ = network.forward(parameters, {x: sample_x, y: sample_y})
        gradients = run_.backward(loss).parameters(parameters)
        parameters = parameters.step(gradients, lambda p, g: p - g * 0.02)
    unchanged = network.describe() == before
    initial = float(network.parameters().of(w))
    stepped = float(parameters.of(w))
    what_if = parameters.clone()
    lines = [
        f"network.describe() unchanged after 100 steps: {unchanged}",
        f"network.parameters().of(w)   {initial:g}   (the recorded initial, materialized fresh)",
        f"parameters.of(w)             {stepped!r}   (the table the loop stepped)",
        f"parameters.clone()           a what-if, costing {len(what_if)} payloads",
    ]
    return GuideResult("spec_and_state", "training does not version the graph", lines,
                       claims={"unchanged": unchanged, "initial": initial, "stepped": stepped,
                               "clone_payloads": len(what_if)})


if __name__ == "__main__":
    main("spec_and_state", run, __doc__)

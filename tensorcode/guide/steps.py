"""How the guide's compiled-training examples read a step's loss and gradients.

With the compiler present, a step is one forward-only plan over ``adjoints.roots()``; the
reference backend runs the same recorded gradient nodes through the NumPy interpreter.
The choice is explicit and printed, never a silent substitution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorcode as tc


def gradient_reader(network: tc.Network, adjoints: tc.Adjoints, backend: str | None
                    ) -> tuple[Callable[[tc.Parameters], tuple[float, tc.Gradients]], str]:
    """``(read, description)``: ``read(parameters) -> (loss, gradients)``.

    ``backend`` is a backend's name (``"llvm"``, ``"numba"``, ``"reference"``) for a
    lowered plan, ``"network"`` for ``network.forward`` with the recorded gradients, or
    ``None`` for the default plan."""
    if backend == "network":
        def read_network(parameters: tc.Parameters) -> tuple[float, Any]:
            run = network.forward(parameters)
            return float(run.of(adjoints.loss)), run.recorded_gradients(adjoints)
        return read_network, "network.forward + recorded gradients (reference interpreter)"
    entry = network.entry(adjoints.roots())
    plan = entry.lower() if backend is None else entry.lower(backend=backend)

    def read_plan(parameters: tc.Parameters) -> tuple[float, Any]:
        run = plan.forward(parameters)
        return float(run.of(adjoints.loss)), run.recorded_gradients(adjoints)
    return read_plan, f"forward-only plan over adjoints.roots() ({backend or 'default'} backend)"


def descend(read: Callable[[tc.Parameters], tuple[float, tc.Gradients]],
            parameters: tc.Parameters, steps: int, rate: Any
            ) -> tuple[tc.Parameters, list[float]]:
    """Plain gradient descent, the guide's loop: ``p - g * rate`` on every slot for
    ``steps`` steps; returns the final table and the loss before each step."""
    losses = []
    for _ in range(steps):
        value, gradients = read(parameters)
        losses.append(value)
        parameters = parameters.step(gradients, lambda p, g: p - g * rate)
    return parameters, losses

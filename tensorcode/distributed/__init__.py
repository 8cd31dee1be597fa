"""Beyond one machine, on Ray: data-parallel training, sweeps, distillation, serving.

TensorCode's model fits Ray's actors: a ``Network`` is an immutable spec every worker
records for itself from a ``build`` callable (never pickled from the driver), a plan is
pure and lowered once per worker, and the state is a table whose flat buffers are all
that crosses the network.

- ``DataParallel(build, workers=N, optimizer=...)``: each worker computes the gradients
  of its shard, the driver sums them and applies one update;
- ``sweep(build, configs, steps)``: one clone of the initial table per configuration,
  trained as Ray tasks; returns the final losses and the best's parameters;
- ``RayExecutor()``: scores distillation attempts over cases sharded across workers
  (``distill(..., runner=RayExecutor())``, ``repair(..., runner=...)``);
- ``serve_deployment(DIR, replicas=N)``: a Ray Serve deployment of the router app.

Ray is the optional ``distributed`` extra (``pip install 'tensorcode[distributed]'``);
``import tensorcode`` never imports it, and neither does this package until a name
that needs it is used. ``projection`` (the arithmetic of when adding machines pays)
needs no Ray at all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .cases import RayExecutor
    from .data_parallel import DataParallel, StepResult
    from .projection import Projection, project
    from .recording import Recording, record, sum_gradients
    from .serving import serve_deployment
    from .sweeps import Config, SweepResult, sweep

_LAZY = {
    "DataParallel": ".data_parallel", "StepResult": ".data_parallel",
    "sweep": ".sweeps", "Config": ".sweeps", "SweepResult": ".sweeps",
    "RayExecutor": ".cases",
    "serve_deployment": ".serving",
    "Recording": ".recording", "record": ".recording", "sum_gradients": ".recording",
    "Projection": ".projection", "project": ".projection",
}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562), so Ray loads only when needed."""
    try:
        module_name = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tensorcode.distributed' has no attribute {name!r}"
                             ) from None
    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DataParallel", "StepResult", "sweep", "Config", "SweepResult", "RayExecutor",
    "serve_deployment", "Recording", "record", "sum_gradients", "Projection", "project",
]

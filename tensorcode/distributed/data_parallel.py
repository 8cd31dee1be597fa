"""Data-parallel training on Ray actors: one shard of the batch per worker, one update.

Each worker is a Ray actor that records the network with the caller's ``build`` (the
network is rebuilt there, never pickled from the driver) and lowers its plan once. A
step puts the parameter table's flat buffers into Ray's object store once; every worker
reads them, runs its plan on its shard and returns its gradient buffers; the driver sums
them in worker order and applies one optimizer update. The driver owns the only
parameter table and the optimizer state, so every worker computes with the same
parameters by construction and the update is exactly the single-process one.

With ``reduce="mean"`` (for a loss that is a mean over the rows, the usual case) the sum
is divided by the number of workers, which with equal shards is the gradient of the mean
over the whole batch; ``reduce="sum"`` is for a loss that sums over rows.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compiler.backends import DEFAULT_BACKEND, check_backend
from ..compiler.plans.tables import Parameters
from ..errors import TensorCodeError
from ..runtime.optim import Sgd
from .ray_support import DEFAULT_TIMEOUT_S, check_timeout, gather, require_initialized
from .recording import (
    Buffers,
    Build,
    Lowered,
    buffers_of,
    check_signature,
    input_shapes,
    record,
    split_rows,
    sum_gradients,
)


class ShardWorker:
    """The actor body: a recording, its plan, and one method per step."""

    def __init__(self, build: Build, backend: str) -> None:
        self.lowered = Lowered(record(build), backend)

    def signature(self) -> Any:
        return self.lowered.recording.signature()

    def gradients(self, parameters: Buffers, shard: Mapping[str, np.ndarray]
                  ) -> tuple[float, Buffers, float]:
        """The loss and gradient buffers of ``shard`` at ``parameters``, and the seconds
        the plan took (so the driver can tell compute from communication)."""
        start = time.perf_counter()
        layout = self.lowered.recording.network.layout
        table = Parameters.from_buffers(layout, dict(parameters))
        loss, gradients = self.lowered.loss_and_gradients(table, shard)
        return loss, buffers_of(gradients), time.perf_counter() - start


@dataclass(frozen=True)
class StepResult:
    """One data-parallel step: the loss over the whole batch (before the update, as the
    workers computed it), the updated parameters, the slowest worker's compute seconds
    and the driver's update seconds (the rest of the step's wall time is communication
    and dispatch)."""

    loss: float
    parameters: Parameters
    compute_s: float = 0.0
    update_s: float = 0.0


class DataParallel:
    """Train one network over ``workers`` Ray actors; use as a context manager or call
    ``close()`` to release the actors.

    ``build()`` records the per-worker program and returns ``(network, adjoints)``; its
    named inputs are recorded with the rows of one shard, so a step's batch has
    ``workers`` times as many rows. ``optimizer`` is any ``tc.optim.Optimizer`` (default
    plain ``Sgd()``); it and the parameter table live on the driver. ``timeout_s`` bounds
    every wait on the workers: a worker that raised, died or hangs is reported as
    ``WorkerError`` and all workers are released.
    """

    def __init__(self, build: Build, workers: int = 2, optimizer: Any = None, *,
                 reduce: str = "mean", backend: str = DEFAULT_BACKEND,
                 parameters: Parameters | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        ray = require_initialized()
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise TensorCodeError(f"workers must be a positive integer, got {workers!r}")
        if reduce not in ("mean", "sum"):
            raise TensorCodeError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
        check_backend(backend)
        self.timeout_s = check_timeout(timeout_s)
        self.reduce = reduce
        #: the driver's recording: the layout, the initial table, the input shapes (the
        #: driver lowers no plan)
        self.recording = record(build)
        network = self.recording.network
        if parameters is None:
            parameters = network.parameters()
        network.check_parameters(parameters)
        self.parameters: Parameters = parameters
        if optimizer is None:
            optimizer = Sgd()
        self.optimizer = optimizer
        self.compute_s = 0.0
        self._shapes = input_shapes(self.recording)
        self._names = [f"worker {k}" for k in range(workers)]
        actor = ray.remote(num_cpus=1, max_restarts=0)(ShardWorker)
        self._actors: list[Any] = [actor.remote(build, backend) for _ in range(workers)]
        signatures = self._gather([a.signature.remote() for a in self._actors])
        for name, signature in zip(self._names, signatures):
            check_signature(self.recording.signature(), signature, name)

    @property
    def workers(self) -> int:
        return len(self._names)

    @property
    def handles(self) -> list[Any]:
        """The workers' Ray actor handles, in worker order (empty once closed)."""
        return list(self._actors)

    def _gather(self, refs: list[Any]) -> list[Any]:
        if not self._actors:
            raise TensorCodeError("this DataParallel is closed (a worker failed or close() "
                                  "was called); make a new one")
        try:
            return gather(refs, self._names, self.timeout_s)
        except TensorCodeError:  # a WorkerError: release every worker, then report
            self.close()
            raise

    def gradients(self, batch: Mapping[str, Any]) -> tuple[float, Any]:
        """The loss and the reduced ``Gradients`` of ``batch`` (``{input name: rows}``)
        at the current parameters, without updating them (``compute_s`` then holds the
        slowest worker's seconds)."""
        ray = require_initialized()
        shards = split_rows(batch, self.workers, self._shapes)
        parameters = ray.put(buffers_of(self.parameters))
        refs = [a.gradients.remote(parameters, shard) for a, shard in zip(self._actors, shards)]
        results = self._gather(refs)
        scale = 1.0 / self.workers if self.reduce == "mean" else 1.0
        losses = [loss for loss, _, _ in results]
        self.compute_s = max(seconds for _, _, seconds in results)
        gradients = sum_gradients(self.parameters.layout, [g for _, g, _ in results], scale)
        loss = sum(losses) * scale
        return loss, gradients

    def step(self, batch: Mapping[str, Any], lr: float) -> StepResult:
        """One step over ``batch``: shard, compute gradients on every worker, sum, update."""
        loss, gradients = self.gradients(batch)
        start = time.perf_counter()
        self.parameters = self.optimizer.step(self.parameters, gradients, lr)
        return StepResult(loss, self.parameters, self.compute_s, time.perf_counter() - start)

    def close(self) -> None:
        """Release the actors (idempotent)."""
        actors, self._actors = self._actors, []
        if actors:
            ray = require_initialized()
            for actor in actors:
                ray.kill(actor)

    def __enter__(self) -> DataParallel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        with contextlib.suppress(Exception):
            self.close()

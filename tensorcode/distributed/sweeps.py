"""Sweeps of what-ifs: one clone of the initial table per configuration, as Ray tasks.

A table is caller-owned state, so a what-if is a clone of it: every configuration
(learning rate, optimizer, seed) starts from the same initial parameters, trains for
``steps`` on its own worker (which records the network with ``build`` and lowers its
plan once), and reports its final loss. The driver puts the initial table into Ray's
object store once; each task returns its loss and, as a separate object, its trained
table, so only the best configuration's parameters are ever fetched.

``parallel=False`` runs the same function in this process, one configuration after the
other: the serial baseline (and a way to sweep without a cluster).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..compiler.backends import DEFAULT_BACKEND, check_backend
from ..compiler.plans.network import Network
from ..compiler.plans.tables import Parameters
from ..errors import FeedError, TensorCodeError, WorkerError
from ..runtime import optim
from .ray_support import (
    DEFAULT_TIMEOUT_S,
    check_timeout,
    gather,
    require_initialized,
    settle,
)
from .recording import Buffers, Build, Lowered, buffers_of, check_signature, record

#: optimizer names a configuration may give, and the ``tc.optim`` class each names
OPTIMIZERS = ("sgd", "adam", "adamw")


@dataclass(frozen=True)
class Config:
    """One what-if: ``lr``, the optimizer (``"sgd"``, ``"adam"``, ``"adamw"``) with its
    keyword ``options`` (``{"momentum": 0.9}``), and the ``seed`` that orders the
    minibatches drawn from ``data`` (without data every step trains on the network's
    recorded inputs and the seed changes nothing)."""

    lr: float
    optimizer: str = "sgd"
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.lr, (int, float)) or not math.isfinite(self.lr) or self.lr < 0:
            raise TensorCodeError(f"Config.lr must be a finite non-negative number, got "
                                  f"{self.lr!r}")
        if self.optimizer not in OPTIMIZERS:
            raise TensorCodeError(f"Config.optimizer must be one of {OPTIMIZERS}, got "
                                  f"{self.optimizer!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise TensorCodeError(f"Config.seed must be a non-negative integer, got "
                                  f"{self.seed!r}")
        self.make_optimizer()  # its options checked here, on the driver, not in a task

    def make_optimizer(self) -> Any:
        kind = {"sgd": optim.Sgd, "adam": optim.Adam, "adamw": optim.AdamW}[self.optimizer]
        try:
            return kind(**dict(self.options))
        except (TypeError, ValueError) as error:
            raise TensorCodeError(f"{self.optimizer} options {dict(self.options)}: "
                                  f"{error}") from None

    def describe(self) -> str:
        options = "".join(f" {k}={v}" for k, v in sorted(dict(self.options).items()))
        return f"{self.optimizer}{options} lr={self.lr:g} seed={self.seed}"


def minibatches(data: Mapping[str, np.ndarray] | None, rows: int, seed: int, steps: int
                ) -> list[dict[str, np.ndarray] | None]:
    """The feeds of each step: ``rows`` rows of ``data`` drawn without replacement within
    an epoch, in an order set by ``seed``; ``None`` (the recorded inputs) without data."""
    if data is None:
        return [None] * steps
    arrays = {name: np.asarray(value) for name, value in data.items()}
    counts = {a.shape[0] if a.ndim else 0 for a in arrays.values()}
    if len(counts) != 1:
        raise FeedError(f"every array in data needs the same number of rows, got "
                        f"{ {n: list(a.shape) for n, a in arrays.items()} }")
    total = counts.pop()
    if total < rows:
        raise FeedError(f"data has {total} rows; the network's inputs take {rows} a step")
    rng = np.random.default_rng(seed)
    order = rng.permutation(total)
    batches: list[dict[str, np.ndarray] | None] = []
    start = 0
    for _ in range(steps):
        if start + rows > total:
            order, start = rng.permutation(total), 0
        pick = np.sort(order[start:start + rows])
        start += rows
        batches.append({n: np.ascontiguousarray(a[pick]) for n, a in arrays.items()})
    return batches


def train(build: Build, config: Config, steps: int, initial: Buffers,
          data: Mapping[str, np.ndarray] | None = None, backend: str = DEFAULT_BACKEND,
          signature: Any = None) -> tuple[float, list[float], Buffers]:
    """One configuration from a clone of ``initial``: ``(final loss, loss per step,
    trained buffers)``. The final loss is the trained table's loss on the network's
    recorded inputs, the same yardstick for every configuration."""
    recording = record(build)
    if signature is not None:
        check_signature(signature, recording.signature(), f"the worker for {config.describe()}")
    lowered = Lowered(recording, backend)
    parameters = Parameters.from_buffers(recording.network.layout,
                                         {d: np.array(b, copy=True) for d, b in initial.items()})
    optimizer = config.make_optimizer()
    rows = _rows(recording.network, data)
    losses = []
    for feeds in minibatches(data, rows, config.seed, steps):
        loss, gradients = lowered.loss_and_gradients(parameters, feeds)
        losses.append(loss)
        parameters = optimizer.step(parameters, gradients, config.lr)
    return lowered.loss(parameters), losses, buffers_of(parameters)


def _rows(network: Network, data: Mapping[str, Any] | None) -> int:
    if not data:
        return 0
    rows = set()
    for symbol in network.inputs():
        node = network.graph.nodes[symbol.index]
        if node.name in data:
            rows.add(node.type.shape[0] if node.type.shape else 0)
    if len(rows) != 1:
        raise FeedError(f"data must name inputs of the network that share one row count; "
                        f"got {sorted(data)}")
    return rows.pop()


@dataclass
class SweepResult:
    """The final loss of each configuration (in the order given), the best one (lowest
    finite final loss) and its trained parameters, in the driver's network's layout."""

    configs: list[Config]
    losses: list[float]
    curves: list[list[float]]
    best: int
    parameters: Parameters
    network: Network

    def table(self) -> str:
        """One line per configuration, the best marked with ``*``."""
        width = max(len(c.describe()) for c in self.configs)
        lines = [f"  {'configuration':<{width}}  final loss"]
        for k, (config, loss) in enumerate(zip(self.configs, self.losses)):
            mark = "*" if k == self.best else " "
            lines.append(f"{mark} {config.describe():<{width}}  {loss:.6g}")
        return "\n".join(lines)


def sweep(build: Build, configs: Sequence[Config | Mapping[str, Any]], steps: int, *,
          data: Mapping[str, np.ndarray] | None = None, backend: str = DEFAULT_BACKEND,
          parallel: bool = True, timeout_s: float = DEFAULT_TIMEOUT_S) -> SweepResult:
    """Train every configuration for ``steps`` from a clone of the initial table.

    ``configs``: ``Config`` objects or dicts of their fields. ``data``: optional
    ``{input name: rows}`` from which each step draws minibatches of the recorded row
    count. ``parallel=True`` runs one Ray task per configuration (``ray.init`` first);
    ``parallel=False`` runs them here one by one. A task that fails or exceeds
    ``timeout_s`` raises ``WorkerError`` naming its configuration.
    """
    chosen = [c if isinstance(c, Config) else Config(**dict(c)) for c in configs]
    if not chosen:
        raise TensorCodeError("sweep needs at least one configuration")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise TensorCodeError(f"steps must be a positive integer, got {steps!r}")
    check_backend(backend)
    timeout_s = check_timeout(timeout_s)
    recording = record(build)
    network = recording.network
    initial = buffers_of(network.parameters())
    signature = recording.signature()
    if parallel:
        ray = require_initialized()
        task = ray.remote(num_cpus=1, num_returns=3, max_retries=0)(train)
        shared = ray.put(initial)
        shared_data = ray.put(dict(data)) if data is not None else None
        refs = [task.remote(build, c, steps, shared, shared_data, backend, signature)
                for c in chosen]
        names = [f"the task for {c.describe()}" for c in chosen]
        try:
            losses = gather([r[0] for r in refs], names, timeout_s)
            curves = gather([r[1] for r in refs], names, timeout_s)
        except WorkerError:
            settle(ray, [ref for task_refs in refs for ref in task_refs])
            raise
        best = _best(losses)
        trained = gather([refs[best][2]], [names[best]], timeout_s)[0]
    else:
        results = [train(build, c, steps, initial, data, backend) for c in chosen]
        losses = [r[0] for r in results]
        curves = [r[1] for r in results]
        best = _best(losses)
        trained = results[best][2]
    parameters = Parameters.from_buffers(network.layout, dict(trained))
    return SweepResult(chosen, [float(x) for x in losses], curves, best, parameters, network)


def _best(losses: Sequence[float]) -> int:
    finite = [(loss, k) for k, loss in enumerate(losses) if math.isfinite(loss)]
    if not finite:
        raise TensorCodeError("every configuration diverged (no finite final loss)")
    return min(finite)[1]

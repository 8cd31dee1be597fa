"""``Operation``: a callable that owns its parameters and expresses itself on a tape.

An operation is the unit tracing records and the Trainer replays. It owns a
``Parameters`` table (its state), and it can write its computation onto any tape for
given input types (``build`` records its parameter symbols, ``express`` its
computation). Calling it on arrays lowers that expression once per input types into a
plan and runs the plan, so the Python call costs one plan call. Inputs of varying size
are padded to a few bucket sizes so the number of plans stays small.

Its identity for experience files is a SHA-256 fingerprint over what the operation
means (qualified name, configuration, replay capability, parameter shapes and dtypes),
never over learned values: trained weights still load the experiences recorded before.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..compiler.plans.tables import Parameters
from ..compiler.plans.tape import Tape
from ..compiler.trace.expr import Expr
from ..errors import ShapeError, TensorCodeError
from ..runtime import experience
from . import execute

#: What ``replay`` may do with a call of an operation: ``"pure"`` operations are
#: recomputed from their inputs and current parameters; ``"external"`` ones (remote
#: services, discrete choices made elsewhere) are never recomputed.
REPLAY_CAPABILITIES = ("pure", "external")


def canonical_json(value: Any) -> str:
    """The canonical JSON text fingerprints hash: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def row_bucket(n: int) -> int:
    """The padded row count for ``n`` rows: the next power of two (at least 1)."""
    size = 1
    while size < n:
        size *= 2
    return size


class Operation:
    """Base class of every traced, trainable operation.

    A subclass sets ``qualified_name`` (a stable dotted name, part of the fingerprint),
    implements ``configuration()``, ``build(tape)`` (record the parameters on a tape and
    return something ``express`` uses, typically a ``tc.nn`` module), ``convert(args)``
    (call arguments to arrays) and ``express(built, inputs)`` (the computation on
    ``Expr`` inputs), and calls ``self._initialize()`` at the end of ``__init__``.

    An operation whose effect happens outside TensorCode (a remote call) sets
    ``replay = "external"`` and overrides ``compute(*args)`` instead of ``express``.
    """

    qualified_name: ClassVar[str] = "tensorcode.ops.Operation"
    replay: ClassVar[str] = "pure"
    #: whether call-path inputs with a leading batch axis are padded to row buckets
    pads_rows: ClassVar[bool] = False
    #: the smallest input rank whose leading axis counts as a batch of rows
    min_pad_rank: ClassVar[int] = 2
    #: whether ``express`` takes each call argument as one tensor input, so another
    #: operation's output can flow in as a gradient path (False for text inputs)
    accepts_tensors: ClassVar[bool] = True

    _names: tuple[str, ...]
    _parameters: Parameters

    # -- the subclass contract ------------------------------------------------------------
    def configuration(self) -> dict:
        """JSON-safe data describing the operation's stable semantic choices."""
        return {}

    def build(self, tape: Tape, fresh: bool = False) -> Any:
        """Record this operation's parameters on ``tape`` in a fixed order and return
        what ``express`` needs. ``fresh`` asks for the seeded initial values (used once,
        at construction); otherwise any values of the right shape will do, because the
        caller feeds the operation's current table."""
        return None

    def convert(self, args: Sequence[Any]) -> list[np.ndarray]:
        """Turn the arguments of one call into the arrays ``express`` takes as inputs."""
        raise NotImplementedError(f"{type(self).__name__} does not convert inputs")

    def express(self, built: Any, inputs: Sequence[Expr]) -> Expr:
        """Record the computation on the tape ``built`` was recorded on."""
        raise NotImplementedError(f"{type(self).__name__} has no tape expression; an "
                                  "external operation overrides compute() instead")

    def compute(self, *args: Any) -> Any:
        """The Python computation of an external operation (``replay = "external"``)."""
        raise NotImplementedError(f"{type(self).__name__} is a tensor operation; it runs "
                                  "through express()")

    # -- construction ---------------------------------------------------------------------
    def _initialize(self, backend: str | None = None) -> None:
        """Record the parameters once to fix the table layout and the initial values."""
        if self.replay not in REPLAY_CAPABILITIES:
            raise TensorCodeError(f"{type(self).__name__}.replay must be one of "
                                  f"{REPLAY_CAPABILITIES}, got {self.replay!r}")
        tape = Tape()
        self.build(tape, fresh=True)
        network = tape.into_network()
        self._state_network = network
        self._names = tuple(slot.path for slot in network.layout.slots)
        self._parameters = network.parameters()
        self.backend = None if backend is None else execute.resolve_backend(backend)
        self.training = False
        #: the ``tc.random.Generator`` a plan that draws (dropout while training) uses
        self.generator: Any = None
        self._plans: dict[tuple, Any] = {}
        self._plans_lock = threading.Lock()
        canonical_json(self.configuration())  # JSON-safe or fail now, not at save time

    # -- state ----------------------------------------------------------------------------
    @property
    def parameters(self) -> Parameters:
        """The operation's current table (read-only payloads, in recording order)."""
        return self._parameters

    @parameters.setter
    def parameters(self, table: Parameters) -> None:
        self.load_payloads(table.payloads() if isinstance(table, Parameters) else table)

    def load_payloads(self, payloads: Sequence[Any]) -> None:
        """Replace the table with copies of ``payloads`` (exact shapes, one per slot)."""
        self._parameters = Parameters.from_payloads(self._state_network.layout,
                                                     list(payloads))

    def adopt_buffers(self, buffers: dict[str, np.ndarray]) -> None:
        """Take read-only flat buffers (one per dtype, exactly this table's sizes) as the
        new table without copying; the Trainer shares its buffers this way."""
        self._parameters = Parameters.from_buffers(self._state_network.layout, buffers)

    def named_parameters(self) -> list[tuple[str, np.ndarray]]:
        """``(path, payload)`` in recording order."""
        return list(zip(self._names, self._parameters.payloads()))

    def parameter_signature(self) -> list[list]:
        """``[name, shape, dtype]`` per parameter, in recording order: what a checkpoint
        or a trainer must match."""
        return [[name, list(p.shape), p.dtype.name]
                for name, p in zip(self._names, self._parameters.payloads())]

    def train(self, mode: bool = True) -> Operation:
        """Set the training mode (kept by checkpoints; returns self)."""
        self.training = bool(mode)
        return self

    def eval(self) -> Operation:
        """Leave training mode (``train(False)``); returns self."""
        return self.train(False)

    # -- identity -------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of what this operation means (not its values)."""
        document = {"qualified_name": self.qualified_name,
                    "configuration": self.configuration(),
                    "replay": self.replay,
                    "parameters": self.parameter_signature()}
        return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()

    # -- calling --------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        session = experience.current_trace()
        if session is None:
            return self.apply(args)
        return session.capture(self, args)

    def apply(self, args: Sequence[Any]) -> Any:
        """Compute one call with the current parameters, outside any trace."""
        if self.replay == "external":
            return self.compute(*args)
        arrays = self.convert(args)
        rows = None
        if self.pads_rows and arrays and all(a.ndim >= self.min_pad_rank for a in arrays) and \
                len({a.shape[0] for a in arrays}) == 1:
            rows = arrays[0].shape[0]
            padded = row_bucket(rows)
            if padded != rows:
                arrays = [np.concatenate([a, np.zeros((padded - rows,) + a.shape[1:], a.dtype)])
                          for a in arrays]
        output = self._executor_for(arrays).run(self._parameters, arrays, self.generator)
        if rows is not None and output.shape[:1] != (rows,):
            output = output[:rows]
        return np.array(output, copy=True)

    def _executor_for(self, arrays: Sequence[np.ndarray]) -> execute.Executor:
        # ``dtype.char`` names the type as ``dtype.name`` does, at a fraction of its cost
        key = (tuple((a.shape, a.dtype.char) for a in arrays), bool(self.training))
        with self._plans_lock:
            executor = self._plans.get(key)
            if executor is None:
                tape = Tape()
                built = self.build(tape)
                inputs = [tape.input(np.zeros(a.shape, a.dtype)) for a in arrays]
                output = self.express(built, inputs)
                if not isinstance(output, Expr):
                    raise TensorCodeError(f"{type(self).__name__}.express must return an Expr, "
                                          f"got {type(output).__name__}")
                executor = execute.Executor(tape.into_network(), inputs, [output],
                                             backend=self.backend)
                self._plans[key] = executor
        return executor

    def plan_count(self) -> int:
        """How many plans this operation has lowered (one per input types)."""
        return len(self._plans)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({canonical_json(self.configuration())})"


def check_last_axis(name: str, array: np.ndarray, size: int) -> None:
    """Raise ``ShapeError`` unless ``array``'s last axis has ``size`` entries."""
    if array.ndim == 0 or array.shape[-1] != size:
        raise ShapeError(f"{name}: input last axis must be {size}, got shape "
                         f"{list(array.shape)}")


def as_float_array(name: str, value: Any, dtype: str = "float32") -> np.ndarray:
    """A call argument as a float array of ``dtype`` (a DTypeError-free conversion for
    numbers; strings and objects raise a clear error)."""
    if isinstance(value, Expr):
        raise TypeError(f"{name}: operations take arrays, not recorded Exprs; an Expr is "
                        "expressed with op.express(...) on its tape")
    array = np.asarray(value)
    if array.dtype.kind not in "fiub":
        raise TypeError(f"{name}: expected numbers, got {array.dtype} values")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: input holds NaN or infinity")
    return np.ascontiguousarray(array, dtype=dtype)


__all__ = ["Operation", "REPLAY_CAPABILITIES", "canonical_json", "row_bucket",
           "check_last_axis", "as_float_array"]

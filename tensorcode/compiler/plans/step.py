"""Step plans: the loss, its gradients and the optimizer's update in one compiled call.

``network.entry(adjoints.roots()).lower(optimizer=opt)`` lowers the entry as usual and
adds the optimizer's update rule (``compiler/lower/update.py``) to the generated module, so
``step_plan.step(parameters, opt, feeds, lr)`` runs forward, backward and the update in
one call and returns the loss. ``run_steps`` runs K steps over a stack of minibatches in
one call and returns the K losses.

The contract (``docs/compiler.md``):

- the ``Parameters`` table passed to ``step``/``run_steps``/``bind`` is **donated**: its
  flat buffers are overwritten with the new parameters (the table stays read-only to
  everyone else; every view of it, and every plan bound to it, sees the new values);
- the optimizer's state tables, step counts and ``lr`` are updated in place, exactly as
  ``opt.step`` would update them, so ``opt.state_dict()`` stays PyTorch's layout and
  fused and unfused steps may alternate;
- the gradients are not kept (read them with ``plan.forward`` when needed), and a
  nonfinite loss does not stop the update: check the returned loss;
- a parameter the loss does not reach (its gradient root is the explicit zeros
  ``differentiate`` records) is left alone, value, state and step count, as PyTorch
  leaves a parameter whose ``grad`` is ``None``.

The optimizer must expose ``fused_rule(layout) -> UpdateRule`` (its update recorded as
IR, ``compiler/lower/update.py``; binding it to the
layout), ``state_buffers(keys)`` (its writable flat state buffers), the per-slot
``steps`` and ``present`` arrays, ``revision`` (bumped whenever its state buffers or
hyperparameters are replaced) and ``lr``: the built-in optimizers and every
``tc.optim.RuleOptimizer`` do. Any optimizer of the same configuration (the lowered
one, a ``copy.deepcopy`` of it for a what-if) can be stepped by one step plan.

On a backend that fuses no update (``reference``) the step runs the plan, then the optimizer's own
(unfused) update, and copies the result into the donated buffers: the same contract,
interpreted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import FeedError, TensorCodeError
from ..backends.counters import count
from ..core.dtypes import FLOAT_DTYPES
from ..lower.schedule import build
from ..lower.update import StepSpec, UpdateRule
from .network import Entry
from .plan import STEP_AXIS, Plan
from .tables import Gradients, Parameters, feed_dict


def lower_step(entry: Entry, backend: str, approximate: bool, optimizer: Any) -> StepPlan:
    """``entry.lower(backend, approximate, optimizer=optimizer)`` (see ``Entry.lower``)."""
    network = entry.network
    layout = network.layout
    fused_rule = getattr(optimizer, "fused_rule", None)
    if fused_rule is None:
        raise TensorCodeError(f"{type(optimizer).__name__} offers no fused rule: use "
                              "tc.optim.Sgd, Adam, AdamW or a tc.optim.RuleOptimizer, or "
                              "lower without optimizer= and call opt.step")
    rule = fused_rule(layout)
    if not isinstance(rule, UpdateRule):
        raise TensorCodeError(f"{type(optimizer).__name__}.fused_rule must return an "
                              "UpdateRule")
    graph, sources = entry.optimized()
    schedule = build(graph, sources)
    slots = layout.slots
    roots = schedule.roots
    if len(roots) != 1 + len(slots):
        raise TensorCodeError(
            f"a step plan's entry is a loss and one gradient per parameter, in the table's "
            f"order (adjoints.roots() of tape.differentiate(loss, every parameter)); this "
            f"entry has {len(roots)} roots for {len(slots)} parameters")
    loss_dtype, loss_offset, loss_shape = roots[0]
    if loss_shape != () or loss_dtype not in FLOAT_DTYPES:
        raise TensorCodeError(f"a step plan's first root is the scalar float loss, got "
                              f"{loss_dtype}{list(loss_shape)}")
    for k, (slot, (dtype, _, shape)) in enumerate(zip(slots, roots[1:])):
        if tuple(shape) != slot.shape or dtype != slot.dtype:
            raise TensorCodeError(
                f"root {k + 1} should be the gradient of parameter {slot.label} "
                f"({slot.dtype}{list(slot.shape)}), got {dtype}{list(shape)}; lower "
                "adjoints.roots() of a differentiate over every parameter in recording order")
    placed = layout.step_slots([offset for _, offset, _ in roots[1:]])
    # a parameter the loss does not reach keeps its value, state and step count
    unreached: set[int] = getattr(network.tape, "unreached_gradients", set())
    skipped = frozenset(k for k, root in enumerate(entry.roots[1:]) if root in unreached)
    spec = StepSpec(rule, (loss_dtype, loss_offset), placed, skipped)
    count("plans_lowered")
    return StepPlan(entry, schedule, backend, dict(entry.origins()), approximate, spec,
                    optimizer)


class StepPlan(Plan):
    """A plan whose call also applies an optimizer's update (see the module doc). It is a
    ``Plan``: ``forward``, ``forward_batch`` and ``bind`` read the loss and gradients
    without updating anything."""

    def __init__(self, entry: Entry, schedule: Any, backend: str, origins: dict[int, int],
                 approximate: bool, spec: StepSpec, optimizer: Any) -> None:
        super().__init__(entry, schedule, backend, origins, approximate,
                         step=spec)
        self.spec = spec
        self.rule = spec.rule
        self.optimizer = optimizer
        self._rule_key = spec.rule.key()
        self._last: BoundStep | None = None

    # -- checking ------------------------------------------------------------------------
    def _state(self, state: Any) -> list[np.ndarray]:
        """The writable state buffers of ``state`` (an optimizer of this plan's rule)."""
        fused_rule = getattr(state, "fused_rule", None)
        if fused_rule is None:
            raise TypeError(f"state must be the optimizer this step plan updates, got "
                            f"{type(state).__name__}")
        if fused_rule(self._layout).key() != self._rule_key:
            raise TensorCodeError(
                f"this {type(state).__name__} is configured differently from the optimizer "
                "the step plan was lowered with (its hyperparameters are compiled in); lower "
                "again with optimizer=this one")
        return list(state.state_buffers(self.rule.state_keys, self._param_dtypes))

    def _inputs_from(self, feeds: Mapping[Any, Any] | None) -> list[np.ndarray]:
        if feeds:
            checked = self.network.check_feeds(feeds)
            return [checked.get(i, d) for i, d in zip(self._inputs, self._defaults)]
        return list(self._defaults)

    # -- stepping ------------------------------------------------------------------------
    def step(self, parameters: Parameters, state: Any, feeds: Mapping[Any, Any] | None,
             lr: float) -> float:
        """One training step on ``feeds``: the loss; ``parameters`` and ``state`` are
        updated in place (see the module doc)."""
        bound = self._last
        if bound is None or bound.parameters is not parameters or bound.state is not state:
            bound = self.bind(parameters, state)
            self._last = bound
        return bound(lr, *self._inputs_from(feeds))

    def bind(self, parameters: Parameters, state: Any = None) -> Any:
        """Without ``state``: ``Plan.bind`` (loss and gradients, no update). With the
        optimizer: a ``BoundStep`` ``f(lr, *inputs) -> loss`` with the buffers bound."""
        if state is None:
            return super().bind(parameters)
        self._check_parameters(parameters)
        return BoundStep(self, parameters, state)

    def run_steps(self, parameters: Parameters, state: Any, batches: Mapping[Any, Any],
                  lr: Any) -> np.ndarray:
        """K steps in one call: each array of ``batches`` (input symbol -> array) holds K
        minibatches on its leading axis (all the same K); inputs not in ``batches`` keep
        their default every step. ``lr`` is one learning rate or K of them. Returns the K
        losses; ``parameters`` and ``state`` end as after K calls of ``step``."""
        self._check_parameters(parameters)
        expected = self._input_types
        fed: dict[int, np.ndarray] = {}
        k_steps = None
        for symbol, value in feed_dict(batches).items():
            if not self.network.owns(symbol):
                self.network.check_feeds({symbol: value})  # raises the precise FeedError
            index = symbol.index
            if index not in expected:
                raise FeedError(f"batch for {symbol!r}: it is not an input this step reads")
            shape, dtype = expected[index]
            array = np.asarray(value)
            if array.ndim == 0 or array.shape[1:] != shape:
                raise FeedError(f"batches for {symbol!r}: expected [K, "
                                f"{', '.join(map(str, shape))}], got {list(array.shape)}")
            if array.dtype != dtype:
                raise FeedError(f"batches for {symbol!r}: expected {dtype.name}, got "
                                f"{array.dtype.name}")
            if k_steps is None:
                k_steps = array.shape[0]
            elif array.shape[0] != k_steps:
                raise FeedError(f"batches disagree on K: {k_steps} and {array.shape[0]}")
            fed[index] = np.ascontiguousarray(array)
        lrs = _learning_rates(lr, k_steps)
        if k_steps is None:
            k_steps = lrs.shape[0]
        if lrs.shape[0] != k_steps:
            raise ValueError(f"lr holds {lrs.shape[0]} learning rates for {k_steps} steps")
        bound = BoundStep(self, parameters, state)
        inputs = [fed.get(i, d) for i, d in zip(self._inputs, self._batch_defaults)]
        return bound.run_steps(lrs, *inputs)


def _learning_rates(lr: Any, k: int | None) -> np.ndarray:
    """``lr`` as K float64 learning rates (finite, non-negative)."""
    if (isinstance(lr, np.ndarray) and lr.ndim == 1) or isinstance(lr, (list, tuple)):
        lrs = np.asarray(lr, dtype=np.float64)
    else:
        if k is None:
            raise ValueError("run_steps needs batches with a leading axis of K, or K "
                             "learning rates")
        lrs = np.full(k, _check_lr(lr), dtype=np.float64)
    if lrs.ndim != 1 or not (np.all(np.isfinite(lrs)) and np.all(lrs >= 0)):
        raise ValueError("lr must be finite and non-negative (one number or one per step)")
    return lrs


def _check_lr(lr: Any) -> float:
    if type(lr) is float and 0.0 <= lr < math.inf:
        return lr
    if isinstance(lr, bool) or not isinstance(lr, (int, float, np.integer, np.floating)):
        raise TypeError(f"lr must be a real number, got {lr!r}")
    value = float(lr)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"lr must be finite and non-negative, got {value}")
    return value


class BoundStep:
    """``f(lr, *inputs) -> loss``: one fused step with the parameter table, the optimizer
    and their buffers bound (see ``StepPlan.bind``); ``run_steps(lrs, *inputs)`` runs K
    steps, every input with a leading axis of K (or 1)."""

    __slots__ = ("_args", "_call", "_revision", "_steps", "donated", "parameters", "plan",
                 "state")

    def __init__(self, plan: StepPlan, parameters: Parameters, state: Any) -> None:
        self.plan = plan
        self.parameters = parameters
        self.state = state
        self.donated = parameters.donate()
        self._bind_state()

    def _bind_state(self) -> None:
        plan, state = self.plan, self.state
        buffers = plan._state(state)  # binds the optimizer to the layout
        self._revision = state.revision
        self._steps = state.steps
        params = self.parameters.buffers()
        dtypes = plan._param_dtypes
        head = [params[d] for d in dtypes] + plan._consts
        tail = [self.donated[d] for d in dtypes] + buffers + [state.steps, state.present]
        self._args = (head, tail)
        self._call: Callable[[Sequence[np.ndarray], float], Any] | None = None

    def _current(self) -> tuple[list, list]:
        state = self.state
        if state.revision != self._revision or state.steps is not self._steps:
            self._bind_state()
        return self._args

    def __call__(self, lr: float, *inputs: np.ndarray) -> float:
        if not (type(lr) is float and 0.0 <= lr < math.inf):
            lr = _check_lr(lr)
        head, tail = self._current()
        plan = self.plan
        call = self._call
        if call is None:
            program = plan._program()
            if not program.fuses_updates:
                return self._interpreted(lr, list(inputs))
            call = self._call = program.bind_step(head, tail)
        try:
            loss = call(inputs, lr)
        except plan._refused as error:
            raise plan._failure(error, inputs) from None
        self.state.lr = lr
        return float(loss)

    def run_steps(self, lrs: np.ndarray, *inputs: np.ndarray) -> np.ndarray:
        lrs = np.ascontiguousarray(lrs, dtype=np.float64)
        head, tail = self._current()
        plan = self.plan
        if not plan._program().fuses_updates:
            losses = []
            for c in range(lrs.shape[0]):
                case = [x[c if x.shape[0] != 1 else 0] for x in inputs]
                losses.append(self._interpreted(float(lrs[c]), case))
            return np.array(losses, dtype=plan.spec.loss[0])
        if lrs.shape[0] == 0:
            return np.zeros(0, dtype=plan.spec.loss[0])
        try:
            losses = plan._program().steps()(*head, *inputs, *tail, lrs)
        except plan._refused as error:
            raise plan._failure(error, inputs, lrs.shape[0], STEP_AXIS) from None
        self.state.lr = float(lrs[-1])
        return losses

    def _interpreted(self, lr: float, inputs: list[np.ndarray]) -> float:
        """A backend that fuses no update (the reference one): the plan's call, then the
        optimizer's own update, copied into the donated buffers."""
        plan = self.plan
        outs = plan._outputs(self.parameters, inputs)
        slices = plan._root_slices
        k, a, _, _ = slices[0]
        loss = float(outs[k][a])
        layout = plan._layout
        payloads = []
        for k, a, b, shape in slices[1:]:
            payloads.append(outs[k][a:b].reshape(shape))
        gradients = Gradients.from_payloads(layout, payloads)
        skipped = plan.spec.skipped
        if skipped:
            gradients.mark_reached([k not in skipped for k in range(len(layout.slots))])
        updated = self.state.step(self.parameters, gradients, lr)
        for dtype, buffer in updated.buffers().items():
            self.donated[dtype][:] = buffer
        return loss


__all__ = ["StepPlan", "BoundStep", "lower_step"]

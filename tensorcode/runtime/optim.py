"""Optimizers: caller-owned instruments that turn a table of gradients into new parameters.

An ``Optimizer`` is an open base class: ``step(parameters, gradients, lr)`` returns a new
``Parameters`` table, and whatever state the rule needs lives in more parameter-aligned
tables. The built-ins (``Sgd``, ``Adam``, ``AdamW``) follow PyTorch's single-tensor
update equations in PyTorch's order of operations, so a trajectory recorded with
``torch.optim`` in float64 is reproduced to rounding, and their ``state_dict()`` uses
PyTorch's exact layout, keys and group defaults, so state moves both ways
(``tensorcode.integrations.torch``).

The hyperparameters are explicit at the call site and the learning rate is an argument
of every step: the loop owns it, not the optimizer (a learning rate given to the
constructor, ``AdamW(parameters, lr=1e-3)`` as in ``torch.optim``, is the default a
``Trainer`` uses). The built-ins are ``RuleOptimizer`` s: each update is written once
with ``Expr`` operations and recorded as IR (``compiler/lower/update.py``), which the backend
lowers like any plan: one compiled loop per dtype's flat buffer for ``step``
(``backend="llvm"``, the default, or ``"numba"``), the NumPy reference interpreter for
``backend="reference"`` (tests hold them equal bit for bit), and the same IR inside a
step plan (``entry.lower(optimizer=...)``). A slot whose gradient the loss does not
reach (``Gradients.reached``) is skipped as PyTorch skips a parameter whose ``grad`` is
``None``: its value, state and step count stay as they are.
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..compiler import backends
from ..compiler.backends import DEFAULT_BACKEND, check_backend
from ..compiler.core.dtypes import FLOAT_DTYPES
from ..compiler.lower.update import UpdateRule
from ..compiler.plans.tables import Gradients, Layout, Parameters, Table
from ..compiler.plans.tape import Tape
from ..compiler.trace.composites import maximum, where
from ..compiler.trace.expr import Expr
from ..errors import DTypeError, TensorCodeError
from .optim_state import check_state_dict, state_entries, torch_flags

#: dtypes the built-in update loops support


class StateTable(Table):
    """A parameter-aligned table of optimizer state (moments, momentum buffers)."""

    __slots__ = ()


class Optimizer:
    """The open base of every optimizer.

    A subclass implements ``update(parameters, gradients, lr) -> Parameters`` and, when it
    carries state, keeps it with ``set_state(key, table)`` / ``state_table(key)`` and the
    per-slot step counts ``self.steps``. ``step`` validates the call, binds the optimizer
    to the parameters' layout on first use and then calls ``update``. The base class
    gives every subclass PyTorch-layout ``state_dict`` / ``load_state_dict`` (all-or-
    nothing) and so a place in checkpoints, from three declarations:

    - ``kind``: the name written to checkpoints (default: the class name);
    - ``state_keys``: PyTorch's per-parameter state keys, in order; ``"step"`` is the
      per-slot step count, every other key a parameter-shaped table;
    - ``group()``: the hyperparameters as PyTorch's param-group fields (without
      ``lr`` and ``params``), and ``_load_group(group)`` to validate and adopt them.
    """

    kind: ClassVar[str] = ""
    state_keys: ClassVar[tuple[str, ...]] = ()
    #: PyTorch's default learning rate, reported as ``lr`` before the first step
    default_lr: ClassVar[float] = 1e-3
    #: True when a NaN or infinite gradient always leaves some updated parameter NaN or
    #: infinite, and a NaN or infinite parameter stays so through every later update: a
    #: caller may then take K fused updates and check the parameters once after them
    #: (the Trainer does). PyTorch's SGD and Adam equations do. False by default: a rule
    #: that clips or masks its gradient can turn a NaN into a number.
    reveals_nonfinite: ClassVar[bool] = False

    def __init__(self) -> None:
        self._layout: Layout | None = None
        self._tables: dict[str, StateTable] = {}
        self._writable: dict[str, dict[str, np.ndarray]] = {}
        #: per-slot step counts (float64, exact integers)
        self.steps: np.ndarray = np.zeros(0)
        #: per-slot flag: has this slot got state yet (PyTorch creates it lazily)
        self.present: np.ndarray = np.zeros(0, dtype=np.uint8)
        #: the learning rate of the most recent step (``lr`` in the state dict)
        self.lr: float = self.default_lr
        #: the learning rate given to the constructor (``AdamW(parameters, lr=...)``), the
        #: default of a ``Trainer`` built with this optimizer; None when none was given
        self.constructed_lr: float | None = None
        self._spare: dict[str, list[np.ndarray]] = {}
        #: bumped whenever the state buffers or the hyperparameters are replaced, so a
        #: bound step plan (``compiler/plans/step.py``) knows to look them up again
        self.revision = 0

    def __deepcopy__(self, memo: dict) -> Optimizer:
        """An independent copy of the state that shares the (immutable) layout instead of
        copying it and the tape behind it; recycled buffers are not carried over."""
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            if key == "_layout":
                clone._layout = value
            elif key == "_spare":
                clone._spare = {}
            elif key in ("_tables", "_writable") or key.startswith("_memo"):
                continue
            else:
                setattr(clone, key, copy.deepcopy(value, memo))
        clone._tables, clone._writable = {}, {}
        for key, buffers in self._writable.items():
            clone._init_table(key, {d: b.copy() for d, b in buffers.items()})
        return clone

    def own(self, params: Any = None, lr: float | None = None) -> None:
        """What ``Sgd(parameters, lr=...)`` does with its first two arguments, as
        ``torch.optim`` takes them: bind to the parameters now (a ``Parameters`` table or
        its ``Layout``: the optimizer then owns exactly those slots, and a step with any
        other table is refused, naming the parameters missing or extra), and keep ``lr``
        as the default learning rate (``constructed_lr``, reported as ``lr`` before the
        first step). Both may be left out: the bare optimizer binds on its first step.
        The learning rate is still an argument of every ``step``."""
        if lr is not None:
            self.constructed_lr = self.lr = _check_lr(lr)
        if params is None:
            return
        if isinstance(params, Table):
            layout = params.layout
        elif isinstance(params, Layout):
            layout = params
        else:
            raise TypeError(f"{type(self).__name__}(params, ...) takes the parameter table it "
                            f"updates (network.parameters(), or the trainer's parameters), got "
                            f"{type(params).__name__}; or build it without parameters")
        self.bind(layout)

    # -- the contract ------------------------------------------------------------------
    @classmethod
    def type_name(cls) -> str:
        """The name written to checkpoints: ``kind``, else the class's qualified name."""
        return cls.kind or cls.__qualname__

    def group(self) -> dict[str, Any]:
        """PyTorch's param-group fields other than ``lr`` and ``params``."""
        return {}

    def _load_group(self, group: Mapping[str, Any]) -> Callable[[], None]:
        """Validate ``group`` (already checked to have exactly ``group()``'s keys plus
        ``lr`` and ``params``) and return a function that adopts it."""
        for key, value in self.group().items():
            if group[key] != value:
                raise TensorCodeError(f"param_groups[0].{key}: expected {value!r}, got "
                                      f"{group[key]!r}")
        return lambda: None

    def active_state_keys(self) -> tuple[str, ...]:
        """The state keys this configuration keeps (Adam's ``max_exp_avg_sq`` only with
        ``amsgrad``); computed from ``group``-like data by ``_keys_for``."""
        return self._keys_for(self.group())

    def _keys_for(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return self.state_keys

    def update(self, parameters: Parameters, gradients: Gradients, lr: float) -> Parameters:
        """The new parameters after one step (the subclass's rule); ``step`` has
        validated the call and bound the layout. Must return a fresh ``Parameters`` table
        of the same layout."""
        raise NotImplementedError(f"{type(self).__name__} must implement update(parameters, "
                                  "gradients, lr)")

    # -- stepping ----------------------------------------------------------------------
    def step(self, parameters: Parameters, gradients: Gradients, lr: float) -> Parameters:
        """The next parameters after one update with learning rate ``lr``."""
        if not isinstance(parameters, Parameters):
            raise TypeError(f"step takes a Parameters table, got {type(parameters).__name__}")
        if not isinstance(gradients, Gradients):
            raise TypeError(f"step takes a Gradients table, got {type(gradients).__name__}")
        parameters.check_pair(gradients)
        lr = _check_lr(lr)
        self.bind(parameters.layout)
        result = self.update(parameters, gradients, lr)
        if not isinstance(result, Parameters) or result.layout is not parameters.layout:
            raise TensorCodeError(f"{type(self).__name__}.update must return a Parameters "
                                  "table of the same layout")
        self.lr = lr
        return result

    def snapshot(self) -> Callable[[], None]:
        """A function that puts the optimizer back as it is now (state buffers, step
        counts, learning rate), for a caller that may refuse the step it is about to
        take (the trainer refuses one whose update is nonfinite). Costs one copy of the
        state."""
        lr, layout = self.lr, self._layout
        if layout is None:
            def unbind() -> None:
                self.lr, self._layout = lr, None
            return unbind
        steps, present = self.steps.copy(), self.present.copy()
        saved = {key: {d: b.copy() for d, b in buffers.items()}
                 for key, buffers in self._writable.items()}

        def restore() -> None:
            self.lr, self._layout = lr, layout
            self.steps[...] = steps
            self.present[...] = present
            for key, buffers in saved.items():
                for d, b in buffers.items():
                    self._writable[key][d][...] = b
        return restore

    def bind(self, layout: Layout) -> None:
        """Attach to ``layout`` (first use) or check that ``layout`` matches the one the
        state was built for (same shapes and dtypes, slot for slot)."""
        if self._layout is layout:
            return
        if self._layout is None:
            self._layout = layout
            self.steps = np.zeros(len(layout), dtype=np.float64)
            self.present = np.zeros(len(layout), dtype=np.uint8)
            self._tables, self._writable = {}, {}
            for key in self.active_state_keys():
                if key != "step":
                    self._init_table(key)
            return
        if _signature(self._layout) != _signature(layout):
            raise TensorCodeError(
                f"this {type(self).__name__} holds state for parameters "
                f"{_describe(self._layout)} but was stepped with {_describe(layout)}"
                f"{_difference(self._layout, layout)}; use one optimizer per parameter table")
        self._rebind(layout)

    def _rebind(self, layout: Layout) -> None:
        self._layout = layout
        for key in self._tables:
            self._tables[key] = StateTable.from_buffers(
                layout, {d: b.view() for d, b in self._writable[key].items()})

    @property
    def layout(self) -> Layout | None:
        """The parameter layout the state is bound to (None before the first step)."""
        return self._layout

    def _output_buffer(self, dtype: str, size: int) -> np.ndarray:
        """A flat buffer for the next parameters: a fresh one, or the buffer of a table
        this optimizer returned earlier that nothing references any more (no table, view
        or memoryview: its reference count says so), so a training loop alternates
        between two buffers instead of faulting in new pages every step. A table the
        caller still holds is never touched; the optimizer keeps at most two such
        buffers alive."""
        spare = self._spare.setdefault(dtype, [])
        if _CAN_RECYCLE:
            for array in spare:
                # references: the list, getrefcount's argument, the loop variable
                if array.shape == (size,) and sys.getrefcount(array) == 3:
                    array.flags.writeable = True
                    return array
        array = np.empty(size, dtype=dtype)
        if _CAN_RECYCLE:
            spare.append(array)
            if len(spare) > 2:
                spare.pop(0)
        return array

    # -- state tables ------------------------------------------------------------------
    def _init_table(self, key: str, buffers: Mapping[str, np.ndarray] | None = None) -> None:
        self.revision += 1
        layout = self._layout
        assert layout is not None
        writable = {d: (np.zeros(n, dtype=d) if buffers is None else buffers[d])
                    for d, n in layout.sizes.items()}
        self._writable[key] = writable
        self._tables[key] = StateTable.from_buffers(layout, {d: b.view() for d, b in
                                                              writable.items()})

    def set_state(self, key: str, value: Table | Sequence[Any]) -> None:
        """Replace state ``key`` with a copy of ``value``: a table of the bound layout, or
        one payload per slot in recording order (exact shapes; same-kind dtype casts)."""
        if self._layout is None:
            raise TensorCodeError("set_state needs a bound optimizer (step once, or "
                                  "bind(parameters.layout))")
        if isinstance(value, Table):
            if value.layout is not self._layout:
                raise TensorCodeError(f"set_state({key!r}): the table belongs to another "
                                      "layout than this optimizer's parameters")
            buffers = {d: b.copy() for d, b in value.buffers().items()}
        else:
            table = StateTable.from_payloads(self._layout, list(value))
            buffers = {d: np.array(b, copy=True) for d, b in table.buffers().items()}
        self._init_table(key, buffers)

    def state_table(self, key: str) -> StateTable:
        """A snapshot (independent copy) of state ``key``."""
        if key not in self._tables:
            raise KeyError(f"{type(self).__name__} has no state table {key!r}; it keeps "
                           f"{sorted(self._tables)}")
        return self._tables[key].clone()

    def _buffer(self, key: str, dtype: str) -> np.ndarray:
        """The writable flat buffer of state ``key`` for ``dtype`` (update in place)."""
        return self._writable[key][dtype]

    # -- fused steps -------------------------------------------------------------------
    def fused_rule(self, layout: Layout) -> UpdateRule:
        """The update as a rule a step plan compiles beside the loss and gradients
        (``entry.lower(optimizer=...)``); binds the optimizer to ``layout``. The built-ins
        and ``RuleOptimizer`` have one; an optimizer with only ``update`` has none."""
        raise TensorCodeError(f"{type(self).__name__} offers no fused rule: call "
                              "opt.step(parameters, gradients, lr) after the plan, or write "
                              "the rule with Expr operations (tc.optim.RuleOptimizer)")

    def state_buffers(self, keys: Sequence[str], dtypes: Sequence[str]) -> list[np.ndarray]:
        """The writable flat state buffers a step plan updates in place: for each key in
        ``keys``, one per dtype of ``dtypes``."""
        return [self._writable[key][d] for key in keys for d in dtypes]

    def _bind_floats(self, layout: Layout) -> None:
        self.bind(layout)
        for dtype in layout.sizes:
            _check_float(dtype)

    # -- PyTorch state dicts -----------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {key: array}}, "param_groups": [{..., "params": [...]}]}``
        exactly as ``torch.optim`` lays it out; arrays are NumPy copies, ``step`` a 0-d
        float32 array like PyTorch's default step tensor."""
        keys = self.active_state_keys()
        payloads = ({key: self._tables[key].payloads() for key in keys if key != "step"}
                    if self.present.any() else {})  # no table exists before any state
        state = state_entries(self._layout, keys, self.present, self.steps, payloads)
        n = 0 if self._layout is None else len(self._layout)
        group = {"lr": self.lr, **self.group(), "params": list(range(n))}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        parameters: Parameters | Layout | None = None) -> None:
        """Adopt a PyTorch-layout state dict (validated in full first: group fields,
        indices, keys, shapes, dtypes; on any mismatch it raises ``TensorCodeError`` and
        the optimizer is unchanged). An optimizer that has not stepped yet needs the
        ``parameters`` (or their layout) the state belongs to."""
        self.prepare_load(state_dict, parameters)()

    def prepare_load(self, state_dict: Mapping[str, Any],
                     parameters: Parameters | Layout | None = None) -> Callable[[], None]:
        """Validate ``state_dict`` as ``load_state_dict`` does and return the function
        that commits it, so a caller restoring several things (a checkpoint) can check
        them all before changing any."""
        layout = parameters.layout if isinstance(parameters, Table) else parameters
        if layout is None:
            layout = self._layout
        if layout is None:
            raise TensorCodeError("this optimizer has no parameters yet: pass the parameters "
                                  "the state belongs to, load_state_dict(state, parameters)")
        if self._layout is not None and layout is not self._layout and \
                _signature(self._layout) != _signature(layout):
            raise TensorCodeError(f"this optimizer holds state for {_describe(self._layout)}, "
                                  f"not {_describe(layout)}")
        checked, adopt = check_state_dict(state_dict, layout, type(self).__name__,
                                          set(self.group()), _check_lr, self._load_group,
                                          self._keys_for)

        def commit() -> None:
            adopt()
            self.revision += 1
            self._layout = checked.layout
            self.steps, self.present = checked.steps, checked.present
            self._tables, self._writable = {}, {}
            for key, buffer in checked.buffers.items():
                self._init_table(key, buffer)
            self.lr = checked.lr
        return commit


# -- optimizers written as IR -----------------------------------------------------------
@dataclass(frozen=True)
class SlotScalars:
    """The scalars a rule may read besides the learning rate in the parameters' dtype,
    each a float64 ``Expr``: ``lr`` (the learning rate as the caller gave it),
    ``step`` (the slot's step count after this update: 1 on its first) and ``first``
    (1 when the slot has no state yet, as PyTorch's "no momentum buffer yet", else 0).
    Values computed from them alone are computed once per slot, not per element."""

    lr: Any
    step: Any
    first: Any


class RuleOptimizer(Optimizer):
    """An optimizer whose update is written with ``Expr`` operations, element by element.

    A subclass declares ``state_keys`` (its per-parameter state tables; every slot gets
    state at the first step) and implements ``rule(parameter, gradient, state, lr)``,
    returning ``(new_parameter, {key: new_state})``, or ``slot_rule(parameter, gradient,
    state, lr, slot)`` to also read the per-slot scalars of ``SlotScalars`` (the
    built-ins do: Adam's bias corrections, SGD's first momentum buffer). Each argument
    is an ``Expr``: the rule is recorded once per parameter dtype as IR
    (``compiler/lower/update.py``) and lowered like any plan: compiled for ``step``
    (``backend="llvm"``, the default, or ``"numba"``; one compiled call per dtype, cached
    on disk) or
    interpreted by the NumPy reference (``backend="reference"``), and compiled into a
    step plan by ``entry.lower(optimizer=...)``. ``lr`` arrives in the parameters' dtype
    and Python numbers in the rule take that dtype too, so float32 stays float32. Only
    elementwise operations are allowed (``+ - * /``, ``sqrt``, ``abs``, ``maximum``,
    ``where``, ``astype``, ...): the compiled and the reference paths agree bit for bit
    on the correctly rounded ones; ``exp``, ``log``, ``tanh`` and other library
    functions may differ by the libraries' last-place rounding (NumPy's versus LLVM's).

    The recorded rule is reused while ``group()`` and the state keys stay the same (and
    until ``load_state_dict``): a hyperparameter the rule reads from ``self`` belongs in
    ``group()``, and a step plan compiles it in (lower again after changing it)."""

    backend = DEFAULT_BACKEND

    def rule(self, parameter: Any, gradient: Any, state: dict[str, Any], lr: Any
             ) -> tuple[Any, dict[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must implement rule(parameter, "
                                  "gradient, state, lr)")

    def slot_rule(self, parameter: Any, gradient: Any, state: dict[str, Any], lr: Any,
                  slot: SlotScalars) -> tuple[Any, dict[str, Any]]:
        """``rule`` with the per-slot scalars; by default ``rule`` itself."""
        return self.rule(parameter, gradient, state, lr)

    def _apply(self, parameter: Any, gradient: Any, state: dict[str, Any], lr: Any,
               slot: SlotScalars) -> tuple[Any, list[Any]]:
        result = self.slot_rule(parameter, gradient, dict(state), lr, slot)
        if not isinstance(result, tuple) or len(result) != 2 or \
                not isinstance(result[1], Mapping):
            raise TensorCodeError(f"{type(self).__name__}.rule must return (new_parameter, "
                                  "{key: new_state})")
        new, states = result
        keys = [k for k in self.active_state_keys() if k != "step"]
        if sorted(states) != sorted(keys):
            raise TensorCodeError(f"{type(self).__name__}.rule returned state "
                                  f"{sorted(states)}, expected {sorted(keys)}")
        for value in [new, *states.values()]:
            if not isinstance(value, Expr):
                raise TensorCodeError(f"{type(self).__name__}.rule must return Expr values "
                                      f"(computed from its arguments), got {value!r:.60}")
        return new, [states[k] for k in keys]

    def recorded_rule(self, dtypes: Sequence[str]) -> UpdateRule:
        """The update recorded as IR for each of ``dtypes`` (reused while the
        configuration stays the same; see the class doc)."""
        keys = tuple(k for k in self.active_state_keys() if k != "step")
        memo_key = (tuple(sorted(dtypes)), keys, self.revision, repr(self.group()))
        memo = self.__dict__.get("_memo_rule")
        if memo is not None and memo[0] == memo_key:
            return memo[1]
        # a built-in's rule reads nothing but group(): one recording serves every
        # instance of its configuration (a fresh optimizer per what-if, per thread)
        shared_key = (type(self), memo_key[0], keys, memo_key[3])
        shared = _SHARED_RULES.get(shared_key) if type(self) in _SHARES_RULES else None
        if shared is not None:
            self._memo_rule = (memo_key, shared)
            return shared
        graphs = {}
        for dtype in sorted(dtypes):
            _check_float(dtype)
            tape = Tape()
            zero, zero64 = np.zeros((), dtype=dtype), np.zeros((), dtype=np.float64)
            p, g = tape.input(zero, name="parameter"), tape.input(zero, name="gradient")
            state = {k: tape.input(zero, name=k) for k in keys}
            lr = tape.input(zero, name="lr")
            slot = SlotScalars(tape.input(zero64, name="lr64"), tape.input(zero64, name="step"),
                               tape.input(zero64, name="first"))
            new, news = self._apply(p, g, state, lr, slot)
            for value in [new, *news]:
                if value.builder is not tape:
                    raise TensorCodeError(f"{type(self).__name__}.rule returned an Expr of "
                                          "another tape")
                if value.type.shape != ():
                    raise TensorCodeError(f"{type(self).__name__}.rule must compute one "
                                          "element from one element (no reductions or "
                                          f"broadcasts), got shape {list(value.type.shape)}")
            inputs = [p, g, *[state[k] for k in keys], lr, slot.lr, slot.step, slot.first]
            graphs[dtype] = (tape.nodes(), [x.index for x in inputs],
                             [new.index, *[v.index for v in news]])
        rule = UpdateRule(type(self).type_name(), graphs, keys,
                          keeps_state=bool(self.active_state_keys()))
        self._memo_rule = (memo_key, rule)
        if type(self) in _SHARES_RULES:
            _SHARED_RULES[shared_key] = rule
        return rule

    def update(self, parameters: Parameters, gradients: Gradients, lr: float) -> Parameters:
        layout = parameters.layout
        params, grads = parameters.buffers(), gradients.buffers()
        steps, present = self.steps, self.present
        out = {}
        for dtype, function, states, slots, starts, sizes, skipped in self._eager(
                layout, gradients.reached):
            source = params[dtype]
            result = self._output_buffer(dtype, source.shape[0])
            function(source, grads[dtype], result, *states, slots, starts, sizes, starts,
                     steps, present, lr)
            for start, stop in skipped:  # a slot the loss did not reach keeps its value
                result[start:stop] = source[start:stop]
            out[dtype] = result
        return Parameters.from_buffers(layout, out)

    def _eager(self, layout: Layout, reached: tuple[bool, ...] | None) -> list[tuple]:
        """Per dtype: the backend's update function for the recorded rule, the state
        buffers and the slot tables; kept while the layout, the reached slots, the
        configuration (``group()``) and the state buffers (``revision``) stay the same,
        so a step costs one compiled call per dtype."""
        group = self.group()
        memo = self.__dict__.get("_memo_eager")
        if memo is not None and memo[0] is layout and memo[1] == reached and \
                memo[2] == self.revision and memo[3] == group:
            return memo[4]
        rule = self.recorded_rule(tuple(layout.sizes))
        compute = _backend_for(self.backend)
        plan = []
        for dtype in layout.sizes:
            states = [self._buffer(k, dtype) for k in rule.state_keys]
            plan.append((dtype, compute.update(rule, dtype), states,
                         *layout.update_table(dtype, reached)))
        self._memo_eager = (layout, reached, self.revision, group, plan)
        return plan

    def fused_rule(self, layout: Layout) -> UpdateRule:
        self._bind_floats(layout)
        return self.recorded_rule(tuple(layout.sizes))


# -- the built-ins ----------------------------------------------------------------------
class Sgd(RuleOptimizer):
    """Stochastic gradient descent, PyTorch's ``torch.optim.SGD`` equations:
    weight decay, then momentum (first buffer = the gradient), nesterov, then
    ``p - lr * d``. ``Sgd(parameters, lr=...)`` as in ``torch.optim`` or ``Sgd()``:
    see ``Optimizer.own``."""

    kind = "Sgd"
    state_keys = ("momentum_buffer",)
    default_lr = 1e-3
    # d = g + wd * p and the momentum buffer carry a nonfinite g into p - lr * d (lr > 0)
    reveals_nonfinite = True

    def __init__(self, params: Any = None, lr: float | None = None, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, backend: str = DEFAULT_BACKEND) -> None:
        super().__init__()
        self.momentum = _nonnegative("momentum", momentum)
        self.dampening = _real("dampening", dampening)
        self.weight_decay = _nonnegative("weight_decay", weight_decay)
        self.nesterov = _flag("nesterov", nesterov)
        self.maximize = _flag("maximize", maximize)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        self.backend = _backend(backend)
        self._torch_flags = {"foreach": None, "differentiable": False, "fused": None}
        self.own(params, lr)

    def group(self) -> dict[str, Any]:
        return {"momentum": self.momentum, "dampening": self.dampening,
                "weight_decay": self.weight_decay, "nesterov": self.nesterov,
                "maximize": self.maximize, **self._torch_flags}

    def _keys_for(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def _load_group(self, group: Mapping[str, Any]) -> Callable[[], None]:
        field = "param_groups[0]."
        momentum = _nonnegative(field + "momentum", group["momentum"], TensorCodeError)
        dampening = _real(field + "dampening", group["dampening"], TensorCodeError)
        weight_decay = _nonnegative(field + "weight_decay", group["weight_decay"],
                                    TensorCodeError)
        nesterov = _flag(field + "nesterov", group["nesterov"], TensorCodeError)
        maximize = _flag(field + "maximize", group["maximize"], TensorCodeError)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise TensorCodeError(f"{field}nesterov needs a momentum and zero dampening")
        flags = torch_flags(group, self._torch_flags)

        def adopt() -> None:
            self.momentum, self.dampening, self.weight_decay = momentum, dampening, weight_decay
            self.nesterov, self.maximize, self._torch_flags = nesterov, maximize, flags
        return adopt

    def slot_rule(self, parameter: Any, gradient: Any, state: dict[str, Any], lr: Any,
                  slot: SlotScalars) -> tuple[Any, dict[str, Any]]:
        # torch.optim.SGD's single-tensor update, in its order of operations; Python
        # numbers become constants of the parameters' dtype, as PyTorch's scalars do
        d = -gradient if self.maximize else gradient
        if self.weight_decay != 0:
            d = d + self.weight_decay * parameter
        states = {}
        if self.momentum != 0:
            # the first buffer is the (decayed) gradient itself, without dampening
            buffer = where(slot.first, d, state["momentum_buffer"] * self.momentum
                           + (1 - self.dampening) * d)
            states["momentum_buffer"] = buffer
            d = d + self.momentum * buffer if self.nesterov else buffer
        # -lr rounded once to the parameters' dtype, then p + (-lr) * d
        return parameter + (-slot.lr).astype(parameter.dtype) * d, states


class Adam(RuleOptimizer):
    """Adam, PyTorch's ``torch.optim.Adam`` equations (``lerp`` first moment, bias
    corrections from the per-parameter step count, optional amsgrad and L2 weight
    decay added to the gradient). ``Adam(parameters, lr=...)`` as in ``torch.optim``
    or ``Adam()``: see ``Optimizer.own``."""

    kind = "Adam"
    state_keys = ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    default_lr = 1e-3
    # 1 - beta1 > 0 and 1 - beta2 > 0 carry a nonfinite g into m / (sqrt(v) + eps): NaN
    reveals_nonfinite = True
    _decoupled = False

    def __init__(self, params: Any = None, lr: float | None = None,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, maximize: bool = False,
                 backend: str = DEFAULT_BACKEND) -> None:
        super().__init__()
        self.betas = _betas(betas)
        self.eps = _nonnegative("eps", eps)
        self.weight_decay = _nonnegative("weight_decay", weight_decay)
        self.amsgrad = _flag("amsgrad", amsgrad)
        self.maximize = _flag("maximize", maximize)
        self.backend = _backend(backend)
        self._torch_flags = {"foreach": None, "capturable": False, "differentiable": False,
                             "fused": None}
        self.own(params, lr)

    def group(self) -> dict[str, Any]:
        flags = self._torch_flags
        return {"betas": tuple(self.betas), "eps": self.eps, "weight_decay": self.weight_decay,
                "amsgrad": self.amsgrad, "maximize": self.maximize,
                "foreach": flags["foreach"], "capturable": flags["capturable"],
                "differentiable": flags["differentiable"], "fused": flags["fused"],
                "decoupled_weight_decay": self._decoupled}

    def _keys_for(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        keys = ("step", "exp_avg", "exp_avg_sq")
        return keys + ("max_exp_avg_sq",) if group["amsgrad"] else keys

    def _load_group(self, group: Mapping[str, Any]) -> Callable[[], None]:
        field = "param_groups[0]."
        betas = _betas(group["betas"], TensorCodeError, field + "betas")
        eps = _nonnegative(field + "eps", group["eps"], TensorCodeError)
        weight_decay = _nonnegative(field + "weight_decay", group["weight_decay"],
                                    TensorCodeError)
        amsgrad = _flag(field + "amsgrad", group["amsgrad"], TensorCodeError)
        maximize = _flag(field + "maximize", group["maximize"], TensorCodeError)
        if not isinstance(group["decoupled_weight_decay"], bool):
            raise TensorCodeError(f"{field}decoupled_weight_decay must be True or False")
        if group["decoupled_weight_decay"] is not self._decoupled:
            other = "AdamW" if group["decoupled_weight_decay"] else "Adam"
            raise TensorCodeError(f"{field}decoupled_weight_decay is "
                                  f"{group['decoupled_weight_decay']!r}: this state belongs to "
                                  f"{other}; load it into tc.optim.{other}")
        flags = torch_flags(group, self._torch_flags)

        def adopt() -> None:
            self.betas, self.eps, self.weight_decay = betas, eps, weight_decay
            self.amsgrad, self.maximize, self._torch_flags = amsgrad, maximize, flags
        return adopt

    def slot_rule(self, parameter: Any, gradient: Any, state: dict[str, Any], lr: Any,
                  slot: SlotScalars) -> tuple[Any, dict[str, Any]]:
        # torch.optim.Adam's single-tensor update, in its order of operations
        dtype = parameter.dtype
        cast = np.dtype(dtype).type
        beta1, beta2 = self.betas
        d = -gradient if self.maximize else gradient
        p = parameter
        if self.weight_decay != 0:
            if self._decoupled:  # p *= 1 - lr * weight_decay (the factor in Python floats)
                p = p * (1 - slot.lr * self.weight_decay).astype(dtype)
            else:
                d = d + self.weight_decay * p
        # exp_avg.lerp_(d, 1 - beta1): PyTorch's CPU lerp switches formula at weight 1/2
        weight1 = cast(1 - beta1)
        m = state["exp_avg"]
        m = (m + weight1 * (d - m) if abs(weight1) < 0.5
             else d - (d - m) * (cast(1) - weight1))
        v = state["exp_avg_sq"] * beta2 + (1 - beta2) * d * d
        states = {"exp_avg": m, "exp_avg_sq": v}
        if self.amsgrad:  # torch.maximum propagates NaN, as np.maximum does
            v = maximum(state["max_exp_avg_sq"], v)
            states["max_exp_avg_sq"] = v
        # the bias corrections in Python floats per parameter, then in the dtype
        step_size = (-(slot.lr / (1 - beta1 ** slot.step))).astype(dtype)
        bias_correction2_sqrt = (1 - beta2 ** slot.step).sqrt().astype(dtype)
        denom = v.sqrt() / bias_correction2_sqrt + self.eps
        return p + step_size * m / denom, states


class AdamW(Adam):
    """AdamW: Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the
    moment update), PyTorch's ``torch.optim.AdamW``."""

    kind = "AdamW"
    _decoupled = True

    def __init__(self, params: Any = None, lr: float | None = None,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, amsgrad: bool = False, *, maximize: bool = False,
                 backend: str = DEFAULT_BACKEND) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         backend=backend)


# -- helpers ----------------------------------------------------------------------------
#: buffer recycling relies on CPython's reference counts
_CAN_RECYCLE = sys.implementation.name == "cpython"

#: the optimizers whose recorded rule is a function of their type and ``group()`` alone
#: (a subclass may read more from ``self``, so it records its own per instance)
_SHARES_RULES = frozenset({Sgd, Adam, AdamW})
#: recorded rules of those, per (type, dtypes, state keys, ``repr(group())``)
_SHARED_RULES: dict[tuple, UpdateRule] = {}


def _backend_for(name: str) -> Any:
    """The backend that runs an eager update (every backend brings ``update``)."""
    return backends.get(name)


def _signature(layout: Layout) -> tuple:
    return tuple((s.shape, s.dtype) for s in layout.slots)


def _describe(layout: Layout) -> str:
    parts = [f"{s.dtype}{list(s.shape)}" for s in layout.slots[:6]]
    more = f", ... ({len(layout)} in all)" if len(layout) > 6 else ""
    return "[" + ", ".join(parts) + more + "]"


def _difference(own: Layout, other: Layout) -> str:
    """Which parameters ``other`` lacks or adds against ``own``, by name (or which one
    changed its shape or dtype), for the refusal of a step with another table."""
    def named(layout: Layout) -> dict[str, tuple]:
        return {(s.name if s.name is not None else s.label): (s.shape, s.dtype)
                for s in layout.slots}

    mine, theirs = named(own), named(other)

    def listed(names: list[str]) -> str:
        return ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")

    missing = [n for n in mine if n not in theirs]
    extra = [n for n in theirs if n not in mine]
    parts = []
    if missing:
        parts.append(f"missing {listed(missing)}, which it owns")
    if extra:
        parts.append(f"extra {listed(extra)}, which it does not own")
    changed = [f"{n} ({mine[n][1]}{list(mine[n][0])} -> {theirs[n][1]}{list(theirs[n][0])})"
               for n in mine if n in theirs and mine[n] != theirs[n]]
    if changed:
        parts.append(f"changed {', '.join(changed[:4])}")
    return f" (that table has {'; '.join(parts)})" if parts else ""


def _check_float(dtype: str) -> None:
    if dtype not in FLOAT_DTYPES:
        raise DTypeError(f"the built-in optimizers update float32 and float64 parameters, not "
                         f"{dtype}; keep integer state out of the trained table")


def _check_lr(lr: Any, field: str = "lr") -> float:
    if type(lr) is float and 0.0 <= lr < math.inf:  # the common case, checked cheaply
        return lr
    if isinstance(lr, bool) or not isinstance(lr, (int, float, np.integer, np.floating)):
        raise TypeError(f"{field} must be a real number, got {lr!r}")
    lr = float(lr)
    if not (math.isfinite(lr) and lr >= 0):
        raise ValueError(f"{field} must be finite and non-negative, got {lr}")
    return lr


def _real(name: str, value: Any, error: type = ValueError) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)):
        raise error(f"{name} must be a finite real number, got {value!r}")
    return value if isinstance(value, (int, float)) else float(value)


def _nonnegative(name: str, value: Any, error: type = ValueError) -> float:
    value = _real(name, value, error)
    if value < 0:
        raise error(f"{name} must be non-negative, got {value}")
    return value


def _flag(name: str, value: Any, error: type = ValueError) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _betas(betas: Any, error: type = ValueError, name: str = "betas") -> tuple[float, float]:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise error(f"{name} must be a pair (beta1, beta2), got {betas!r}")
    pair = tuple(float(_real(f"{name}[{i}]", b, error)) for i, b in enumerate(betas))
    for i, b in enumerate(pair):
        if not 0.0 <= b < 1.0:
            raise error(f"{name}[{i}] must be in [0, 1), got {b}")
    return pair[0], pair[1]


def _backend(backend: str) -> str:
    return check_backend(backend)


__all__ = ["Optimizer", "StateTable", "Sgd", "Adam", "AdamW", "RuleOptimizer", "FLOAT_DTYPES"]

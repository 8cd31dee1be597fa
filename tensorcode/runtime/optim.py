"""Optimizers: caller-owned instruments that turn a table of gradients into new parameters.

An ``Optimizer`` is an open base class: ``step(parameters, gradients, lr)`` returns a new
``Parameters`` table, and whatever state the rule needs lives in more parameter-aligned
tables. The built-ins (``Sgd``, ``Adam``, ``AdamW``) follow PyTorch's single-tensor
update equations in PyTorch's order of operations, so a trajectory recorded with
``torch.optim`` in float64 is reproduced to rounding, and their ``state_dict()`` uses
PyTorch's exact layout, keys and group defaults, so state moves both ways
(``tensorcode.integrations.torch``).

The hyperparameters are explicit at the call site and the learning rate is an argument
of every step: the loop owns it, not the optimizer. The built-ins update each dtype's
flat buffer in one compiled loop (``backend="numba"``, the default) and keep a NumPy
path (``backend="reference"``) that computes the same operations; tests hold the two
equal bit for bit.
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..compiler.backends import check_backend
from ..compiler.lower.update import AdamRule, ExprRule, SgdRule, UpdateRule
from ..compiler.plans.tables import Gradients, Layout, Parameters, Table
from ..compiler.trace.tape import Eager, Expr, Tape
from ..errors import DTypeError, TensorCodeError
from . import optim_reference
from .optim_state import check_state_dict, state_entries, torch_flags

#: dtypes the built-in update loops support
FLOAT_DTYPES = ("float32", "float64")


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
            elif key in ("_tables", "_writable"):
                continue
            else:
                setattr(clone, key, copy.deepcopy(value, memo))
        clone._tables, clone._writable = {}, {}
        for key, buffers in self._writable.items():
            clone._init_table(key, {d: b.copy() for d, b in buffers.items()})
        return clone

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
                f"{_describe(self._layout)} but was stepped with {_describe(layout)}; use one "
                "optimizer per parameter table")
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


# -- the built-ins ----------------------------------------------------------------------
class Sgd(Optimizer):
    """Stochastic gradient descent, PyTorch's ``torch.optim.SGD`` equations:
    weight decay, then momentum (first buffer = the gradient), nesterov, then
    ``p - lr * d``."""

    kind = "Sgd"
    state_keys = ("momentum_buffer",)
    default_lr = 1e-3
    # d = g + wd * p and the momentum buffer carry a nonfinite g into p - lr * d (lr > 0)
    reveals_nonfinite = True

    def __init__(self, momentum: float = 0, dampening: float = 0, nesterov: bool = False,
                 weight_decay: float = 0, maximize: bool = False, *,
                 backend: str = "numba") -> None:
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

    def update(self, parameters: Parameters, gradients: Gradients, lr: float) -> Parameters:
        layout = parameters.layout
        params, grads = parameters.buffers(), gradients.buffers()
        out = {}
        use_momentum = self.momentum != 0
        for dtype in layout.sizes:
            _check_float(dtype)
        for dtype in layout.sizes:
            cast = layout.numpy_dtypes[dtype].type
            buffer = self._buffer("momentum_buffer", dtype) if use_momentum else \
                _empty(dtype)
            offsets, present = _segments(layout, dtype, self.present)
            result = self._output_buffer(dtype, params[dtype].shape[0])
            args = (params[dtype], grads[dtype], buffer, result, offsets, present,
                    cast(-lr), cast(self.weight_decay), cast(self.momentum),
                    cast(1 - self.dampening), bool(self.nesterov), bool(self.maximize))
            if self.backend == "numba":
                _kernels().sgd_update(*args)
            else:
                optim_reference.sgd_update(*args)
            out[dtype] = result
        if use_momentum:
            self.present[:] = 1
        self.steps += 1
        return Parameters.from_buffers(layout, out)

    def fused_rule(self, layout: Layout) -> UpdateRule:
        self._bind_floats(layout)
        return SgdRule(self.momentum, self.dampening, self.weight_decay, self.nesterov,
                       self.maximize)


class Adam(Optimizer):
    """Adam, PyTorch's ``torch.optim.Adam`` equations (``lerp`` first moment, bias
    corrections from the per-parameter step count, optional amsgrad and L2 weight
    decay added to the gradient)."""

    kind = "Adam"
    state_keys = ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    default_lr = 1e-3
    # 1 - beta1 > 0 and 1 - beta2 > 0 carry a nonfinite g into m / (sqrt(v) + eps): NaN
    reveals_nonfinite = True
    _decoupled = False

    def __init__(self, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, maximize: bool = False,
                 *, backend: str = "numba") -> None:
        super().__init__()
        self.betas = _betas(betas)
        self.eps = _nonnegative("eps", eps)
        self.weight_decay = _nonnegative("weight_decay", weight_decay)
        self.amsgrad = _flag("amsgrad", amsgrad)
        self.maximize = _flag("maximize", maximize)
        self.backend = _backend(backend)
        self._torch_flags = {"foreach": None, "capturable": False, "differentiable": False,
                             "fused": None}

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

    def update(self, parameters: Parameters, gradients: Gradients, lr: float) -> Parameters:
        layout = parameters.layout
        params, grads = parameters.buffers(), gradients.buffers()
        beta1, beta2 = self.betas
        steps = self.steps + 1
        # PyTorch computes these in Python floats from the step count, per parameter.
        bias_correction1 = 1 - beta1 ** steps
        bias_correction2 = 1 - beta2 ** steps
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2 ** 0.5
        weight1 = 1 - beta1
        out = {}
        for dtype in layout.sizes:
            _check_float(dtype)
        for dtype in layout.sizes:
            cast = layout.numpy_dtypes[dtype].type
            offsets, select = layout.segments(dtype)
            result = self._output_buffer(dtype, params[dtype].shape[0])
            max_sq = self._buffer("max_exp_avg_sq", dtype) if self.amsgrad else \
                _empty(dtype)
            args = (params[dtype], grads[dtype], self._buffer("exp_avg", dtype),
                    self._buffer("exp_avg_sq", dtype), max_sq, result, offsets,
                    (-step_size[select]).astype(dtype),
                    bias_correction2_sqrt[select].astype(dtype),
                    cast(1 - lr * self.weight_decay), cast(self.weight_decay), cast(weight1),
                    cast(1) - cast(weight1), cast(beta2), cast(1 - beta2), cast(self.eps),
                    bool(self._decoupled), bool(self.amsgrad), bool(self.maximize))
            if self.backend == "numba":
                _kernels().adam_update(*args)
            else:
                optim_reference.adam_update(*args)
            out[dtype] = result
        self.steps = steps
        self.present[:] = 1
        return Parameters.from_buffers(layout, out)

    def fused_rule(self, layout: Layout) -> UpdateRule:
        self._bind_floats(layout)
        return AdamRule(self.betas, self.eps, self.weight_decay, self.amsgrad, self.maximize,
                        self._decoupled)


class AdamW(Adam):
    """AdamW: Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the
    moment update), PyTorch's ``torch.optim.AdamW``."""

    kind = "AdamW"
    _decoupled = True

    def __init__(self, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, amsgrad: bool = False, maximize: bool = False,
                 *, backend: str = "numba") -> None:
        super().__init__(betas, eps, weight_decay, amsgrad, maximize, backend=backend)


class RuleOptimizer(Optimizer):
    """An optimizer whose update is written with ``Expr`` operations, element by element.

    A subclass declares ``state_keys`` (its per-parameter state tables; every slot gets
    state at the first step) and implements ``rule(parameter, gradient, state, lr)``,
    returning ``(new_parameter, {key: new_state})``. Each argument is an ``Expr``: the
    rule is evaluated eagerly over the flat buffers by ``step`` (the unfused path) and
    recorded on scalar inputs and compiled into the plan by
    ``entry.lower(optimizer=...)`` (the fused path). ``lr`` arrives in the parameters'
    dtype, Python numbers in the rule take that dtype too, so float32 stays float32.
    Only elementwise operations are allowed (``+ - * /``, ``sqrt``, ``abs``,
    ``maximum``, ``where``, ...): the two paths agree bit for bit on the correctly
    rounded ones; ``exp``, ``log``, ``tanh`` and other library functions may differ
    by the libraries' last-place rounding (NumPy's versus LLVM's).

    Hyperparameters the rule reads from ``self`` are compiled into a step plan: lower
    again after changing them."""

    def rule(self, parameter: Any, gradient: Any, state: dict[str, Any], lr: Any
             ) -> tuple[Any, dict[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must implement rule(parameter, "
                                  "gradient, state, lr)")

    def _apply(self, parameter: Any, gradient: Any, state: dict[str, Any], lr: Any
               ) -> tuple[Any, list[Any]]:
        result = self.rule(parameter, gradient, dict(state), lr)
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

    def update(self, parameters: Parameters, gradients: Gradients, lr: float) -> Parameters:
        layout = parameters.layout
        params, grads = parameters.buffers(), gradients.buffers()
        keys = [k for k in self.active_state_keys() if k != "step"]
        for dtype in layout.sizes:
            _check_float(dtype)
        eager = Eager()
        out = {}
        for dtype in layout.sizes:
            cast = layout.numpy_dtypes[dtype].type
            state = {k: eager.wrap(self._buffer(k, dtype).copy()) for k in keys}
            new, news = self._apply(eager.wrap(params[dtype]), eager.wrap(grads[dtype]), state,
                                    eager.wrap(np.asarray(cast(lr))))
            size = params[dtype].shape[0]
            out[dtype] = _flat(new, dtype, size)
            for k, value in zip(keys, news):
                self._buffer(k, dtype)[:] = _flat(value, dtype, size)
        self.steps += 1
        self.present[:] = 1
        return Parameters.from_buffers(layout, out)

    def fused_rule(self, layout: Layout) -> UpdateRule:
        self._bind_floats(layout)
        keys = [k for k in self.active_state_keys() if k != "step"]
        graphs = {}
        for dtype in sorted(layout.sizes):
            tape = Tape()
            zero = np.zeros((), dtype=dtype)
            p, g = tape.input(zero, name="parameter"), tape.input(zero, name="gradient")
            state = {k: tape.input(zero, name=k) for k in keys}
            lr = tape.input(zero, name="lr")
            new, news = self._apply(p, g, state, lr)
            for value in [new, *news]:
                if value.builder is not tape:
                    raise TensorCodeError(f"{type(self).__name__}.rule returned an Expr of "
                                          "another tape")
            graphs[dtype] = (tape.nodes(), [p.index, g.index, *[state[k].index for k in keys],
                                            lr.index], [new.index, *[v.index for v in news]])
        return ExprRule(type(self).type_name(), graphs, keys)


def _flat(value: Any, dtype: str, size: int) -> np.ndarray:
    array = np.asarray(value.value)
    if array.dtype.name != dtype:
        raise DTypeError(f"the rule computed {array.dtype.name} for {dtype} parameters")
    return np.array(np.broadcast_to(array, (size,)), dtype=dtype)


# -- helpers ----------------------------------------------------------------------------
_KERNELS = None
#: buffer recycling relies on CPython's reference counts
_CAN_RECYCLE = sys.implementation.name == "cpython"


def _kernels():
    """The compiled loops, imported on first use (numba stays out of ``import tensorcode``)."""
    global _KERNELS
    if _KERNELS is None:
        from . import optim_kernels
        _KERNELS = optim_kernels
    return _KERNELS


def _segments(layout: Layout, dtype: str, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slot bounds within ``dtype``'s flat buffer and the matching ``present`` flags."""
    offsets, slots = layout.segments(dtype)
    return offsets, present[slots]


def _signature(layout: Layout) -> tuple:
    return tuple((s.shape, s.dtype) for s in layout.slots)


def _describe(layout: Layout) -> str:
    parts = [f"{s.dtype}{list(s.shape)}" for s in layout.slots[:6]]
    more = f", ... ({len(layout)} in all)" if len(layout) > 6 else ""
    return "[" + ", ".join(parts) + more + "]"


def _check_float(dtype: str) -> None:
    if dtype not in FLOAT_DTYPES:
        raise DTypeError(f"the built-in optimizers update float32 and float64 parameters, not "
                         f"{dtype}; keep integer state out of the trained table")


#: zero-length stand-ins for state a configuration does not keep (passed every step)
_EMPTY = {name: np.zeros(0, dtype=name) for name in FLOAT_DTYPES}


def _empty(dtype: str) -> np.ndarray:
    return _EMPTY[dtype]


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

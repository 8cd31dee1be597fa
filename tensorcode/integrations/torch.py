"""PyTorch interop: optimizer state dicts and parameter payloads, both ways.

TensorCode's optimizers already lay out ``state_dict()`` as ``torch.optim`` does, with
NumPy arrays in place of tensors; these functions swap the array type, so a state saved
here loads into ``torch.optim`` and continues the same trajectory, and a ``torch.optim``
state loads into ``tc.optim``. Importing this module imports PyTorch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..compiler.plans.tables import Parameters
from ..errors import TensorCodeError
from ..extras import require
from ..runtime.optim import Adam, AdamW, Optimizer, Sgd

# the extra's error first, then the plain import (typed)
require("torch", "the PyTorch bridge (tensorcode.integrations.torch)")
import torch  # noqa: E402  (typed; present, require just checked)

#: which torch.optim class a built-in optimizer's state belongs to
TORCH_CLASSES = {"Sgd": "SGD", "Adam": "Adam", "AdamW": "AdamW"}


def state_dict_to_torch(state_dict: Mapping[str, Any]) -> dict:
    """A TensorCode optimizer state dict with every array as a ``torch.Tensor`` (``step``
    stays a 0-d tensor of its dtype, as ``torch.optim`` keeps it)."""
    state = {int(k): {key: torch.from_numpy(np.array(value, copy=True))
                      for key, value in entry.items()}
             for k, entry in state_dict["state"].items()}
    groups = []
    for group in state_dict["param_groups"]:
        group = dict(group)
        if "betas" in group:
            group["betas"] = tuple(group["betas"])
        group["params"] = list(group["params"])
        groups.append(group)
    return {"state": state, "param_groups": groups}


def state_dict_from_torch(state_dict: Mapping[str, Any]) -> dict:
    """A ``torch.optim`` state dict with every tensor as a NumPy array, ready for
    ``optimizer.load_state_dict``."""
    def array(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy().copy()
        return value
    state = {int(k): {key: array(value) for key, value in entry.items()}
             for k, entry in state_dict["state"].items()}
    groups = [dict(group) for group in state_dict["param_groups"]]
    return {"state": state, "param_groups": groups}


def parameters_to_torch(parameters: Parameters, requires_grad: bool = True
                        ) -> list[torch.Tensor]:
    """One leaf tensor per slot (copies), in recording order: the ``params`` list whose
    indices a state dict names."""
    return [torch.tensor(np.array(p, copy=True), requires_grad=requires_grad)
            for p in parameters.payloads()]


def parameters_from_torch(tensors: Sequence[torch.Tensor], like: Parameters) -> Parameters:
    """A table of ``like``'s layout holding copies of ``tensors`` (shapes and dtypes must
    match slot for slot)."""
    return Parameters.from_payloads(like.layout,
                                     [t.detach().cpu().numpy() for t in tensors])


def torch_optimizer(optimizer: Optimizer, tensors: Sequence[torch.Tensor],
                    lr: float | None = None) -> torch.optim.Optimizer:
    """A ``torch.optim`` optimizer over ``tensors`` carrying ``optimizer``'s
    hyperparameters and state, so PyTorch continues the trajectory."""
    if not isinstance(optimizer, (Sgd, Adam)):
        raise TensorCodeError(f"no torch.optim counterpart for {type(optimizer).__name__}; "
                              f"built-ins are {sorted(TORCH_CLASSES)}")
    cls = getattr(torch.optim, TORCH_CLASSES[optimizer.type_name()])
    group = optimizer.group()
    kwargs = {k: v for k, v in group.items() if k not in ("decoupled_weight_decay",)}
    if isinstance(optimizer, AdamW):
        kwargs.pop("decoupled_weight_decay", None)
    result = cls(list(tensors), lr=optimizer.lr if lr is None else lr, **kwargs)
    result.load_state_dict(state_dict_to_torch(optimizer.state_dict()))
    if lr is not None:
        for g in result.param_groups:
            g["lr"] = lr
    return result


__all__ = ["state_dict_to_torch", "state_dict_from_torch", "parameters_to_torch",
           "parameters_from_torch", "torch_optimizer", "TORCH_CLASSES"]

"""Name-to-tensor mappings of NumPy arrays or PyTorch tensors, seen as NumPy.

Patches compute on NumPy and hand results back in the caller's kind: a PyTorch state
dictionary in, PyTorch tensors out (same dtype and device). PyTorch is recognised by the
class's module and imported only when such a tensor is actually present, so
``tensorcode.weights`` never pulls it in otherwise.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import PatchError
from ..extras import require

#: dtypes a patch can pin and rebuild (safetensors' NumPy-representable types).
SUPPORTED_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                    "uint8", "uint16", "uint32", "uint64", "bool")


def is_torch_tensor(value: Any) -> bool:
    """True for a ``torch.Tensor`` without importing torch."""
    module = type(value).__module__ or ""
    return (module == "torch" or module.startswith("torch.")) and hasattr(value, "detach")


def to_numpy(name: str, value: Any) -> np.ndarray:
    """``value`` as a NumPy array (a read-only view where possible), or ``PatchError``."""
    if is_torch_tensor(value):
        torch = require("torch", "patching PyTorch tensors")  # the caller passed one

        tensor = value.detach()
        if tensor.dtype == torch.bfloat16:
            raise PatchError(f"tensor {name!r} is bfloat16, which NumPy cannot represent; "
                             "convert it to float32 before patching")
        array = tensor.cpu().numpy()
    elif isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, (np.generic, int, float, bool)):
        array = np.asarray(value)
    else:
        raise PatchError(f"tensor {name!r} is a {type(value).__name__}; expected a NumPy "
                         "array or a PyTorch tensor")
    if array.dtype.name not in SUPPORTED_DTYPES:
        raise PatchError(f"tensor {name!r} has dtype {array.dtype}; patches support "
                         f"{', '.join(SUPPORTED_DTYPES)}")
    if not array.dtype.isnative:
        # Same values, native byte order: dtypes then compare equal across sources.
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def tensor_shape(name: str, value: Any) -> tuple[int, ...]:
    """The shape of a NumPy array or torch tensor without converting its values."""
    if is_torch_tensor(value):
        return tuple(int(n) for n in value.shape)
    if isinstance(value, np.ndarray):
        return value.shape
    return to_numpy(name, value).shape


def numpy_mapping(mapping: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every entry of ``mapping`` as NumPy, keys checked to be strings."""
    if not isinstance(mapping, Mapping):
        raise PatchError(f"expected a mapping from tensor names to tensors, got "
                         f"{type(mapping).__name__}")
    result = {}
    for name, value in mapping.items():
        if not isinstance(name, str):
            raise PatchError(f"tensor names must be strings, got {name!r}")
        result[name] = to_numpy(name, value)
    return result


def like(original: Any, array: np.ndarray) -> Any:
    """``array`` in the kind of ``original``: a torch tensor on the same device and with
    the same dtype and ``requires_grad``, or a NumPy array."""
    if is_torch_tensor(original):
        torch = require("torch", "patching PyTorch tensors")  # the caller passed one
        tensor = torch.from_numpy(np.ascontiguousarray(array)).to(
            device=original.device, dtype=original.dtype)
        if original.requires_grad:
            tensor.requires_grad_(True)
        return tensor
    return array


def same_kind_mapping(original: Mapping[str, Any], items: dict[str, Any]) -> Mapping[str, Any]:
    """A fresh mapping of the caller's container kind (``OrderedDict`` stays ordered)."""
    if isinstance(original, OrderedDict):
        return OrderedDict(items)
    return dict(items)


__all__ = ["SUPPORTED_DTYPES", "is_torch_tensor", "to_numpy", "tensor_shape", "numpy_mapping",
           "like", "same_kind_mapping"]

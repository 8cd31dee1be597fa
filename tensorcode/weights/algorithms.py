"""Patches on algorithms: read their named parameters, swap them, apply a patch.

Only an algorithm's named parameters are addressable; its constants are part of the
program, not weights. These functions rely on the algorithm's own contract
(``algorithm.parameters`` and ``algorithm.with_parameters``) and check names, shapes
and dtypes first so a mismatch is a ``PatchError`` that says which tensor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import PatchError
from .tensors import numpy_mapping


def algorithm_parameters(algorithm: Any) -> dict[str, np.ndarray]:
    """``{name: copy of the parameter}`` for every named parameter of ``algorithm``."""
    parameters = getattr(algorithm, "parameters", None)
    if callable(parameters) and not isinstance(parameters, Mapping):
        parameters = parameters()
    if not isinstance(parameters, Mapping):
        raise PatchError(f"{type(algorithm).__name__} has no named parameters mapping; "
                         "expected an Algorithm (tensorcode.algorithm)")
    return {name: np.array(value, copy=True) for name, value in numpy_mapping(parameters).items()}


def replace_parameters(algorithm: Any, mapping: Mapping[str, Any]) -> Any:
    """A new algorithm equal to ``algorithm`` with the named parameters in ``mapping``.

    Every name must be a parameter of the algorithm, with its shape and dtype; names not
    in ``mapping`` keep their values. ``algorithm`` itself is unchanged.
    """
    current = algorithm_parameters(algorithm)
    replacements = numpy_mapping(mapping)
    unknown = sorted(set(replacements) - set(current))
    if unknown:
        raise PatchError(f"{unknown} are not parameters of this algorithm; it has "
                         f"{sorted(current)} (constants cannot be patched)")
    for name, value in replacements.items():
        expected = current[name]
        if value.shape != expected.shape or value.dtype != expected.dtype:
            raise PatchError(f"parameter {name!r} is {expected.dtype.name}"
                             f"{list(expected.shape)} but the replacement is "
                             f"{value.dtype.name}{list(value.shape)}")
    merged = {**current, **{name: np.array(value, copy=True)
                            for name, value in replacements.items()}}
    return algorithm.with_parameters(merged)


def patch_algorithm(algorithm: Any, patch: Any) -> Any:
    """``algorithm`` with ``patch`` applied to its parameters (base hashes checked)."""
    return replace_parameters(algorithm, patch.apply(algorithm_parameters(algorithm)))


__all__ = ["algorithm_parameters", "replace_parameters", "patch_algorithm"]

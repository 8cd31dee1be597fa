"""Algorithms: author programs compiled into the IR, saved as validated JSON artifacts,
run by a compiled plan or the NumPy reference interpreter, and compared with references.

``compile(source, inputs, outputs, parameters=None, executor="llvm") -> Algorithm``;
``algorithm(inputs)`` for one case, ``algorithm.batch(inputs)`` over a leading case
axis; ``algorithm.save(path)`` / ``Algorithm.load(path, executor=...)``;
``compare(algorithm, reference, cases, atol, rtol, rollout=False)``. Every tensor is
float64. The language is described in ``tensorcode.distill.SUBSET_SPEC``.
"""

from __future__ import annotations

from ..compiler.backends import DEFAULT_BACKEND
from ..compiler.subset import parse_reply
from .algorithm_file import FORMAT, VERSION
from .comparison import Comparison, compare
from .core import Algorithm, compile
from .executors import EXECUTORS


def load(path, executor: str = DEFAULT_BACKEND) -> Algorithm:
    """``Algorithm.load(path, executor=...)``."""
    return Algorithm.load(path, executor=executor)


def save(algorithm: Algorithm, path) -> object:
    """``algorithm.save(path)``."""
    return algorithm.save(path)


__all__ = ["Algorithm", "compile", "load", "save", "compare", "Comparison", "parse_reply",
           "EXECUTORS", "FORMAT", "VERSION"]

"""The subset language's vocabulary and limits: which names call which primitives, and
the bounds that keep any input cheap to compile.

The elementwise functions and the operators come from the registry (an entry's
``subset`` flag and ``operator`` symbol), so the language, ``Expr`` and the backends
agree on one list; ``OTHER_FUNCTIONS`` and ``METHODS`` are the calls the walker
(``subset.py``) handles with arguments of their own. ``distill.SUBSET_SPEC`` is written
from these tables.
"""

from __future__ import annotations

import re

from ..core import registry as primitives

DTYPE = "float64"

#: unary functions: callable as f(x) or x.f(); name -> registry op (entries with ``subset``)
UNARY_FUNCTIONS: dict[str, str] = {op.name: op.name for op in primitives.REGISTRY.values()
                                   if op.subset and op.arity == 1}
#: elementwise functions of two tensors: name -> registry op (entries with ``subset``)
BINARY_FUNCTIONS: dict[str, str] = {op.name: op.name for op in primitives.REGISTRY.values()
                                    if op.subset and op.arity == 2}
#: the other functions: name -> the registry ops they record
OTHER_FUNCTIONS: dict[str, tuple[str, ...]] = {"where": ("where",),
                                               "clip": ("maximum", "minimum")}
#: tensor methods besides the unary functions: name -> registry ops
METHODS: dict[str, tuple[str, ...]] = {"slice": ("slice",), "reshape": ("reshape",),
                                       "sum": ("sum",), "mean": ("mean",), "max": ("max",),
                                       "min": ("min",), "dot": ("matmul",)}
#: infix operators on tensors: symbol -> registry op (entries' ``operator``)
OPERATORS: dict[str, str] = {op.operator: op.name for op in primitives.REGISTRY.values()
                             if op.operator and op.name not in primitives.COMPARISONS}
#: comparisons (0.0/1.0 results): symbol -> registry op
COMPARISONS: dict[str, str] = {op.operator: op.name for op in primitives.REGISTRY.values()
                               if op.operator and op.name in primitives.COMPARISONS}
#: operators only for compile-time integers (loop variables, bounds)
INTEGER_OPERATORS = ("//", "%")
#: literal names: value
CONSTANT_NAMES: dict[str, int] = {"True": 1, "False": 0}

FUNCTION_NAMES = frozenset(UNARY_FUNCTIONS) | frozenset(BINARY_FUNCTIONS) | frozenset(
    OTHER_FUNCTIONS)
RESERVED_NAMES = FUNCTION_NAMES | {"range", "None"} | frozenset(CONSTANT_NAMES)

#: bounds, so that any input compiles (or fails) quickly and small
MAX_UNROLLED_STATEMENTS = 10_000
MAX_NODES = 50_000
MAX_LITERAL_ELEMENTS = 4_096
MAX_TENSOR_ELEMENTS = 1 << 20
MAX_PARAMETER_ELEMENTS = 1 << 20
MAX_RANK = 6
MAX_STATIC_INT = 1 << 53

#: what a name in a contract or the json block must look like
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

__all__ = ["DTYPE", "UNARY_FUNCTIONS", "BINARY_FUNCTIONS", "OTHER_FUNCTIONS", "METHODS",
           "OPERATORS", "COMPARISONS", "INTEGER_OPERATORS", "CONSTANT_NAMES",
           "FUNCTION_NAMES", "RESERVED_NAMES", "MAX_UNROLLED_STATEMENTS", "MAX_NODES",
           "MAX_LITERAL_ELEMENTS", "MAX_TENSOR_ELEMENTS", "MAX_PARAMETER_ELEMENTS", "MAX_RANK",
           "MAX_STATIC_INT", "IDENTIFIER"]

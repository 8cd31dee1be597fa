"""How the Numba backend lowers each elementwise op: one row per op, keyed by the
registry's op name (the registry says what an op is; this table says how this backend
writes it, as JAX's ``register_lowering`` and PyTensor's ``numba_funcify`` do).

A row is a ``Lowering``: ``template``, one NumPy-scalar expression with ``{0}``, ``{1}``,
``{2}`` for the operands' values, ``{one}`` and ``{zero}`` for constants of the result
dtype, ``{zero0}`` for a zero of operand 0's dtype and ``{np_dtype}`` for the result's
NumPy scalar type; and ``intrinsics``, the functions of ``intrinsics.py`` the template
calls (the generated module imports them). The float32 approximations are not rows:
they are scalar graphs of these ops (``lower/approximations.py``). Reductions, views,
movement, index, contraction and random ops are lowered by the loop program
(``lower/loops.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ....errors import CompileError
from ...core.registry import COMPARISONS, REGISTRY


@dataclass(frozen=True)
class Lowering:
    """One elementwise op in the fused loops (see the module doc)."""

    template: str
    intrinsics: frozenset[str] = frozenset()


#: the imports every generated module starts with: the names the templates use
IMPORTS = ("import math", "import numpy as np")

LOWERINGS: dict[str, Lowering] = {
    "neg": Lowering("-{0}"),
    "exp": Lowering("np.exp({0})"),
    "log": Lowering("np.log({0})"),
    "log1p": Lowering("np.log1p({0})"),
    "tanh": Lowering("np.tanh({0})"),
    # exp of -|x| never overflows: 1/(1+exp(-x)) for x >= 0, exp(x)/(1+exp(x)) below
    "sigmoid": Lowering("({one} / ({one} + np.exp(-{0})) if {0} >= {zero} else "
                        "np.exp({0}) / ({one} + np.exp({0})))"),
    "relu": Lowering("np.maximum({0}, {zero})"),
    "sqrt": Lowering("np.sqrt({0})"),
    "abs": Lowering("np.abs({0})"),
    "sin": Lowering("np.sin({0})"),
    "cos": Lowering("np.cos({0})"),
    "erf": Lowering("math.erf({0})"),
    "softplus": Lowering("np.log1p(np.exp(-np.abs({0}))) + np.maximum({0}, {zero})"),
    "detach": Lowering("{0}"),
    "add": Lowering("{0} + {1}"),
    "sub": Lowering("{0} - {1}"),
    "mul": Lowering("{0} * {1}"),
    "div": Lowering("{0} / {1}"),
    "pow": Lowering("{0} ** {1}"),
    "maximum": Lowering("np.maximum({0}, {1})"),
    "minimum": Lowering("np.minimum({0}, {1})"),
    # a comparison is 0/1 in the operand's dtype; the symbol is the registry's operator
    **{name: Lowering(f"({{one}} if {{0}} {REGISTRY[name].operator} {{1}} else {{zero}})")
       for name in COMPARISONS},
    "where": Lowering("({1} if {0} != {zero0} else {2})"),
    "astype": Lowering("{np_dtype}({0})"),
    # the bit operations scalar graphs build numbers from
    "floor": Lowering("np.floor({0})"),
    "shift_left": Lowering("{0} << {1}"),
    "shift_right": Lowering("{0} >> {1}"),
    "bitcast": Lowering("bitcast({0}, {np_dtype})", frozenset({"bitcast"})),
    "bitwise_and": Lowering("{0} & {1}"),
    "bitwise_or": Lowering("{0} | {1}"),
    "bitwise_xor": Lowering("{0} ^ {1}"),
    # Numba's signed multiply is ``mul nsw`` (an overflow is undefined); its unsigned one
    # wraps, and the cast back keeps the bits
    "mul_wide": Lowering("{np_dtype}(np.uint64({0}) * np.uint64({1}))"),
}


def lowering(op: str) -> Lowering:
    """The row for ``op``; ``CompileError`` when this backend cannot lower it."""
    row = LOWERINGS.get(op)
    if row is None:
        raise CompileError(f"numba backend: no scalar lowering for op {op!r}")
    return row


def templates(op: str) -> str:
    """The scalar template of ``op`` (what a fused update's emitted code writes)."""
    return lowering(op).template


__all__ = ["Lowering", "LOWERINGS", "lowering", "templates"]

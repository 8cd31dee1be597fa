"""Numba intrinsics the generated plan code imports (only when it uses them)."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic


@intrinsic
def pow2_float32(typingctx, n):
    """``2.0 ** n`` as float32 for an int32 ``n`` in [-126, 127], built from the exponent
    bits (a shift and a bitcast: it vectorizes, unlike ``ldexp``)."""
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        (value,) = args
        biased = builder.add(value, ir.Constant(ir.IntType(32), 127))
        bits = builder.shl(biased, ir.Constant(ir.IntType(32), 23))
        return builder.bitcast(bits, ir.FloatType())
    return sig, codegen


__all__ = ["pow2_float32"]

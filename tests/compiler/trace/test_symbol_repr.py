"""A symbol's repr says which node it is, what it is and its name: what a user printing
feeds or a parameter list needs to tell symbols apart."""

from __future__ import annotations

import numpy as np

import tensorcode as tc


def test_repr_shows_kind_name_and_type():
    tape = tc.Tape()
    w = tape.parameter(np.zeros((2, 3), np.float32), name="weights")
    x = tape.input(np.zeros(2, np.float32), name="x")
    anonymous = tape.input(0.0)
    y = x @ w
    assert repr(w) == 'Expr(%0 parameter "weights" : f32[2,3])'
    assert repr(x) == 'Expr(%1 input "x" : f32[2])'
    assert repr(anonymous) == "Expr(%2 input : f64[])"
    assert repr(y) == "Expr(%3 matmul : f32[3])"
    assert repr(tape.leaf(np.ones(2))).startswith("Expr(%4 constant : f64[2]")


"""Recording rules: NumPy scalars are strong (all of them), ``differentiate`` takes
parameters only, and ``Parameters.step`` refuses what a rule must not return."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import DTypeError, TensorCodeError


@pytest.mark.parametrize("scalar, tensor", [(np.float64(2.0), np.float32),
                                            (np.float32(2.0), np.float64)])
def test_numpy_scalars_are_strong_all_of_them(scalar, tensor):
    tape = tc.Tape()
    x = tape.input(np.ones(3, tensor), name="x")
    with pytest.raises(DTypeError, match="never mix silently"):
        x * scalar
    same = x * scalar.astype(tensor)  # a scalar of the tensor's own dtype is fine
    assert same.dtype == np.dtype(tensor).name
    assert (x * 2.0).dtype == np.dtype(tensor).name  # a Python float is weak


def test_differentiate_refuses_what_is_not_a_parameter():
    tape = tc.Tape()
    x = tape.input(np.ones(3, np.float32), name="features")
    w = tape.parameter(np.ones(3, np.float32), name="w")
    hidden = x * w
    loss = hidden.sum()
    with pytest.raises(TensorCodeError, match=r'wrt\[1\].*"features" is an input'):
        tape.differentiate(loss, [w, x])
    with pytest.raises(TensorCodeError, match=r"wrt\[0\].*an intermediate \(mul\)"):
        tape.differentiate(loss, [hidden])
    tape.differentiate(loss, [w])  # parameters are fine


@pytest.fixture
def table():
    tape = tc.Tape()
    w = tape.parameter(np.ones(3, np.float32), name="w")
    network = tape.into_network()
    parameters = network.parameters()
    gradients = tc.Gradients.from_payloads(parameters.layout, [np.ones(3, np.float32)])
    return parameters, gradients, w


@pytest.mark.parametrize("returned, message", [
    (None, "returned NoneType"),
    ("expr", "returned Expr"),
])
def test_a_step_rule_must_return_the_new_value(table, returned, message):
    parameters, gradients, w = table
    value = w if returned == "expr" else returned
    with pytest.raises(TensorCodeError, match=message):
        parameters.step(gradients, lambda p, g: value)


def test_step_refuses_a_parameters_table_for_gradients(table):
    parameters, gradients, w = table
    with pytest.raises(TypeError, match="Gradients table, got Parameters"):
        parameters.step(parameters, lambda p, g: p - g)


def test_step_refuses_an_integer_result_in_a_float_slot(table):
    parameters, gradients, w = table
    with pytest.raises(DTypeError, match=r"expected float32, got int64 from the step rule"):
        parameters.step(gradients, lambda p, g: np.arange(3))
    stepped = parameters.step(gradients, lambda p, g: p - 0.5 * g)
    assert stepped.payloads()[0].tolist() == [0.5, 0.5, 0.5]

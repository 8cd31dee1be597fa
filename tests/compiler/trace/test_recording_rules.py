"""Recording rules: NumPy scalars are strong (all of them), ``differentiate`` takes
parameters as ``wrt`` (and inputs only when named as ``inputs``), and
``Parameters.step`` refuses what a rule must not return."""

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


def test_differentiate_records_the_gradients_of_inputs_asked_for_by_name():
    tape = tc.Tape()
    x = tape.input(np.array([1.0, -2.0, 3.0]), name="features")
    upstream = tape.input(np.array([0.5, 1.0, -1.0]), name="dy")
    w = tape.parameter(np.array([2.0, 3.0, 4.0]), name="w")
    y = (x * w).tanh()
    adjoints = tape.differentiate((y * upstream).sum(), [w], inputs=[x])
    assert adjoints.roots() == [adjoints.loss, adjoints.of(w)]  # no slot for an input
    network = tape.into_network()
    run = network.forward(network.parameters())
    xv, wv, dy = np.array([1.0, -2.0, 3.0]), np.array([2.0, 3.0, 4.0]), \
        np.array([0.5, 1.0, -1.0])
    local = dy * (1 - np.tanh(xv * wv) ** 2)  # the vector-Jacobian product with dy
    np.testing.assert_allclose(run.of(adjoints.of(x)), local * wv, rtol=1e-12)
    np.testing.assert_allclose(run.of(adjoints.of(w)), local * xv, rtol=1e-12)


def test_differentiate_takes_only_inputs_as_inputs():
    tape = tc.Tape()
    x = tape.input(np.ones(3), name="features")
    w = tape.parameter(np.ones(3), name="w")
    with pytest.raises(TensorCodeError, match=r"inputs\[0\].*is not an input"):
        tape.differentiate((x * w).sum(), [w], inputs=[w])


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

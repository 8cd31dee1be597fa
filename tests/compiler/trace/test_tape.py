"""Recording rules: dtypes, weak scalars, shape errors, sealing, differentiate."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import DTypeError, ShapeError, TensorCodeError, TrainingError


def test_python_scalars_are_weak():
    tape = tc.Tape()
    x = tape.input(np.zeros(3, np.float32))
    assert (x * 2.5).dtype == "float32"
    assert (2 - x).dtype == "float32"
    assert (x ** 2).dtype == "float32"


def test_initials_follow_numpy_defaults():
    tape = tc.Tape()
    assert tape.parameter(0.0).dtype == "float64"
    assert tape.input(3).dtype == "int64"
    assert tape.leaf(np.float32(1.0)).dtype == "float32"


def test_mixed_tensor_dtypes_are_rejected_with_advice():
    tape = tc.Tape()
    a = tape.input(np.zeros(3, np.float32))
    b = tape.input(np.zeros(3, np.float64))
    with pytest.raises(DTypeError, match=r"add: operands have dtypes float32 and float64.*astype"):
        a + b
    assert (a + b.astype("float32")).dtype == "float32"


def test_python_float_with_int_tensor_is_rejected():
    tape = tc.Tape()
    i = tape.input(np.zeros(3, np.int64))
    with pytest.raises(DTypeError, match=r"int64 tensor with the Python float 0\.5"):
        i * 0.5
    assert (i * 2).dtype == "int64"


def test_float_only_ops_reject_integers():
    tape = tc.Tape()
    i = tape.input(np.zeros(3, np.int64))
    with pytest.raises(DTypeError, match="exp: needs a float operand but got int64"):
        i.exp()


def test_shape_errors_name_the_op_and_shapes():
    tape = tc.Tape()
    a = tape.input(np.zeros((2, 3)))
    b = tape.input(np.zeros((4, 3)))
    with pytest.raises(ShapeError, match=r"add: shapes \[2, 3\] and \[4, 3\] do not broadcast"):
        a + b
    with pytest.raises(ShapeError, match=r"matmul: inner dimensions differ: \[2, 3\] @ \[4, 3\]"):
        a @ b
    with pytest.raises(ShapeError, match=r"reshape: cannot reshape \[2, 3\]"):
        a.reshape(4)
    with pytest.raises(ShapeError, match="slice"):
        a.slice(0, 5, axis=1)
    with pytest.raises(ShapeError, match="concat"):
        tc.concat([a, tape.input(np.zeros((2, 2)))], axis=0)


def test_slice_accepts_negative_bounds():
    tape = tc.Tape()
    x = tape.input(np.arange(6.0))
    tail = x.slice(-2)
    network = tape.into_network()
    np.testing.assert_array_equal(network.forward(network.parameters()).of(tail), [4.0, 5.0])


def test_expr_has_no_truth_value():
    tape = tc.Tape()
    x = tape.input(0.0)
    with pytest.raises(TypeError, match=r"tc\.where"):
        if x > 0:
            pass


def test_operands_from_different_tapes_are_rejected():
    a = tc.Tape().input(0.0)
    b = tc.Tape().input(0.0)
    with pytest.raises(TensorCodeError, match="different tapes"):
        a + b


def test_sealed_tape_refuses_new_records():
    tape = tc.Tape()
    x = tape.input(0.0)
    tape.into_network()
    with pytest.raises(TensorCodeError, match="sealed by into_network"):
        x * 2.0
    with pytest.raises(TensorCodeError, match="sealed by into_network"):
        tape.parameter(1.0)
    with pytest.raises(TensorCodeError, match="sealed"):
        tape.into_network()


def test_record_returns_network_and_outputs():
    network, (w, loss) = tc.Tape.record(lambda t: (lambda w: (w, w * w))(t.parameter(3.0)))
    assert float(network.forward(network.parameters()).of(loss)) == 9.0
    assert network.parameter_symbols() == [w]


def test_unreached_parameter_gets_explicit_zeros():
    tape = tc.Tape()
    used = tape.parameter(np.ones(2))
    unused = tape.parameter(np.ones((2, 3)))
    loss = (used * used).sum()
    adjoints = tape.differentiate(loss, [used, unused])
    network = tape.into_network()
    run = network.forward(network.parameters())
    np.testing.assert_array_equal(run.of(adjoints.of(unused)), np.zeros((2, 3)))
    np.testing.assert_array_equal(run.of(adjoints.of(used)), [2.0, 2.0])
    assert adjoints.roots()[0] is loss and len(adjoints.roots()) == 3
    other = tape._exprs[0]
    assert adjoints.of(other) is adjoints.of(used)


def test_adjoints_of_unknown_parameter_is_an_error():
    tape = tc.Tape()
    p, q = tape.parameter(1.0), tape.parameter(2.0)
    adjoints = tape.differentiate(p * p, [p])
    with pytest.raises(TensorCodeError, match="not among the parameters"):
        adjoints.of(q)


def test_differentiate_requires_a_float_scalar_loss():
    tape = tc.Tape()
    p = tape.parameter(np.ones(3))
    with pytest.raises(ShapeError, match="loss must be a scalar but is f64\\[3\\]"):
        tape.differentiate(p * p, [p])
    i = tape.parameter(np.ones(3, np.int64))
    with pytest.raises(TrainingError, match="not a float tensor"):
        tape.differentiate((p * p).sum(), [i])


def test_gradients_are_recorded_as_more_ir():
    tape = tc.Tape()
    w = tape.parameter(2.0)
    loss = w * w * w
    before = len(tape)
    adjoints = tape.differentiate(loss, [w])
    assert len(tape) > before
    network = tape.into_network()
    assert float(network.forward(network.parameters()).of(adjoints.of(w))) == 12.0


# ---------------------------------------------------------------------------------------
# the Expr surface comes from the registry


def test_every_method_entry_is_an_expr_method_recording_it():
    from tensorcode.compiler.core import registry as primitives

    tape = tc.Tape()
    x = tape.parameter(np.array([0.5, 1.5]))
    recorded = {}
    for entry in primitives.REGISTRY.values():
        if entry.method:
            assert getattr(tc.Expr, entry.name).__qualname__ == f"Expr.{entry.name}"
            recorded[entry.name] = getattr(x, entry.name)()
    assert {"exp", "tanh", "sigmoid", "abs", "detach"} <= set(recorded)
    network = tape.into_network()
    for name, out in recorded.items():
        assert network.graph.nodes[out.index].op == name


def test_every_operator_symbol_records_its_entry():
    import operator as python

    from tensorcode.compiler.core import registry as primitives

    dunders = {"+": python.add, "-": python.sub, "*": python.mul, "/": python.truediv,
               "**": python.pow, "@": python.matmul, "<": python.lt, "<=": python.le,
               ">": python.gt, ">=": python.ge, "==": python.eq, "!=": python.ne}
    symbols = {e.operator: e.name for e in primitives.REGISTRY.values() if e.operator}
    assert set(symbols) == set(dunders)
    for symbol, name in symbols.items():
        tape = tc.Tape()
        a = tape.parameter(np.ones((2, 2)))
        b = tape.parameter(np.ones((2, 2)))
        out = dunders[symbol](a, b)
        network = tape.into_network()
        assert network.graph.nodes[out.index].op == name, symbol


def test_registry_predicates():
    from tensorcode.compiler.core import registry as primitives

    assert primitives.is_elementwise("add") and primitives.is_elementwise("where")
    assert primitives.is_elementwise("astype") and not primitives.is_elementwise("sum")
    assert primitives.is_reduction("mean") and not primitives.is_reduction("matmul")
    views = {n for n in primitives.REGISTRY if primitives.is_view(n)}
    assert views == {"reshape", "transpose", "broadcast_to", "slice", "detach"}
    for source in ("parameter", "input", "leaf"):
        assert not (primitives.is_elementwise(source) or primitives.is_reduction(source)
                    or primitives.is_view(source))
    with pytest.raises(tc.CompileError, match="unknown primitive"):
        primitives.is_view("fft")

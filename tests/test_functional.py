"""One functional namespace: every registry op and composite is a top-level function
(``tc.exp(x)`` as ``jnp.exp``/``torch.exp``), derived from the registry, each recording
exactly what its method form records; ``stop_gradient`` is the one public spelling of the
``detach`` op, and ``x.detach()`` keeps working."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import tensorcode as tc
import tensorcode.functional as functional
from tensorcode.compiler.core import registry as primitives


def test_the_namespace_is_the_registry_plus_the_composites():
    expected = {functional.PUBLIC_NAMES.get(op, op) for op in primitives.REGISTRY
                if op not in functional.INTERNAL_OPS} | set(functional.COMPOSITES)
    assert set(functional.__all__) == expected
    assert set(functional.INTERNAL_OPS) <= set(primitives.REGISTRY)  # no stale entries
    # the lazy top level lists the same names, so `import tensorcode` loads nothing
    assert sorted(tc._FUNCTIONAL) == functional.__all__
    for name in functional.__all__:
        assert getattr(tc, name) is getattr(functional, name), name
        assert name in tc.__all__ and name in dir(tc)


def test_one_spelling_for_detach():
    assert "detach" not in functional.__all__ and not hasattr(functional, "detach")
    tape = tc.Tape()
    x = tape.input(np.ones(3))
    stopped, detached = tc.stop_gradient(x), x.detach()  # the method form stays
    assert _recorded(tape, stopped) == _recorded(tape, detached)
    assert tape.nodes()[stopped.index].op == "detach"


def _recorded(tape, expr):
    node = tape.nodes()[expr.index]
    return node.op, node.attrs, expr.type


@pytest.mark.parametrize("name, call, method", [
    ("exp", lambda x: tc.exp(x), lambda x: x.exp()),
    ("log1p", lambda x: tc.log1p(x), lambda x: x.log1p()),
    ("neg", lambda x: tc.neg(x), lambda x: -x),
    ("add", lambda x: tc.add(x, 2.0), lambda x: x + 2.0),
    ("radd", lambda x: tc.add(2.0, x), lambda x: 2.0 + x),
    ("pow", lambda x: tc.pow(x, x), lambda x: x ** x),
    ("lt", lambda x: tc.lt(x, 0.5), lambda x: x < 0.5),
    ("matmul", lambda x: tc.matmul(x, x.T), lambda x: x @ x.T),
    ("sum", lambda x: tc.sum(x, axis=0, keepdims=True), lambda x: x.sum(axis=0, keepdims=True)),
    ("max", lambda x: tc.max(x, axis=1), lambda x: x.max(axis=1)),
    ("reshape", lambda x: tc.reshape(x, 6), lambda x: x.reshape(6)),
    ("transpose", lambda x: tc.transpose(x), lambda x: x.T),
    ("slice", lambda x: tc.slice(x, 0, 1, axis=1), lambda x: x.slice(0, 1, axis=1)),
    ("astype", lambda x: tc.astype(x, "float32"), lambda x: x.astype("float32")),
    ("broadcast_to", lambda x: tc.broadcast_to(x, (4, 2, 3)),
     lambda x: x.broadcast_to((4, 2, 3))),
    ("softmax", lambda x: tc.softmax(x), lambda x: x.softmax()),
])
def test_a_function_records_what_its_method_records(name, call, method):
    tape = tc.Tape()
    x = tape.input(np.arange(6.0).reshape(2, 3))
    by_function, by_method = call(x), method(x)
    assert _recorded(tape, by_function) == _recorded(tape, by_method)


def test_functions_refuse_operands_that_are_not_recorded():
    with pytest.raises(TypeError, match=r"tc\.exp"):
        tc.exp(np.ones(3))
    with pytest.raises(TypeError, match=r"tc\.add"):
        tc.add(1.0, 2.0)


def test_importing_tensorcode_still_loads_nothing_and_exp_loads_no_numba():
    code = ("import sys, json; import tensorcode as tc; before = set(sys.modules); "
            "tc.exp; print(json.dumps(['numba' in sys.modules, "
            "'tensorcode.functional' in before]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, False]

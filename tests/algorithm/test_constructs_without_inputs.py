"""Every subset construct compiles and runs on every backend, with its operands read from
an input and with operands that read no input at all (constants, loop counters, folded
integer arithmetic). Programs whose outputs read no input once generated
``def run_into(, O_f64):`` on the compiled backend; the backends must agree on every
program, for one case and for a batch."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode.algorithm as algorithms
from tensorcode.compiler import subset
from tensorcode.compiler.backends import BACKENDS

X = np.array([0.5, 1.5, 2.5, 3.5])
#: the operand a construct reads: the input, or a constant that reads no input
OPERANDS = {"input": "x", "constant": "[0.5, 1.5, 2.5, 3.5]"}


def _constructs() -> dict[str, tuple[str, str]]:
    """name -> (statements using ``v`` (a [4] tensor) and the name ``{t}``, the scalar
    expression returned)."""
    table: dict[str, tuple[str, str]] = {}
    for name in subset.UNARY_FUNCTIONS:
        table[f"function {name}"] = (f"{{t}} = {name}(v * 0.25 + 0.1)", "{t}.sum()")
        table[f"method {name}"] = (f"{{t}} = (v * 0.25 + 0.1).{name}()", "{t}.sum()")
    for symbol in subset.OPERATORS:
        if symbol == "@":
            table["operator @"] = ("{t} = v @ v", "{t}")
        else:
            table[f"operator {symbol}"] = (f"{{t}} = v {symbol} (v * 0.5 + 1.0)", "{t}.sum()")
    for symbol in subset.COMPARISONS:
        table[f"comparison {symbol}"] = (f"{{t}} = v {symbol} 1.5", "{t}.sum()")
    for symbol in ("+=", "-=", "*=", "/=", "**="):
        table[f"augmented {symbol}"] = (f"{{t}} = v * 1.0\n    {{t}} {symbol} 2.0", "{t}.sum()")
    table["augmented @="] = ("{t} = v * 1.0\n    {t} @= v", "{t}")
    table.update({
        "unary minus": ("{t} = -v", "{t}.sum()"),
        "slice": ("{t} = v.slice(1, 3)", "{t}.sum()"),
        "element read": ("{t} = v.slice(2, 3).reshape()", "{t}"),
        "reshape": ("{t} = v.reshape(2, 2)", "{t}.sum(axis=0).sum()"),
        "sum axis keepdims": ("{t} = v.reshape(2, 2).sum(axis=1, keepdims=True)", "{t}.sum()"),
        "mean": ("{t} = v.mean()", "{t}"),
        "max axis": ("{t} = v.reshape(2, 2).max(axis=0)", "{t}.sum()"),
        "min": ("{t} = v.min()", "{t}"),
        "dot": ("{t} = v.dot(v)", "{t}"),
        "minimum maximum": ("{t} = minimum(v, 2.0) + maximum(v, 2.0)", "{t}.sum()"),
        "clip": ("{t} = clip(v, 1.0, 3.0)", "{t}.sum()"),
        "where": ("{t} = where(v > 2.0, v, 0.0)", "{t}.sum()"),
        "true false": ("{t} = v * True + False", "{t}.sum()"),
        "list literal of values": ("{t} = [v.sum(), v.max()]", "{t}.sum()"),
        "pass": ("{t} = v.sum()\n    pass", "{t}"),
        "range loop": ("{t} = 0.0\n    for i in range(4):\n        {t} += v.slice(i, i + 1)"
                       ".reshape()", "{t}"),
        "range start stop step": ("{t} = 0.0\n    for i in range(0, 4, 2):\n        "
                                  "{t} += v.slice(i, i + 1).reshape()", "{t}"),
        "folded integer bounds": ("{t} = 0.0\n    for i in range(7 // 2, 10 % 6):\n        "
                                  "{t} += v.slice(i, i + 1).reshape()", "{t}"),
    })
    return table


CONSTRUCTS = _constructs()


def _program(operand: str) -> tuple[str, list[str]]:
    """One program holding every construct, each in its own output (one compile per
    backend, not one per construct): ``(source, output names in construct order)``."""
    lines = ["def program(x):", f"    v = {OPERANDS[operand]}"]
    names, results = [], []
    for k, construct in enumerate(sorted(CONSTRUCTS)):
        body, result = CONSTRUCTS[construct]
        lines.append(f"    # {construct}")
        lines.append("    " + body.format(t=f"t{k}"))
        names.append(f"y{k}")
        results.append(f'"y{k}": {result.format(t=f"t{k}")}')
    lines.append("    return {" + ", ".join(results) + ', "covered": 1.0}')
    return "\n".join(lines) + "\n", names


@pytest.mark.parametrize("operand", sorted(OPERANDS))
def test_every_construct_on_every_backend(operand):
    source, names = _program(operand)
    outputs = {**dict.fromkeys(names, ()), "covered": ()}
    answers = {}
    for backend in BACKENDS:
        algorithm = algorithms.compile(source, {"x": (4,)}, outputs, executor=backend)
        one = algorithm({"x": X})
        many = algorithm.batch({"x": np.stack([X, X, X])})
        for name in outputs:
            assert many[name].shape == (3,), (backend, name)
            np.testing.assert_allclose(many[name], [one[name]] * 3, rtol=1e-12)
        answers[backend] = one
    constructs = sorted(CONSTRUCTS)
    for backend, one in answers.items():
        for k, name in enumerate(names):
            assert float(one[name]) == pytest.approx(float(answers["reference"][name]),
                                                     rel=1e-12, abs=1e-12), (
                backend, constructs[k])


@pytest.mark.parametrize("source", [
    'def program(x):\n    return {"y": 1.0, "covered": 1.0}\n',
    'def program(x):\n    n = 0.0\n    for i in range(5):\n        n += 1.0\n'
    '    return {"y": n, "covered": 1.0}\n',
    'def program(x):\n    n = 0.0\n    for i in range(7 // 2, 10 % 6):\n        n += 1.0\n'
    '    return {"y": n, "covered": 1.0}\n',
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_that_read_no_input(source, backend):
    algorithm = algorithms.compile(source, {"x": (4,)}, {"y": (), "covered": ()},
                                   executor=backend)
    reference = algorithms.compile(source, {"x": (4,)}, {"y": (), "covered": ()},
                                   executor="reference")
    assert algorithm({"x": X}) == reference({"x": X})
    many = algorithm.batch({"x": np.zeros((5, 4))})
    assert many["y"].shape == (5,)
    np.testing.assert_array_equal(many["y"], reference.batch({"x": np.zeros((5, 4))})["y"])


@pytest.mark.parametrize("digit", ["\u0663", "\uff13", "\u09e9", "1\u0663"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_unicode_digits_are_refused_as_python_refuses_them(digit, backend):
    from tensorcode.errors import CompileError

    source = f'def program(x):\n    return {{"y": (x * {digit}).sum(), "covered": 1.0}}\n'
    with pytest.raises(CompileError, match="does not belong to the language"):
        algorithms.compile(source, {"x": (4,)}, {"y": (), "covered": ()}, executor=backend)

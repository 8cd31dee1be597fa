"""The rendered C: names and messages are data (escaped literals), never code."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode import aot
from tensorcode.aot.library import c_string
from tensorcode.errors import CompileError

HOSTILE = 'x"); system("id"); /* */ \\\n\u00e9'


def test_c_string_escapes_everything_but_plain_text():
    text = c_string(HOSTILE)
    assert text.startswith('"') and text.endswith('"')
    inner = text[1:-1]
    assert '"' not in inner and "\n" not in inner and "*" not in inner
    assert inner.replace("\\", "").isprintable()


def test_a_hostile_input_name_is_carried_as_data(tmp_path):
    tape = tc.Tape()
    x = tape.input(np.ones(3), name=HOSTILE)
    root = x * 2.0
    plan = tape.into_network().entry([root]).lower("llvm")
    plan.export(tmp_path / "lib", name="hostile")
    loaded = aot.load(tmp_path / "lib")
    assert loaded.input_names == [HOSTILE]
    header = (tmp_path / "lib" / "hostile.h").read_text()
    assert 'x");' not in header and "/* */" not in header  # only as escaped bytes
    assert loaded(np.array([1.0, 2.0, 3.0]))[0].tolist() == [2.0, 4.0, 6.0]


def test_a_step_plan_is_not_exported(tmp_path):
    tape = tc.Tape()
    w = tape.parameter(np.ones(3), name="w")
    x = tape.input(np.ones(3), name="x")
    loss = ((x * w) * (x * w)).sum()
    adjoints = tape.differentiate(loss, [w])
    network = tape.into_network()
    plan = network.entry(adjoints.roots()).lower("llvm", optimizer=tc.optim.Sgd(lr=0.1))
    with pytest.raises(CompileError, match="export a forward plan"):
        plan.export(tmp_path / "lib")

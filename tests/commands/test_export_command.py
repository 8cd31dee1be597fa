"""``tensorcode export`` for a saved plan and a saved algorithm (exported as plans)."""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode import aot
from tensorcode.algorithm import compile as compile_algorithm
from tensorcode.cli import main as cli_main


def test_a_saved_plan_exports_and_answers_as_the_plan(tmp_path, capsys):
    tape = tc.Tape()
    w = tape.parameter(np.array([[1.5, -2.0], [0.5, 3.0]]), name="w")
    x = tape.input(np.ones(2), name="x")
    root = (x @ w).exp()
    network = tape.into_network()
    plan = network.entry([root]).lower("llvm")
    plan.save(tmp_path / "plan")
    assert cli_main(["export", str(tmp_path / "plan"), "-o", str(tmp_path / "lib")]) == 0
    assert "export sha256: " in capsys.readouterr().out
    loaded = aot.load(tmp_path / "lib")
    value = np.array([0.3, -0.7])
    assert loaded(value)[0].tobytes() == plan.bind(network.parameters())(value)[0].tobytes()


def test_a_saved_algorithm_exports_with_its_names(tmp_path):
    source = "def f(x, scale):\n    return {'y': x * scale, 'total': x.sum()}\n"
    algorithm = compile_algorithm(source, inputs={"x": (3,)}, outputs={"y": (3,), "total": ()},
                                  parameters={"scale": 2.0})
    algorithm.save(tmp_path / "algorithm.json")
    assert cli_main(["export", str(tmp_path / "algorithm.json"), "-o",
                     str(tmp_path / "lib"), "--name", "scaled"]) == 0
    loaded = aot.load(tmp_path / "lib")
    assert loaded.input_names == ["x"] and loaded.output_names == ["y", "total"]
    y, total = loaded(np.array([1.0, 2.0, 3.5]))
    want = algorithm({"x": np.array([1.0, 2.0, 3.5])})
    assert y.tobytes() == want["y"].tobytes() and float(total) == float(want["total"])


def test_an_unknown_path_is_refused(tmp_path, capsys):
    assert cli_main(["export", str(tmp_path / "nothing"), "-o", str(tmp_path / "lib")]) == 1
    assert "is not a saved distillation" in capsys.readouterr().err

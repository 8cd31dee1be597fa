"""The example under examples/weights/ runs and its printed claims hold, checked against
NumPy on the same weights."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "weights" / "edit_router.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("edit_router_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_edit_router_example(tmp_path, capsys):
    example = _load_example()
    result = example.main(["--backend", "reference", "--output", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "w[1] = [5, 187, -23]" in printed  # the rendered text
    assert result["before"] != result["expected"]
    assert result["after"] == result["expected"]
    assert result["summary"]["forms"] == {"sparse": 2}
    assert result["summary"]["elements_changed"] == 3
    assert result["fraction_changed"] == pytest.approx(3 / 21)
    assert "not the tensor this patch was made from" in result["refused"]
    assert (tmp_path / "refund-fix.patch.json").exists()

    # Oracle: the same routes from NumPy on the rendered weights with the reply applied.
    w = np.rint(np.array(example.W) / 0.01) * 0.01
    b = np.rint(np.array(example.B) / 0.001) * 0.001
    w[1, 0], w[1, 1] = 190 * 0.01, -20 * 0.01
    b[1] -= 80 * 0.001
    batch = np.stack([example.features(keywords) for keywords, _ in example.CASES])
    oracle = [example.ROUTES[int(i)] for i in np.argmax(batch @ w + b, axis=1)]
    assert oracle == result["after"]

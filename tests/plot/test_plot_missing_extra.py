"""Without the plot extra: building plots still works, drawing says what to install.
These tests simulate a missing matplotlib (the ``no_matplotlib`` fixture), so they run
whether or not it is installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tensorcode.errors import TensorCodeError
from tensorcode.plot import INSTALL_HINT, Line, MissingExtraError, Plot


def test_saving_without_matplotlib_names_the_extra_and_writes_nothing(no_matplotlib, tmp_path):
    plot = Plot().title("loss").log_y().layer(Line.y([3.0, 2.0, 1.0]))
    with pytest.raises(MissingExtraError) as caught:
        plot.save(tmp_path / "loss.png")
    message = str(caught.value)
    assert "pip install 'tensorcode[plot]'" in message and INSTALL_HINT in message
    assert "matplotlib" in message
    assert isinstance(caught.value, TensorCodeError)
    assert list(tmp_path.iterdir()) == []


def test_showing_and_figures_without_matplotlib_raise_the_same_error(no_matplotlib):
    plot = Plot().layer(Line.y([1.0]))
    with pytest.raises(MissingExtraError, match="tensorcode\\[plot\\]"):
        plot.show()
    with pytest.raises(MissingExtraError, match="tensorcode\\[plot\\]"):
        plot.figure()


def test_importing_tensorcode_and_its_plots_does_not_import_matplotlib():
    code = ("import sys, tensorcode, tensorcode.plot, tensorcode.guide.plates\n"
            "from tensorcode.plot import Plot, Line\n"
            "Plot().title('t').layer(Line.y([1.0]))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"

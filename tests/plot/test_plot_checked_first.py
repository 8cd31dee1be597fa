"""``--plot`` and ``demo --plots`` check for the plot extra before anything trains."""

from __future__ import annotations

import pytest

from tensorcode import guide
from tensorcode.cli import main as cli_main
from tensorcode.plot import MissingExtraError


def test_10_a_guide_example_says_the_extra_is_missing_before_it_trains(no_matplotlib,
                                                                       monkeypatch, tmp_path):
    xor = guide.load("xor")
    with pytest.raises(MissingExtraError, match="tensorcode\\[plot\\]"):
        guide.main("xor", lambda: pytest.fail("the example ran"), xor.__doc__,
                   ["--plot", str(tmp_path / "xor.png")])
    assert list(tmp_path.iterdir()) == []


def test_10_demo_plots_says_the_extra_is_missing_before_it_trains(no_matplotlib,
                                                                  monkeypatch, tmp_path,
                                                                  capsys):
    monkeypatch.setattr(guide.load("xor"), "run", lambda: pytest.fail("the example ran"))
    status = cli_main(["demo", "--plots", str(tmp_path / "plates"), "--only", "xor",
                       "-o", str(tmp_path / "out")])
    assert status == 1
    assert "tensorcode[plot]" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []

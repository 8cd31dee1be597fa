"""The benchmark runner's ``--chart``: the table's ratios drawn as bars per workload."""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: F401,E402  (the test extra installs the plot extra)

from benchmarks import __main__ as runner  # noqa: E402
from benchmarks.chart import Ratio, ratios, write_chart  # noqa: E402
from benchmarks.harness import Row  # noqa: E402
from tensorcode.plot import PlotError  # noqa: E402

ROWS = [
    Row("ops", "matmul 64x64", "tensorcode", 10.0),
    Row("ops", "matmul 64x64", "numpy", 25.0),
    Row("ops", "matmul 64x64", "torch", 5.0),
    Row("train", "throughput", "tensorcode", 1000.0, unit="steps/s", lower_is_better=False),
    Row("train", "throughput", "torch", 250.0, unit="steps/s", lower_is_better=False),
    Row("train", "alone", "tensorcode", 3.0),  # no peer: no bar
    Row("train", "no reference", "torch", 3.0),  # no tensorcode row: no bar
    Row("io", "load", "numpy", 8.0, baseline=True),
    Row("io", "load", "tensorcode", 2.0),
]


def test_ratios_match_the_table_and_honour_direction_and_baselines():
    assert ratios(ROWS) == [
        Ratio("ops", "matmul 64x64", "numpy", 2.5),
        Ratio("ops", "matmul 64x64", "torch", 0.5),
        Ratio("train", "throughput", "torch", 4.0),
        Ratio("io", "load", "tensorcode", 0.25),
    ]


def test_ratios_agree_with_the_printed_table():
    from benchmarks.harness import format_table
    table = format_table(ROWS)
    for ratio in ratios(ROWS):
        assert f"{ratio.value:.2f}x" in table


def test_nothing_to_chart_is_a_clear_error(tmp_path):
    with pytest.raises(PlotError, match="no ratio to chart"):
        write_chart([Row("ops", "x", "tensorcode", 1.0)], tmp_path / "chart.png")
    assert list(tmp_path.iterdir()) == []


def test_chart_draws_one_bar_per_ratio(tmp_path, read_png_size):
    path = write_chart(ROWS, tmp_path / "chart.png")
    width, height = read_png_size(path)
    assert width == 1100 and height >= 300
    svg = write_chart(ROWS, tmp_path / "chart.svg").read_text()
    assert "ops / matmul 64x64" in svg and "4.00x" in svg and "0.25x" in svg and "0.50x" in svg
    with pytest.raises(PlotError, match="must be one of"):
        write_chart(ROWS, tmp_path / "chart.gif")


def test_runner_writes_the_chart_after_the_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "suites", lambda: ["fake"])
    monkeypatch.setattr(runner, "run_suite", lambda name, quick: list(ROWS))
    target = tmp_path / "ratios.png"
    assert runner.main(["--chart", str(target)]) == 0
    out, err = capsys.readouterr()
    assert "matmul 64x64" in out
    assert f"chart written to {target}" in err
    assert target.read_bytes()[:4] == b"\x89PNG"


def test_runner_without_ratios_says_why_no_chart(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "suites", lambda: ["fake"])
    monkeypatch.setattr(runner, "run_suite", lambda name, quick: [])
    assert runner.main(["--chart", str(tmp_path / "ratios.png")]) == 1
    assert "no chart written: no workload has both" in capsys.readouterr().err


def test_runner_without_the_plot_extra_names_it(tmp_path, monkeypatch, capsys, no_matplotlib):
    monkeypatch.setattr(runner, "suites", lambda: ["fake"])
    monkeypatch.setattr(runner, "run_suite", lambda name, quick: list(ROWS))
    assert runner.main(["--chart", str(tmp_path / "ratios.png")]) == 1
    assert "pip install 'tensorcode[plot]'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []

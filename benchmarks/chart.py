"""The benchmark table as a bar chart: ``python -m benchmarks --chart ratios.png``.

One group of horizontal bars per workload, one bar per peer, each bar the ratio the
table prints in its ``tensorcode vs peer`` column (above 1: TensorCode is that many
times better), growing from the parity line at 1 on a logarithmic axis, so 2x better
and 2x worse are bars of the same length on opposite sides. Drawing needs the ``plot``
extra; without it the runner says what to install and the table is still printed.
"""

from __future__ import annotations

import math
import pathlib
import sys
from dataclasses import dataclass

from tensorcode.errors import TensorCodeError
from tensorcode.plot import PlotError

from .harness import Row


@dataclass(frozen=True)
class Ratio:
    """One bar: how many times better TensorCode is than ``peer`` on a workload."""

    suite: str
    workload: str
    peer: str
    value: float


def ratios(rows: list[Row]) -> list[Ratio]:
    """The ratios of the table, computed as ``format_table`` does: against the baseline
    row of each workload (else its ``tensorcode`` row), honouring ``lower_is_better``.
    Workloads without a reference row, and rows without a positive value, give none."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.suite, row.workload), []).append(row)
    found = []
    for (suite, workload), group in groups.items():
        base = next((r for r in group if r.baseline), None) or next(
            (r for r in group if r.peer == "tensorcode"), None)
        if base is None or not base.value > 0:
            continue
        for row in group:
            if row is base or not row.value > 0:
                continue
            value = row.value / base.value if row.lower_is_better else base.value / row.value
            if math.isfinite(value):
                found.append(Ratio(suite, workload, row.peer, value))
    return found


def _times(value: float) -> str:
    """A ratio as the table prints it, with more digits where two decimals say 0.00."""
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def write_chart(rows: list[Row], path: str | pathlib.Path) -> pathlib.Path:
    """Draw the ratios of ``rows`` and write them to ``path`` (PNG or SVG, atomically)."""
    bars = ratios(rows)
    if not bars:
        raise PlotError("no workload has both a reference row (tensorcode or baseline) and "
                        "a peer row with a positive value, so there is no ratio to chart; "
                        "run suites that compare peers, or drop --chart")
    from tensorcode.plot.render import FORMATS, require_matplotlib, write_figure

    path = pathlib.Path(path)
    if path.suffix.lower() not in FORMATS:
        raise PlotError(f"cannot write the chart as {path.name!r}: the suffix chooses the "
                        f"format and must be one of {sorted(FORMATS)}")
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    workloads = list(dict.fromkeys((bar.suite, bar.workload) for bar in bars))
    peers = list(dict.fromkeys(bar.peer for bar in bars))
    figure = Figure(figsize=(11.0, max(3.0, 1.6 + 0.32 * len(bars) + 0.2 * len(workloads))),
                    dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    # each workload's band is shared by its own peers only; a peer keeps one colour
    positions: dict[str, list[float]] = {peer: [] for peer in peers}
    values: dict[str, list[float]] = {peer: [] for peer in peers}
    for row, key in enumerate(workloads):
        present = [bar for bar in bars if (bar.suite, bar.workload) == key]
        height = 0.8 / len(present)
        for slot, bar in enumerate(present):
            positions[bar.peer].append(row - 0.4 + height * (slot + 0.5))
            values[bar.peer].append(bar.value)
    band = 0.8 / max(sum(1 for b in bars if (b.suite, b.workload) == key) for key in workloads)
    for index, peer in enumerate(peers):
        # bars grow from the parity line: right where TensorCode wins, left where not
        drawn = axes.barh(positions[peer], [v - 1.0 for v in values[peer]], left=1.0,
                          height=band * 0.9, label=peer, color=f"C{index % 10}")
        axes.bar_label(drawn, labels=[_times(v) for v in values[peer]], padding=3,
                       fontsize=8)
    axes.set_xscale("log")
    axes.axvline(1.0, color="black", linewidth=1.0, linestyle="--", label="parity")
    low = min(min(b.value for b in bars), 1.0)
    high = max(max(b.value for b in bars), 1.0)
    axes.set_xlim(low / 2.0, high * 2.0)
    axes.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    axes.xaxis.set_minor_formatter(NullFormatter())
    axes.set_yticks(range(len(workloads)),
                    labels=[f"{suite} / {workload}" for suite, workload in workloads])
    axes.invert_yaxis()  # the table's first workload on top
    axes.set_xlabel("tensorcode vs peer (times better; above 1: TensorCode wins)")
    axes.set_title("benchmark ratios, measured in this run")
    axes.grid(True, axis="x", alpha=0.3, which="both")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return write_figure(figure, path, dpi=100)


def write_chart_for_cli(rows: list[Row], path: str) -> int:
    """``--chart`` in the runner: write the chart, or say why not; the exit status."""
    try:
        written = write_chart(rows, path)
    except TensorCodeError as error:
        print(f"python -m benchmarks: no chart written: {error}", file=sys.stderr)
        return 1
    print(f"chart written to {written}", file=sys.stderr)
    return 0


__all__ = ["Ratio", "ratios", "write_chart", "write_chart_for_cli"]

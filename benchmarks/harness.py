"""Shared measuring and reporting for the benchmark suites.

A suite is a module ``benchmarks/suite_<name>.py`` with ``run(quick: bool) -> list[Row]``.
The runner executes each suite in its own process (frameworks slow each other down when
loaded together), so a suite that compares against PyTorch and JAX should itself start
one process per framework (``run_in_subprocess``). Rows print as a table of medians
and ratios against the TensorCode row of the same workload, measured in the same run:
speed is reported, never asserted.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Row:
    """One measurement. ``value`` is a median in ``unit``; ``lower_is_better`` says which
    way a ratio reads. The row whose ``peer`` is ``"tensorcode"`` (or ``baseline``) is the
    reference for ratios of its workload."""

    suite: str
    workload: str
    peer: str
    value: float
    unit: str = "us"
    lower_is_better: bool = True
    note: str = ""
    baseline: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def median_time(fn: Callable[[], Any], repeat: int = 50, warmup: int = 5,
                min_time: float = 0.0, number: int = 1) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` samples of ``number`` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    start_all = time.perf_counter()
    while len(samples) < repeat or time.perf_counter() - start_all < min_time:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
        if len(samples) >= 10 * repeat:
            break
    return statistics.median(samples)


def run_in_subprocess(code: str, timeout: float = 600.0) -> Any:
    """Run ``code`` in a fresh Python; it must print one JSON document as its last line."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def module_available(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name) is not None


def format_table(rows: list[Row]) -> str:
    """Rows grouped by suite and workload, with each peer's ratio to the baseline row
    (>1 means TensorCode is that many times better)."""
    lines = []
    header = (f"{'suite':<12} {'workload':<34} {'peer':<22} {'median':>14}  "
              f"{'tensorcode vs peer':>18}  note")
    lines.append(header)
    lines.append("-" * len(header))
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.suite, row.workload), []).append(row)
    for (suite, workload), group in groups.items():
        base = next((r for r in group if r.baseline), None) or next(
            (r for r in group if r.peer == "tensorcode"), None)
        for row in group:
            ratio = ""
            if base is not None and row is not base and row.value > 0 and base.value > 0:
                r = row.value / base.value if row.lower_is_better else base.value / row.value
                ratio = f"{r:.2f}x"
            value = f"{row.value:.4g} {row.unit}"
            lines.append(f"{suite:<12} {workload:<34} {row.peer:<22} {value:>14}  "
                         f"{ratio:>18}  {row.note}")
    return "\n".join(lines)

"""Run the benchmark suites:
``python -m benchmarks [--quick] [--only NAME] [--json PATH] [--chart PATH]``.

Each ``suite_*.py`` runs in its own process; its rows are printed together as one table
of medians and ratios measured in this run.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

from .harness import Row, format_table

HERE = pathlib.Path(__file__).resolve().parent


def suites() -> list[str]:
    return sorted(p.stem[len("suite_"):] for p in HERE.glob("suite_*.py"))


def run_suite(name: str, quick: bool) -> list[Row]:
    code = (f"import json, sys; sys.path.insert(0, {str(HERE.parent)!r}); "
            f"from benchmarks import suite_{name} as s; "
            f"print(json.dumps([r.to_json() for r in s.run(quick={quick!r})]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"suite {name} failed:\n{result.stderr[-3000:]}", file=sys.stderr)
        return []
    return [Row(**r) for r in json.loads(result.stdout.strip().splitlines()[-1])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller sizes")
    parser.add_argument("--only", action="append", choices=suites(), help="run only this suite")
    parser.add_argument("--json", help="also write the rows as JSON to this path")
    parser.add_argument("--chart", metavar="PATH",
                        help="also draw the ratios as a bar chart (.png or .svg; needs the "
                             "plot extra)")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for name in args.only or suites():
        print(f"running suite {name} ...", file=sys.stderr, flush=True)
        rows += run_suite(name, args.quick)
    print(format_table(rows))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps([r.to_json() for r in rows], indent=1))
    if args.chart:
        from .chart import write_chart_for_cli
        return write_chart_for_cli(rows, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())

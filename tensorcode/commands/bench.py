"""``tensorcode bench``: run the benchmark harness (``python -m benchmarks``) of a checkout.

The benchmarks live in the source tree, not in the installed package: run this from a
checkout (or pass ``--root``), e.g. ``tensorcode bench --only compiler --quick``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

from ..errors import TensorCodeError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``bench`` flags to ``parser``."""
    parser.add_argument("--root", metavar="DIR",
                        help="the checkout holding benchmarks/ (default: the current "
                             "directory or the one tensorcode is installed from)")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller sizes")
    parser.add_argument("--only", action="append", metavar="SUITE", help="run only this suite")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")


def find_root(explicit: str | None) -> pathlib.Path:
    """The checkout holding ``benchmarks/``: ``explicit``, else the current directory
    or the one tensorcode is installed from (the suites are not part of the package)."""
    candidates = [pathlib.Path(explicit)] if explicit else [
        pathlib.Path.cwd(), pathlib.Path(__file__).resolve().parents[1]]
    for root in candidates:
        if (root / "benchmarks" / "__main__.py").is_file():
            return root.resolve()
    where = ", ".join(str(c) for c in candidates)
    raise TensorCodeError(f"no benchmarks/ folder found (looked in {where}); the benchmark "
                          "harness ships with the source checkout, not the installed "
                          "package: run `tensorcode bench` from a clone, or pass --root DIR")


def main(args: argparse.Namespace) -> int:
    """Run the benchmark suites in a child ``python -m benchmarks``; its exit status."""
    root = find_root(args.root)
    command = [sys.executable, "-m", "benchmarks"]
    if args.quick:
        command.append("--quick")
    for suite in args.only or []:
        command += ["--only", suite]
    if args.json:
        command += ["--json", str(pathlib.Path(args.json).resolve())]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.call(command, cwd=root, env=env)

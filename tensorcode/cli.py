"""The ``tensorcode`` command.

Each subcommand lives in its own module exposing ``configure(parser)`` and
``main(args) -> int``; this file only dispatches, importing the chosen module lazily so
``tensorcode demo`` does not pay for the compiler and ``tensorcode patch`` does not pay
for numba.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from .errors import TensorCodeError

#: subcommand -> (module implementing it, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("tensorcode.demo", "run the main job: the guide's examples on embedded data"),
    "compile": ("tensorcode.compiler.compile_command",
                "warm the plan cache for a saved network or plan"),
    "bench": ("tensorcode.bench_command", "run the benchmark harness (ratios against peers)"),
    "route": ("tensorcode.distill.route_command",
              "serve a saved distilled program: JSON lines in, answers out"),
    "patch": ("tensorcode.weights.patch_command",
              "render, diff and apply weight patches on safetensors files"),
}


def _load(name: str):
    module_name, _ = COMMANDS[name]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            return None
        raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tensorcode", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    available = {}
    for name, (_, help_text) in COMMANDS.items():
        module = _load(name)
        if module is None:
            continue
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.configure(command)
        available[name] = module
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(available[args.command].main(args) or 0)
    except TensorCodeError as error:
        print(f"tensorcode {args.command}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``tensorcode`` command.

Each subcommand lives in its own module exposing ``configure(parser)`` and
``main(args) -> int``; this file only dispatches, importing the chosen module lazily so
``tensorcode demo`` does not pay for the compiler and ``tensorcode patch`` does not pay
for numba.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from .errors import TensorCodeError

#: subcommand -> (module implementing it, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("tensorcode.commands.demo", "run the main job: the guide's examples on embedded data"),
    "compile": ("tensorcode.commands.compile",
                "warm the plan cache for a saved network or plan"),
    "bench": ("tensorcode.commands.bench", "run the benchmark harness (ratios against peers)"),
    "route": ("tensorcode.commands.route",
              "serve a saved distilled program: JSON lines in, answers out"),
    "patch": ("tensorcode.commands.patch",
              "render, diff and apply weight patches on safetensors files"),
    "serve": ("tensorcode.commands.serve", "serve saved distilled routers over HTTP"),
    "repair": ("tensorcode.commands.repair", "revise a served router with its escalation log"),
    "export": ("tensorcode.commands.export",
               "export a saved router or plan as a shared library with a C header"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tensorcode`` command line; only the chosen subcommand's module is
    imported, so ``tensorcode demo`` never loads numba until a guide example needs it.
    Returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="tensorcode",
        description="TensorCode: record, compile and run small trainable programs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = argv[0] if argv and argv[0] in COMMANDS else None
    module = None
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            # only the chosen subcommand is imported: one broken or heavy command never
            # takes the others down with it
            module = importlib.import_module(module_name)
            module.configure(command)
    args = parser.parse_args(argv)
    if args.command is None or module is None:
        parser.print_help()
        return 2
    try:
        status = int(module.main(args) or 0)
        sys.stdout.flush()  # a closed pipe is met here, not in the interpreter's exit
        return status
    except TensorCodeError as error:
        print(f"tensorcode {args.command}: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as cat does
        _silence_stdout()
        return 1


def _silence_stdout() -> None:
    """Point stdout at the null device so the interpreter's last flush cannot fail."""
    # no real descriptor when stdout was replaced in-process: nothing to redirect then
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

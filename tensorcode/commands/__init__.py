"""The ``tensorcode`` subcommands, one module each.

Every module exposes ``configure(parser)`` and ``main(args) -> int``; ``tensorcode.cli``
imports only the one that was asked for. Flags are spelled the same everywhere:
``--backend`` for a plan backend and ``-o/--output`` for where a result is written.
"""

import argparse

from ..compiler.backends import BACKENDS, DEFAULT_BACKEND


def add_backend_flag(parser: argparse.ArgumentParser) -> None:
    """``--backend``, spelled and explained once for every subcommand that runs a plan."""
    parser.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                        help=f"{DEFAULT_BACKEND}: the compiled plan (default); reference: the "
                             "NumPy interpreter")

"""The ``tensorcode`` subcommands, one module each.

Every module exposes ``configure(parser)`` and ``main(args) -> int``; ``tensorcode.cli``
imports only the one that was asked for. Flags are spelled the same everywhere:
``--backend`` for a plan backend and ``-o/--output`` for where a result is written.
"""

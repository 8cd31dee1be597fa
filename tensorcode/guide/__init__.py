"""The training guide's examples, as code: each module's ``run(quick=False)`` trains on
embedded data and returns a ``GuideResult`` with the lines it prints and the data its
plate draws. ``examples/guide/*.py`` run them one by one; ``tensorcode demo`` runs all.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib

from ..plot.render import require_matplotlib
from .plates import plates
from .result import GUIDE, GuideResult


def load(name: str):
    """The guide module ``name`` (one of ``GUIDE``)."""
    if name not in GUIDE:
        raise KeyError(f"unknown guide example {name!r}; choose from {GUIDE}")
    return importlib.import_module(f"{__name__}.{name}")


def available() -> list[str]:
    """Guide examples present in this installation, in guide order."""
    return list(GUIDE)


def run_example(name: str, argv: list[str] | None = None) -> GuideResult:
    """Command-line entry of ``examples/guide/<name>.py``: run one example, print its
    lines, and with ``--plot PATH`` write its plate (needs the ``plot`` extra)."""
    parser = argparse.ArgumentParser(prog=f"examples/guide/{name}.py",
                                     description=(load(name).__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--plot", metavar="PATH",
                        help="write the plate as PNG or SVG (a loss curve, where the example "
                             "has one, goes beside it as <stem>_loss<suffix>)")
    args = parser.parse_args(argv)
    if args.plot:  # before training: a missing extra is said at once, not after the run
        require_matplotlib()
    result = load(name).run()
    print("\n".join(result.lines))
    if args.plot:
        built = plates(result)
        if not built:
            print(f"{name} is told in text and has no plate; nothing written")
        target = pathlib.Path(args.plot)
        for stem, plot in built:
            path = target if stem == name else target.with_name(
                f"{target.stem}{stem[len(name):]}{target.suffix}")
            plot.save(path)
            print(f"plate written to {path}")
    return result


__all__ = ["GUIDE", "GuideResult", "load", "available", "run_example"]

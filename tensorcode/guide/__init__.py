"""Support for the training guide's examples, which are programs in ``examples/guide/``.

Each example (``examples/guide/xor.py`` ...) is a whole program a reader can open: its
``run(quick=False)`` trains on embedded data and returns a ``GuideResult`` with the lines
it prints and the data its plate draws, and run as a script it prints them (``--plot
PATH`` draws the plate). This package holds what they share: ``GuideResult`` and the
guide's order (``GUIDE``), the loop helpers (``steps``), the plates (``plates``), the
script entry (``main``) and the finder ``tensorcode demo`` and the tests use to load them
(``examples_directory``, ``load``).

The examples ship with a source checkout, not inside the package: ``examples_directory()``
is ``examples/guide`` beside the package's own directory (what ``pip install -e .`` from a
checkout gives), or the directory passed to it. Loading runs the example's file as a
module, as ``python examples/guide/xor.py`` would: the examples are the checkout's own
programs, never a file downloaded or named by data.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
from collections.abc import Callable
from types import ModuleType

from ..errors import TensorCodeError
from ..plot.render import require_matplotlib
from . import plates
from .result import GUIDE, GuideResult

#: the checkout's examples of the guide, beside the package directory
CHECKOUT_EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "guide"


class ExamplesNotFound(TensorCodeError):
    """The guide's example programs are not where they were looked for (an installation
    from a wheel has none; they come with a source checkout)."""


def examples_directory(directory: str | pathlib.Path | None = None) -> pathlib.Path:
    """``directory`` (default: the checkout's ``examples/guide``) when it holds every guide
    example, else ``ExamplesNotFound`` saying where they were looked for and what to do."""
    where = CHECKOUT_EXAMPLES if directory is None else pathlib.Path(directory)
    missing = [name for name in GUIDE if not (where / f"{name}.py").is_file()]
    if missing:
        raise ExamplesNotFound(
            f"the training guide's examples are programs in a source checkout "
            f"(examples/guide/), and {where} does not hold {', '.join(missing)}.py; from a "
            "checkout run 'pip install -e . && tensorcode demo', or pass the directory "
            "with --examples DIR")
    return where


def load(name: str, directory: str | pathlib.Path | None = None) -> ModuleType:
    """The example program ``name`` (one of ``GUIDE``) from ``examples_directory``,
    loaded as a module (once per process and directory)."""
    if name not in GUIDE:
        raise KeyError(f"unknown guide example {name!r}; choose from {GUIDE}")
    path = examples_directory(directory) / f"{name}.py"
    module_name = f"tensorcode_guide_examples.{name}"
    loaded = sys.modules.get(module_name)
    if loaded is not None and pathlib.Path(loaded.__file__ or "") == path:
        return loaded
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has one
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def main(name: str, run: Callable[[], GuideResult], doc: str | None,
         argv: list[str] | None = None) -> GuideResult:
    """The command line of ``examples/guide/<name>.py``: run the example, print its
    lines, and with ``--plot PATH`` write its plate (needs the ``plot`` extra)."""
    parser = argparse.ArgumentParser(prog=f"examples/guide/{name}.py",
                                     description=(doc or "").strip().splitlines()[0])
    parser.add_argument("--plot", metavar="PATH",
                        help="write the plate as PNG or SVG (a loss curve, where the example "
                             "has one, goes beside it as <stem>_loss<suffix>)")
    args = parser.parse_args(argv)
    if args.plot:  # before training: a missing extra is said at once, not after the run
        require_matplotlib()
    result = run()
    print("\n".join(result.lines))
    if args.plot:
        built = plates.plates(result)
        if not built:
            print(f"{name} is told in text and has no plate; nothing written")
        target = pathlib.Path(args.plot)
        for stem, plot in built:
            path = target if stem == name else target.with_name(
                f"{target.stem}{stem[len(name):]}{target.suffix}")
            plot.save(path)
            print(f"plate written to {path}")
    return result


__all__ = ["GUIDE", "GuideResult", "ExamplesNotFound", "examples_directory", "load", "main",
           "CHECKOUT_EXAMPLES"]

"""``tensorcode export PATH -o DIR``: a saved router or plan as a shared library.

PATH is a directory written by ``Distillation.save`` (exported as a router: its
answers with the covered flag), a plan directory written by ``plan.save`` or a saved
algorithm artifact (``algorithm.save``; both exported as plans). DIR receives
``lib<name>.so``, ``<name>.h`` and ``manifest.json``; a DIR that is not empty is refused
unless ``--force``. The export's SHA-256 is printed: pin it with
``tensorcode.aot.load(DIR, sha256=...)``.
"""

from __future__ import annotations

import argparse
import pathlib

from ..errors import ArtifactError


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``export`` flags to ``parser``."""
    parser.add_argument("path", metavar="PATH",
                        help="a saved distillation (router), a saved plan directory or a "
                             "saved algorithm file")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="the directory to write (new or empty, unless --force)")
    parser.add_argument("--force", action="store_true",
                        help="replace the files of a non-empty DIR")
    parser.add_argument("--name", default=None,
                        help="the library's name: lib<name>.so, <name>.h and the prefix of "
                             "its C functions (default: router or plan)")


def main(args: argparse.Namespace) -> int:
    """Export PATH into DIR and print what was written and the export's SHA-256."""
    path = pathlib.Path(args.path)
    if (path / "distillation.json").is_file():
        from ..distill.result import Distillation

        manifest = Distillation.load(path).export(args.output, name=args.name or "router",
                                                  force=args.force)
    elif (path / "plan.json").is_file():
        from ..compiler.plans.plan import Plan

        manifest = Plan.load(path).export(args.output, name=args.name or "plan",
                                          force=args.force)
    elif path.is_file():
        from ..algorithm import load
        from ..aot.export import export_library
        from ..distill.export import algorithm_library

        library = algorithm_library(load(path), args.name or "plan", router=False)
        manifest = export_library(library, args.output, args.force)
    else:
        raise ArtifactError("is not a saved distillation (distillation.json), a saved plan "
                            "(plan.json) nor a saved algorithm file", path=path)
    print(f"exported {manifest['kind']} lib{manifest['name']}.so, {manifest['name']}.h and "
          f"manifest.json to {args.output}")
    print(f"export sha256: {manifest['export_sha256']}")
    return 0

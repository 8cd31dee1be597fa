"""``tensorcode demo``: the main job, on embedded data.

Runs the training guide's examples and prints their lines, then the distilled ticket
router as the centerpiece, saving the program where ``tensorcode route DIR`` can serve
it, then the owned tools (a Decision and a Planner trained on shipped data, saved and
reloaded in a fresh process, and a small Chatbot trained on a shipped dialogue).

The guide's examples are programs in a source checkout's ``examples/guide/`` (found
beside the package, as ``pip install -e .`` installs it, or given with ``--examples``);
without them the guide section says where it looked and the rest still runs, and
``--only``/``--examples`` naming examples that are not there fail with that message.
"""

from __future__ import annotations

import argparse
import pathlib
import time

from .. import guide


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``demo`` flags to ``parser``."""
    parser.add_argument("--plots", metavar="DIR", help="also write every plate into DIR")
    parser.add_argument("-o", "--output", metavar="DIR", default="tensorcode-demo",
                        help="where to save the distilled router (default: ./tensorcode-demo)")
    parser.add_argument("--only", action="append", choices=guide.GUIDE,
                        help="run only this guide example (repeatable)")
    parser.add_argument("--examples", metavar="DIR",
                        help="the guide's example programs (default: examples/guide of the "
                             "checkout this package was installed from)")


def main(args: argparse.Namespace) -> int:
    """Run the guide examples (and, when all run, the distilled ticket router), printing
    their lines."""
    try:
        directory = guide.examples_directory(args.examples)
    except guide.ExamplesNotFound as missing:
        if args.only or args.examples:
            raise  # asked for by name: the command fails, saying where it looked
        print(f"== the training guide: skipped ({missing})")
        print()
        directory, names = None, list[str]()
    else:
        names = args.only or list(guide.GUIDE)
    if args.plots:  # before any example trains: a missing extra is said at once
        from ..plot.render import require_matplotlib

        require_matplotlib()
    for name in names:
        start = time.perf_counter()
        result = guide.load(name, directory).run()
        elapsed = time.perf_counter() - start
        print(f"== {result.title} ({name}, {elapsed:.2f} s)")
        print("\n".join(result.lines))
        if args.plots:
            from ..guide.plates import save_plates

            for path in save_plates(result, pathlib.Path(args.plots)):
                print(f"plate written to {path}")
        print()
    if not args.only:
        from ..distill import tickets

        save_dir = pathlib.Path(args.output) / "ticket-router"
        print("== distilled ticket router")
        print("\n".join(tickets.run_example(save_dir)))
        print(f"Serve it over HTTP: tensorcode serve {save_dir} (see docs/serving.md)")
        _tools_section(pathlib.Path(args.output) / "tools")
    return 0


def _tools_section(output: pathlib.Path) -> None:
    """Owned tools trained on shipped data, saved and reloaded in a fresh process."""
    from ..tools import example

    print()
    print("== owned tools (docs/tools.md)")
    print("\n".join(example.run_example(output)))
    from ..tools import investigator_example

    print("\n".join(investigator_example.run_example()))
    from ..tools import chat_example

    print("\n".join(chat_example.run_example(output / "chatbot")))

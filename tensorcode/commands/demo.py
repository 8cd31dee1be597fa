"""``tensorcode demo``: the main job, on embedded data.

Runs the training guide's examples and prints their lines, then the distilled ticket
router as the centerpiece, saving the program where ``tensorcode route DIR`` can serve
it, then the owned tools (a Decision and a Planner trained on authored data, saved and
reloaded in a fresh process, the Investigator, and a small Chatbot trained on a written
dialogue).

The guide's examples are programs in a source checkout's ``examples/guide/`` (found
beside the package, as ``pip install -e .`` installs it, or given with ``--examples``);
without them the guide section says where it looked and the rest still runs, and
``--only``/``--examples`` naming examples that are not there fail with that message.
The tools' demos are the programs of ``examples/tools/`` beside them, each run as
``python examples/tools/<name>.py`` would run it; without them the tools section says
where it looked.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import time

from .. import guide

#: the tools' demo programs, in the checkout beside the guide's examples
TOOLS_EXAMPLES = guide.CHECKOUT_EXAMPLES.parent / "tools"


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
        return _tools_section(pathlib.Path(args.output) / "tools")
    return 0


def _tools_section(output: pathlib.Path) -> int:
    """The owned tools' demo programs (``examples/tools/``), each in its own process; 1
    when one fails (its error is on stderr), else 0."""
    print()
    print("== owned tools (docs/tools.md)")
    programs = [("decision_and_planner.py", "--output", str(output)),
                ("investigator.py",),
                ("chatbot_dialogue.py", "--output", str(output / "chatbot"))]
    missing = [name for name, *_ in programs if not (TOOLS_EXAMPLES / name).is_file()]
    if missing:
        print(f"skipped: the tools' demos are programs in a source checkout "
              f"(examples/tools/), and {TOOLS_EXAMPLES} does not hold {', '.join(missing)}")
    else:
        for name, *arguments in programs:
            sys.stdout.flush()  # the program's lines follow this process's, in order
            done = subprocess.run([sys.executable, str(TOOLS_EXAMPLES / name), *arguments],
                                  check=False)
            if done.returncode != 0:
                print(f"examples/tools/{name} failed (exit {done.returncode})")
                return 1
    return 0

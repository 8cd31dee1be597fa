"""Distill an authored ticket-routing policy into a keyword program and serve it.

Run: python examples/distill/route_tickets.py [SAVE_DIR]

It generates 240 tickets, runs the author loop on recorded replies (the first fails to
compile, the second is accepted), saves the program to SAVE_DIR (default
./ticket-router), serves 200 fresh tickets with the teacher as the fallback and prints
the measured table. Serve the saved program with `tensorcode route SAVE_DIR`.
"""

from __future__ import annotations

import sys

from tensorcode.distill.tickets import run_example


def main() -> int:
    save_dir = sys.argv[1] if len(sys.argv) > 1 else "ticket-router"
    for line in run_example(save_dir):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``tensorcode compile``: warm the plan cache for saved plans.

Each PATH is a plan directory written by ``plan.save(dir)`` (``plan.json`` and
``values.safetensors``). The plan is validated, lowered and compiled into the cache
(``TENSORCODE_CACHE_DIR`` or ``--cache-dir``), so the next process that loads it or
lowers the same network starts without compiling. A PATH that holds ``*/plan.json``
below it (a directory of saved plans) warms every one.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

from ..errors import ArtifactError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a saved plan directory (or a directory of them)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="the plan cache to fill (default: TENSORCODE_CACHE_DIR or "
                             "~/.cache/tensorcode)")
    parser.add_argument("--backend", default="numba", choices=["numba", "reference"],
                        help="backend to lower for (default: numba)")
    parser.add_argument("--describe", action="store_true", help="print each lowered plan")


def _plan_dirs(path: pathlib.Path) -> list[pathlib.Path]:
    if (path / "plan.json").is_file():
        return [path]
    if path.is_dir():
        found = sorted(p.parent for p in path.glob("*/plan.json"))
        if found:
            return found
    raise ArtifactError("is not a saved plan (no plan.json); save one with plan.save(dir)",
                        path=path)


def main(args: argparse.Namespace) -> int:
    if args.cache_dir:
        os.environ["TENSORCODE_CACHE_DIR"] = str(pathlib.Path(args.cache_dir).resolve())
    from .plan import Plan, cache_dir, compile_stats

    dirs = [d for p in args.paths for d in _plan_dirs(pathlib.Path(p))]
    for directory in dirs:
        before = compile_stats()
        start = time.perf_counter()
        plan = Plan.load(directory, backend=args.backend)
        after = compile_stats()
        compiled = after["compiled"] - before["compiled"]
        loaded = after["cache_loaded"] - before["cache_loaded"]
        state = "compiled" if compiled else "already cached" if loaded else "ready"
        print(f"{directory}: {state} ({plan.backend} plan {plan.key or '-'}, "
              f"{len(plan.graph)} nodes, {len(plan.schedule.kernels)} kernels, "
              f"{time.perf_counter() - start:.2f}s)")
        if args.describe:
            print(plan.describe())
    print(f"cache: {cache_dir()}")
    return 0

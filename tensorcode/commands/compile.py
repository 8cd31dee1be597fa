"""``tensorcode compile``: warm the plan cache for saved plans and saved networks.

Each PATH is a plan directory written by ``plan.save(dir)`` (``plan.json`` and
``values.safetensors``), a directory of them, or a saved algorithm artifact (a network
written by ``algorithm.save(path)``, whose executor lowers it). Each is
validated, lowered and compiled into the cache (``TENSORCODE_CACHE_DIR`` or
``--cache-dir``), so the next process that loads it, or lowers the same network, starts
without compiling.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

from ..errors import ArtifactError
from . import add_backend_flag


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``compile`` flags to ``parser``."""
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a saved plan directory (or a directory of them)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="the plan cache to fill (default: TENSORCODE_CACHE_DIR or "
                             "~/.cache/tensorcode)")
    add_backend_flag(parser)
    parser.add_argument("--describe", action="store_true", help="print each lowered plan")


def _targets(path: pathlib.Path) -> list[tuple[str, pathlib.Path]]:
    if (path / "plan.json").is_file():
        return [("plan", path)]
    if path.is_dir():
        found = sorted(p.parent for p in path.glob("*/plan.json"))
        if found:
            return [("plan", p) for p in found]
    if path.is_file():
        return [("algorithm", path)]
    raise ArtifactError("is not a saved plan (no plan.json) nor a saved algorithm; save "
                        "one with plan.save(dir) or algorithm.save(path)", path=path)


def _warm_algorithm(path: pathlib.Path, backend: str):
    from ..algorithm import load

    algorithm = load(path, executor=backend)
    return algorithm.plan


def main(args: argparse.Namespace) -> int:
    """Warm the plan cache for every saved plan or algorithm under ``args.paths``."""
    if args.cache_dir:
        os.environ["TENSORCODE_CACHE_DIR"] = str(pathlib.Path(args.cache_dir).resolve())
    from ..compiler.plans.plan import Plan, cache_dir, compile_stats

    targets = [t for p in args.paths for t in _targets(pathlib.Path(p))]
    for kind, path in targets:
        before = compile_stats()
        start = time.perf_counter()
        if kind == "plan":
            plan = Plan.load(path, backend=args.backend)
        else:
            plan = _warm_algorithm(path, args.backend)
        after = compile_stats()
        compiled = after["compiled"] - before["compiled"]
        loaded = after["cache_loaded"] - before["cache_loaded"]
        state = "compiled" if compiled else "already cached" if loaded else "ready"
        what = (f"{plan.backend} plan {plan.key or '-'}, {len(plan.graph)} nodes, "
                f"{len(plan.schedule.kernels)} kernels" if plan is not None else kind)
        print(f"{path}: {state} ({what}, {time.perf_counter() - start:.2f}s)")
        if args.describe and plan is not None:
            print(plan.describe())
    print(f"cache: {cache_dir()}")
    return 0

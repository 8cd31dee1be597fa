"""A small transformer's training step against its PyTorch eager twin.

The ``Chatbot``'s transformer (``tc.nn``'s ``Gpt``: 2 layers, 2 heads, width 32 or 64,
context 64 or 128) trained by its ``Trainer`` with Adam on 16 rows of real text per
step: pairs of consecutive lines of this repository's ``docs/*.md`` (lower-cased, cut to
the Chatbot's alphabet and to half the context, so a pair fills one row), against
``torch_gpt_twin`` (SDPA attention) with ``torch.optim.Adam`` on the same rows and the
same masked cross-entropy. Both run on one thread in one fresh process per shape, in
alternating rounds of six steps (so load on a shared machine hits both alike); each
side reports its best round and its median round per step.

``python -m benchmarks.transformer_step [--root CHECKOUT] [--quick] [--profile]`` prints
the rows; ``--root`` times another checkout of TensorCode (an earlier commit, say) with
this script; ``--profile`` prints instead where our step's milliseconds go, per kernel
kind (``compiler/backends/profiling.py``).
"""

from __future__ import annotations

import argparse
import pathlib
import textwrap

from .harness import Row, format_table, module_available

SUITE = "gpt"
#: (width, context) of each measured shape
SHAPES = ((32, 64), (32, 128), (64, 64), (64, 128))
ROWS = 16

_SCRIPT = textwrap.dedent("""
    import glob, itertools, json, statistics, sys, time
    sys.path.insert(0, {root!r})
    import numpy as np
    import tensorcode as tc
    from tensorcode.tools import Chatbot
    from tensorcode.tools.chatbot import ALPHABET
    from tensorcode.training import Trainer
    tc.set_num_threads(1)
    dim, context, rows, rounds = {dim}, {context}, {rows}, {rounds}
    allowed, corpus = set(ALPHABET), []
    for path in sorted(glob.glob({docs!r} + "/*.md")):
        for line in open(path, encoding="utf-8").read().splitlines():
            kept = " ".join("".join(c for c in line.lower() if c in allowed).split())
            if len(kept) >= 8:
                corpus.append(kept[:context // 2 - 2])
    pairs = list(itertools.pairwise(corpus))[:6 * rows]
    batches = [([p[0] for p in pairs[k:k + rows]], [p[1] for p in pairs[k:k + rows]])
               for k in range(0, len(pairs), rows)]
    bot = Chatbot({{"context": context, "dim": dim}})
    trainer = Trainer.from_tool(bot, lr=0.01, optimizer=lambda _: tc.optim.Adam())
    experiences = [trainer.capture(i, t, source="docs") for i, t in batches]
    started = time.perf_counter()
    if {profile}:  # every kernel of the step's plans timed (llvm; see profiling.py)
        from tensorcode.compiler.backends.profiling import kernel_times, profiling
        with profiling():
            trainer.fit(experiences, epochs=1, progress=False)
    else:
        trainer.fit(experiences, epochs=1, progress=False)
    first = time.perf_counter() - started
    if {profile}:
        for e in experiences:
            trainer.step(e)
        kernel_times(reset=True)
        begin = time.perf_counter()
        for _ in range(rounds):
            for e in experiences:
                trainer.step(e)
        steps = rounds * len(experiences)
        wall = (time.perf_counter() - begin) / steps
        kinds = {{}}
        for t in kernel_times(reset=True):
            kind = kinds.setdefault(t.label, [0.0, 0, 0.0])
            kind[0] += t.seconds / steps
            kind[1] += 1
            kind[2] += t.cost.flops * t.calls / steps
        print(json.dumps(dict(wall=wall, kinds=kinds)))
        sys.exit()

    def ours():
        for e in experiences:
            trainer.step(e)
    sides = {{"tensorcode": ours}}
    if {torch}:
        import torch
        import torch.nn.functional as F
        from benchmarks.torch_gpt_twin import gpt_twin
        torch.set_num_threads(1)
        torch.manual_seed(0)
        c = bot.config
        model = gpt_twin(bot.vocab, context, dim, c["heads"], c["layers"])
        twin_batches = []
        for i, t in batches:
            ids, _, _ = bot.teacher_rows(i, t)
            twin_batches.append((torch.from_numpy(ids),
                                 torch.from_numpy(bot.check_target(i, t))))
        adam = torch.optim.Adam(model.parameters(), lr=0.01)

        def twin():
            for ids, onehot in twin_batches:
                adam.zero_grad()
                logits = model(ids)
                loss = -(F.log_softmax(logits, -1) * onehot).sum() / onehot.sum().clamp(min=1)
                loss.backward()
                adam.step()
        sides["torch eager"] = twin
    times = {{name: [] for name in sides}}
    for round_ in range(rounds + 2):
        for name, run in sides.items():
            begin = time.perf_counter()
            run()
            if round_ >= 2:  # two warm rounds
                times[name].append((time.perf_counter() - begin) / len(batches))
    out = {{name: [min(t), statistics.median(t)] for name, t in times.items()}}
    out["rows"] = [len(bot.teacher_rows(i, t)[0]) for i, t in batches]
    out["first_fit"] = first
    out["version"] = torch.__version__ if {torch} else None
    print(json.dumps(out))
""")


def measure(dim: int, context: int, rounds: int, root: pathlib.Path | None = None,
            profile: bool = False) -> dict:
    """Best and median seconds per step of each side for one shape (see the module doc),
    in a fresh one-thread process; ``root``: the TensorCode checkout to time. With
    ``profile``, TensorCode's step alone, kernel by kernel: the wall time per step and,
    per kernel kind, ``[seconds per step, kernels, flops per step]``."""
    import subprocess
    import sys

    from .compiler_llvm import environment
    from .suite_gpt import ROOT

    code = _SCRIPT.format(root=str(root or ROOT), docs=str(ROOT / "docs"), dim=dim,
                          context=context, rows=ROWS, rounds=rounds,
                          torch=module_available("torch") and not profile, profile=profile)
    env = environment(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=1800, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{result.stderr[-2000:]}")
    import json
    return json.loads(result.stdout.strip().splitlines()[-1])


def step_rows(quick: bool, root: pathlib.Path | None = None, label: str = "tensorcode"
              ) -> list[Row]:
    """A row per side and shape (``quick``: width 32 at context 128 only)."""
    rows = []
    for dim, context in ((32, 128),) if quick else SHAPES:
        out = measure(dim, context, 4 if quick else 8, root)
        workload = (f"Chatbot transformer train step 2x{dim} T={context} {ROWS} rows Adam "
                    "(docs text)")
        ours = out["tensorcode"]
        rows.append(Row(SUITE, workload, label, ours[0] * 1e3, unit="ms",
                        note=f"best round; median {ours[1] * 1e3:.2f} ms; rows per step "
                             f"{sorted(set(out['rows']))}; first fit (compiles) "
                             f"{out['first_fit']:.1f} s"))
        if "torch eager" in out:
            torch = out["torch eager"]
            rows.append(Row(SUITE, workload, "torch eager", torch[0] * 1e3, unit="ms",
                            note=f"torch {out['version']} eager, SDPA, one thread, "
                                 f"alternated with ours; median {torch[1] * 1e3:.2f} ms; "
                                 f"{torch[0] / ours[0]:.2f}x ours (best), "
                                 f"{torch[1] / ours[1]:.2f}x (median)"))
    return rows


def profile_table(dim: int, context: int, root: pathlib.Path | None = None) -> str:
    """The step's milliseconds per kernel kind, largest first (``measure``'s profile)."""
    out = measure(dim, context, 5, root, profile=True)
    kinds = out["kinds"]
    total = sum(k[0] for k in kinds.values())
    lines = [f"2x{dim} T={context}: wall {out['wall'] * 1e3:.2f} ms per step, kernels "
             f"{total * 1e3:.2f} ms"]
    for name, (seconds, count, flops) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        rate = f"  {flops / seconds / 1e9:6.1f} GFLOP/s" if name == "matmul" else ""
        lines.append(f"  {name:<16} {count:3d} kernels {seconds * 1e3:7.3f} ms "
                     f"{seconds / total:4.0%}{rate}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, default=None,
                        help="the TensorCode checkout to time (default: this one)")
    parser.add_argument("--quick", action="store_true", help="width 32, context 128 only")
    parser.add_argument("--profile", action="store_true",
                        help="our step's time per kernel kind instead (llvm, one thread)")
    args = parser.parse_args()
    if args.profile:
        for dim, context in ((32, 128),) if args.quick else SHAPES:
            print(profile_table(dim, context, args.root))
        return
    rows = step_rows(args.quick, args.root, "tensorcode" if args.root is None
                     else f"tensorcode ({args.root})")
    print(format_table(rows))


if __name__ == "__main__":
    main()


__all__ = ["measure", "profile_table", "step_rows", "SHAPES"]

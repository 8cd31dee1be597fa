"""Where a GPT's milliseconds go: time per kernel kind, forward and training step.

In a fresh process at one thread (``OPENBLAS_NUM_THREADS=1``, ``tc.set_num_threads(1)``)
the model's plans are lowered inside ``profiling()``, so each kernel call of their
compiled ``body`` is timed (``tensorcode.compiler.backends.profiling``), then run
``repeat`` times. Each kind of kernel gets its milliseconds per forward (or step) and
its rate: GFLOP/s for the BLAS matrix products, against the same shapes through NumPy's
``@`` (one-thread ``sgemm``) timed in the same process; GB/s for every other kind (each
operand's bytes once), against the traffic of a large copy measured in the same run.
The kernels' sum beside the wall time shows what lies outside kernels (Python between
plans, the optimizer's update). The same plans are profiled again with the layer norms
and softmaxes found by pattern as kernels of their own (``schedule.FUSED_PATTERNS``,
off by default), alternated with the default (each side keeps the better of two
profiles), so the two totals compare in one run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from .harness import Row

#: the kernel kinds ``schedule.FUSED_PATTERNS`` adds
PATTERN_KINDS = ("layer_norm", "softmax")

_SCRIPT = textwrap.dedent("""
    import json, statistics, sys, time
    import numpy as np
    sys.path.insert(0, {root!r})
    import tensorcode as tc
    from tensorcode.compiler.backends.profiling import kernel_times, profiling
    from tensorcode.models import gpt2
    from tensorcode.nn.transformer import GptConfig
    tc.set_num_threads(1)
    config = GptConfig(**{shape!r})
    T, V, repeat, train = {context}, config.vocab_size, {repeat}, {train}
    rng = np.random.default_rng(0)

    def profile(run):
        run(); run()
        kernel_times(reset=True)
        begin = time.perf_counter()
        for _ in range(repeat):
            run()
        wall = (time.perf_counter() - begin) / repeat
        kinds, shapes = {{}}, {{}}
        for t in kernel_times(reset=True):
            if not t.calls:
                continue
            row = kinds.setdefault(t.label, dict(seconds=0.0, flops=0.0, bytes=0.0,
                                                 kernels=0))
            row["seconds"] += t.seconds / repeat
            row["flops"] += t.cost.flops * t.calls / repeat
            row["bytes"] += t.cost.bytes * t.calls / repeat
            row["kernels"] += 1
            if t.label == "matmul":
                shapes[t.cost.shape] = shapes.get(t.cost.shape, 0) + t.calls / repeat
        return dict(wall=wall, kinds=kinds, sgemm=sgemm(shapes))

    def sgemm(shapes):
        total = 0.0
        for shape, n in shapes.items():
            *batch, m, k, cols = shape
            a = rng.standard_normal((*batch, m, k)).astype(np.float32)
            b = rng.standard_normal((*batch, k, cols)).astype(np.float32)
            out = np.empty((*batch, m, cols), np.float32)
            samples = []
            for _ in range(15):
                begin = time.perf_counter(); np.matmul(a, b, out=out)
                samples.append(time.perf_counter() - begin)
            total += statistics.median(samples[3:]) * n
        return total

    from tensorcode.compiler.lower import schedule
    ids = rng.integers(0, V, (1, T))
    batch, targets = rng.integers(0, V, (16, T)), rng.integers(0, V, (16, T))
    sides = {{}}
    for patterns in (False, True):  # the default, and with the kernels found by pattern
        schedule.FUSED_PATTERNS = patterns
        with profiling():
            model = gpt2.GptModel(config, seed=0, context=T)
            model.logits(ids)
            trained = optimizer = None
            if train:
                trained = gpt2.GptModel(config, batch=16, context=T)
                optimizer = tc.optim.AdamW(weight_decay=0.01)
                trained.train_step(batch, targets, optimizer, 1e-3)
        sides[patterns] = (model, trained, optimizer)
    schedule.FUSED_PATTERNS = False
    measured = {{}}
    for patterns in (False, True, True, False):  # each side's better of two, alternated
        model, trained, optimizer = sides[patterns]
        suffix = "_patterns" if patterns else ""
        parts = [("forward", lambda: model.logits(ids))]
        if train:
            parts.append(("step", lambda: trained.train_step(batch, targets, optimizer,
                                                             1e-3)))
        for part, run in parts:
            found = profile(run)
            kept = measured.get(part + suffix)
            if kept is None or sum(k["seconds"] for k in found["kinds"].values()) < \
                    sum(k["seconds"] for k in kept["kinds"].values()):
                measured[part + suffix] = found
    a = np.ones(16 << 20, np.float32); b = np.empty_like(a)
    copies = []
    for _ in range(6):
        begin = time.perf_counter(); np.copyto(b, a); copies.append(time.perf_counter() - begin)
    bandwidth = 2 * a.nbytes / statistics.median(copies[1:])
    print(json.dumps(dict(measured, bandwidth=bandwidth)))
""")


def profile(shape: dict, repeat: int, context: int, train: bool = True) -> dict:
    """The per-kind tables of ``shape``'s forward (B=1, T=``context``) and, with
    ``train``, its training step (B=16, AdamW), measured in a fresh one-thread process."""
    from .compiler_llvm import environment
    from .suite_gpt import ROOT

    code = _SCRIPT.format(root=str(ROOT), shape=shape, repeat=repeat, context=context,
                          train=train)
    env = environment(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=1800, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def kernel_rows(suite: str, label: str, shape: dict, repeat: int, context: int,
                train: bool = True) -> list[Row]:
    """One row per kernel kind of the forward and (``train``) of the training step (see
    the module doc), largest first, and the total rows against the wall time."""
    out = profile(shape, repeat, context, train)
    bandwidth = out["bandwidth"]
    rows = []
    parts = [("forward", f"forward B=1 T={context}")]
    if train:
        parts.append(("step", f"train step B=16 T={context} AdamW"))
    for part, name in parts:
        measured = out[part]
        kinds = measured["kinds"]
        total = sum(k["seconds"] for k in kinds.values())
        for kind, k in sorted(kinds.items(), key=lambda item: -item[1]["seconds"]):
            seconds = k["seconds"]
            if kind == "matmul":
                rate = k["flops"] / seconds / 1e9
                sgemm = measured["sgemm"]
                note = (f"{rate:.1f} GFLOP/s; the same shapes by one-thread sgemm (numpy @) "
                        f"{k['flops'] / sgemm / 1e9:.1f} GFLOP/s, {sgemm * 1e3:.3f} ms: "
                        f"{sgemm / seconds:.0%} of it")
            else:
                rate = k["bytes"] / seconds / 1e9
                note = (f"{rate:.1f} GB/s ({k['bytes'] / 1e6:.2f} MB), "
                        f"{rate * 1e9 / bandwidth:.0%} of copy traffic "
                        f"{bandwidth / 1e9:.1f} GB/s")
                if k["flops"]:
                    note += f"; {k['flops'] / seconds / 1e9:.2f} GFLOP/s"
            rows.append(Row(suite, f"{label} {name}: {kind}", f"{k['kernels']} kernels",
                            seconds * 1e3, unit="ms",
                            note=f"{seconds / total:.0%} of kernel time; {note}"))
        rows.append(Row(suite, f"{label} {name}: all kernels", "profiled", total * 1e3,
                        unit="ms", note=f"wall {measured['wall'] * 1e3:.2f} ms per call "
                                        f"(profiled plans, one thread); the rest is "
                                        "outside kernels"))
        patterns = out[part + "_patterns"]
        found = {k: v for k, v in patterns["kinds"].items() if k in PATTERN_KINDS}
        with_patterns = sum(k["seconds"] for k in patterns["kinds"].values())
        rest = total - kinds.get("matmul", {}).get("seconds", 0.0)
        rest_patterns = with_patterns - patterns["kinds"].get("matmul", {}).get("seconds", 0.0)
        rows.append(Row(suite, f"{label} {name}: all kernels", "with FUSED_PATTERNS",
                        with_patterns * 1e3, unit="ms",
                        note="the same plans with layer norms and softmaxes as kernels of "
                             "their own (off by default), alternated with the default: "
                             + ", ".join(f"{kind} {k['kernels']} kernels "
                                         f"{k['seconds'] * 1e3:.3f} ms"
                                         for kind, k in sorted(found.items()))
                             + f"; kernels other than BLAS {rest_patterns * 1e3:.3f} ms "
                               f"against {rest * 1e3:.3f} ms by default"))
    return rows


__all__ = ["kernel_rows", "profile"]

"""Weight patches: what hash pinning and exact rebuilding cost against plain NumPy.

``Patch.apply`` hashes the base tensor (SHA-256 over its bytes), rebuilds it, hashes the
result and counts changed elements; the NumPy peers do only the rebuild (a copy plus a
fancy-index assignment, or ``W + a @ b`` through BLAS) with no checks. The ratio is the
price of refusing a wrong base and of bit-reproducible structured forms. The last
workloads are the edit-statement front end: parse a reply and record the patch, and
parse replies at the parser's documented bounds.
"""

from __future__ import annotations

import numpy as np

from .harness import Row, median_time

SUITE = "weights"


def run(quick: bool) -> list[Row]:
    from tensorcode.weights import LowRank, Patch, build, diff

    rows: list[Row] = []
    repeat = 5 if quick else 20
    rng = np.random.default_rng(0)

    # Sparse: 1% of a 1024 x 1024 float32 tensor.
    w = rng.standard_normal((1024, 1024)).astype(np.float32)
    edited = w.copy()
    indices = np.sort(rng.choice(w.size, w.size // 100, replace=False))
    edited.reshape(-1)[indices] = 0.0
    patch = diff({"w": w}, {"w": edited})
    values = edited.reshape(-1)[indices]

    def numpy_sparse():
        out = w.copy()
        out.reshape(-1)[indices] = values
        return out

    workload = "apply sparse 1% of 1024x1024 f32"
    rows.append(Row(SUITE, workload, "tensorcode", 1e6 * median_time(
        lambda: patch.apply({"w": w}), repeat=repeat, warmup=1), note="hashes base+result"))
    rows.append(Row(SUITE, workload, "numpy-assign", 1e6 * median_time(
        numpy_sparse, repeat=repeat, warmup=1), note="copy + assign, no checks"))

    # Low rank r = 4 on the same tensor.
    a = rng.standard_normal((1024, 4))
    b = rng.standard_normal((4, 1024))
    lowrank = build({"w": w}, {"w": LowRank(a, b)})
    workload = "apply lowrank r=4 1024x1024 f32"
    rows.append(Row(SUITE, workload, "tensorcode", 1e6 * median_time(
        lambda: lowrank.apply({"w": w}), repeat=repeat, warmup=1),
        note="float64, fixed order, hashes"))
    rows.append(Row(SUITE, workload, "numpy-blas", 1e6 * median_time(
        lambda: (w.astype(np.float64) + a @ b).astype(np.float32), repeat=repeat, warmup=1),
        note="W + a @ b via BLAS, no checks"))

    # Edit statements: parse 1000 statements and record the patch.
    base = {"w": w}
    lines = [f"w[{int(i)}, {int(j)}] = {int(v)}" for i, j, v in
             zip(rng.integers(0, 1024, 1000), rng.integers(0, 1024, 1000),
                 rng.integers(-999, 999, 1000))]
    text = "\n".join(lines) + "\n"
    scales = {"w": 0.01}
    seconds = median_time(lambda: Patch.from_edits(base, text, scales=scales),
                          repeat=max(3, repeat // 2), warmup=1)
    rows.append(Row(SUITE, "edit reply: 1000 statements", "tensorcode", 1000 / seconds,
                    unit="stmt/s", lower_is_better=False, note="parse + apply + diff"))

    # The parser at its documented bounds (MAX_STATEMENTS, MAX_NUMBERS): seconds per reply.
    from tensorcode.weights.edits import MAX_NUMBERS, MAX_STATEMENTS, parse_edits

    count = MAX_STATEMENTS - 1
    statements = "\n".join(f"w[{i % 1024}, {i % 997}] = {i % 999}" for i in range(count))
    numbers = "w = [" + ",".join(str(i % 10) for i in range(MAX_NUMBERS)) + "]"
    for workload, reply in ((f"edit parse: {count:,} statements", statements),
                            (f"edit parse: a list of {MAX_NUMBERS:,} numbers", numbers)):
        seconds = median_time(lambda reply=reply: parse_edits(reply), repeat=1 if quick else 3,
                              warmup=0)
        rows.append(Row(SUITE, workload, "tensorcode", seconds, unit="s", baseline=True,
                        note="parse_edits at the bound (linear scanner; lark only diagnoses)"))
    return rows

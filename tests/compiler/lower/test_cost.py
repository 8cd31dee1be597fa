"""Each kernel's cost: flops of products and fused kernels, bytes each operand once."""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.compiler.lower.cost import kernel_cost


def test_costs_count_products_elementwise_work_and_gathered_rows():
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    table = tape.parameter(rng.standard_normal((1000, 64)).astype(np.float32), name="table")
    ids = tape.input(rng.integers(0, 1000, (8,)), name="ids")
    w = tape.parameter(rng.standard_normal((64, 96)).astype(np.float32), name="w")
    rows = table.take(ids, axis=0)
    y = tc.tanh(rows @ w)
    network = tape.into_network()
    plan = network.entry([y]).lower("llvm")
    costs = {k.kind: kernel_cost(plan.graph, k) for k in plan.schedule.kernels}
    assert costs["matmul"].flops == 2 * 8 * 64 * 96
    assert costs["matmul"].label == "matmul"  # 8 * 64 * 96 multiply-adds: BLAS
    assert costs["take"].bytes == 2 * 8 * 64 * 4 + 8 * 8  # the rows, not the table
    fused = costs["fused"]
    assert fused.label == "fused" and fused.flops == 8 * 96 and fused.bytes == 2 * 8 * 96 * 4

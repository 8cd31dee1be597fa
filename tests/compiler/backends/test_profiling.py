"""Per-kernel profiles: a profiled llvm plan counts each kernel's time and computes what
the plain plan computes."""

from __future__ import annotations

import numpy as np

import tensorcode as tc
from tensorcode.compiler.backends.profiling import kernel_times, profiling


def _network():
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    data = rng.standard_normal((64, 96)).astype(np.float32)
    x = tape.input(data, name="x")
    w = tape.parameter(rng.standard_normal((96, 80)).astype(np.float32), name="w")
    b = tape.parameter(rng.standard_normal((80,)).astype(np.float32), name="b")
    y = tc.tanh(x @ w + b)
    loss = (y * y).mean()
    return tape.into_network(), [y, loss], data


def test_a_profiled_plan_counts_every_kernel_and_computes_the_same():
    network, roots, data = _network()
    plain = network.entry(roots).lower("llvm")
    with profiling():
        profiled = network.entry(roots).lower("llvm")
    assert profiled.key != plain.key
    assert "tc_profile" in profiled.source() and "tc_profile" not in plain.source()
    parameters = network.parameters()
    before = {t.plan for t in kernel_times()}
    for out_plain, out_profiled in zip(plain.bind(parameters)(data),
                                         profiled.bind(parameters)(data)):
        np.testing.assert_array_equal(out_plain, out_profiled)
    kernel_times(reset=True)
    run = profiled.bind(parameters)
    for _ in range(5):
        run(data)
    times = [t for t in kernel_times() if t.plan == profiled.key]
    assert plain.key not in before | {t.plan for t in kernel_times()}
    assert len(times) == len(profiled.schedule.kernels)
    assert all(t.calls == 5 and t.seconds >= 0 for t in times)
    assert sum(t.seconds for t in times) > 0
    (matmul,) = [t for t in times if t.label == "matmul"]
    assert matmul.cost.flops == 2 * 64 * 96 * 80
    assert matmul.cost.shape == (64, 96, 80)
    assert matmul.cost.bytes == 4 * (64 * 96 + 96 * 80 + 64 * 80)
    assert {t.label for t in times} >= {"matmul", "fused reduction"}
    kernel_times(reset=True)
    assert all(t.calls == 0 and t.seconds == 0 for t in kernel_times() if t.plan == profiled.key)

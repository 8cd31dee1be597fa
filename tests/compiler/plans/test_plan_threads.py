"""Plans of both compiled backends release the GIL while their compiled code runs, and
one plan serves many threads at once (every call allocates its own scratch and output
buffers)."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tensorcode as tc

N = 96


@pytest.fixture(scope="module", params=["llvm", "numba"])
def matmul_plan(request):
    tape = tc.Tape()
    w = tape.parameter(np.linspace(-1, 1, N * N, dtype=np.float32).reshape(N, N), name="w")
    x = tape.input(np.ones((N, N), np.float32), name="x")
    y = (x @ w).tanh()
    network = tape.into_network()
    return network, network.entry([y]).lower(request.param), x, y


def other_thread_ran_during(call, repeats: int) -> bool:
    """Whether this thread got to run while another thread was making ``repeats`` calls.

    The switch interval is raised far above the calls' duration, so the interpreter never
    forces the worker to give up the GIL: this thread can run before the worker is done
    only if the calls release the GIL themselves. No timing is measured."""
    started = threading.Event()
    finished: list[bool] = []

    def worker() -> None:
        started.set()
        for _ in range(repeats):
            call()
        finished.append(True)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(60.0)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        started.wait()
        ran = not finished
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    return ran


def test_plans_compile_nogil_and_release_the_gil(matmul_plan):
    network, plan, x, _ = matmul_plan
    parameters = network.parameters()
    fn, _ = plan.bind(parameters).flat
    if plan.backend == "numba":
        assert fn.func.targetoptions["nogil"] is True  # the compiled entry point itself
    # (an llvm plan is called through ctypes.CFUNCTYPE, which releases the GIL)
    feed = np.full((N, N), 0.5, np.float32)
    fn(feed)
    # many calls: on a busy machine this thread must be scheduled in one of their windows
    assert other_thread_ran_during(lambda: plan.forward(parameters, {x: feed}), 500)

    def held() -> None:  # the control: pure Python keeps the GIL between forced switches
        total = 0
        for i in range(100_000):
            total += i

    assert not other_thread_ran_during(held, 3)


def test_one_plan_many_threads_same_results(matmul_plan):
    network, plan, x, y = matmul_plan
    parameters = network.parameters()
    feeds = [np.full((N, N), k / 8, np.float32) for k in range(8)]

    def step(feed):
        return plan.forward(parameters, {x: feed}).of(y)

    serial = [step(feed) for feed in feeds]
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(step, feeds))
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(serial[1], serial[2])


@pytest.mark.parametrize("backend", ["llvm", "numba"])
def test_run_steps_releases_the_gil_for_the_whole_what_if(backend):
    # the scaling form of the guide's parallel what-ifs: one run_steps call per thread
    tape = tc.Tape()
    xs = np.linspace(-1, 1, 256, dtype=np.float32).reshape(256, 1)
    mlp = tc.nn.Mlp(tape, [1, 32, 1], activation="tanh", init=tc.init.xavier(7))
    error = mlp(tape.input(xs, name="x")) - tape.input(np.sin(xs), name="y")
    adjoints = tape.differentiate((error * error).mean(), mlp.parameters())
    network = tape.into_network()
    step_plan = network.entry(adjoints.roots()).lower(backend, optimizer=tc.optim.Sgd())
    initial = network.parameters()

    def what_if() -> None:
        step_plan.run_steps(initial.clone(), tc.optim.Sgd(), {}, [0.01] * 200)

    what_if()
    assert other_thread_ran_during(what_if, 20)


def test_bound_scalars_many_threads_same_numbers():
    # llvm's ``bound.scalars`` hands back numbers and reuses one output arena per thread
    # (Numba's compiled ``run_scalars`` keeps its outputs on its own stack)
    backend = "llvm"
    tape = tc.Tape()
    features = tape.input(np.zeros(3), name="features")
    w = tape.parameter(np.array([0.5, -1.0, 2.0]), name="w")
    score = (features * w).sum()
    square = score * score
    network = tape.into_network()
    call = network.entry([score, square]).lower(backend) \
        .bind(network.parameters()).scalars
    cases = [np.array([k, 1.0 - k, k / 3]) for k in range(64)]

    def run(case: np.ndarray) -> tuple:
        return tuple(call(case) for _ in range(50))

    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(run, cases))
    for case, answers in zip(cases, threaded):
        expected = float(case @ np.array([0.5, -1.0, 2.0]))
        assert all(a == pytest.approx((expected, expected * expected)) for a in answers)

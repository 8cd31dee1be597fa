"""Three parameter states trained on three threads over one network.

The Topos guide's ``gradient_descent`` ("Learning rates are clones": "Parallel what-ifs
work the same way: clone the table per thread, share the network by reference"). One
sealed network and its compiled plans are shared by every thread; each thread owns a
clone of the same initial table and its own learning rate. The spec has no lock to fight
over and a plan call releases the GIL while its compiled code runs.

What a thread gains is bounded by the Python it runs between plan calls, which holds the
GIL: the guide's loop (``forward``, ``recorded_gradients``, ``Parameters.step``) spends
longer in Python than in the plan on a network this small, so three such loops on
threads are no faster than one after another. The form that scales is a step plan
(``entry.lower(optimizer=...)``, lowered once and shared like the network) whose
``run_steps`` takes every step of a what-if in one compiled call: one call per thread,
the GIL released for the whole what-if, so the what-ifs run side by side on as many
cores as are free (``python -m benchmarks --only parallel`` measures it). What they gain
is then the machine's: run_steps calls on threads keep pace with GIL-free NumPy work
when the what-ifs divide evenly over the cores (four on two cores: ``fused(..., rates=)``
takes any number). Three equal what-ifs on two cores share them only when the system
time-slices the three threads, which it does at a granularity of milliseconds: a
what-if must last tens of them, so the example runs ``STEPS`` (1000) steps of about 45
microseconds each. With 300 steps the third thread mostly waited for a core and the
three gained about 1.45x; with 1000, 1.65x to 1.9x on an idle 2-core machine. A
scheduler that never slices equal threads (``chrt -f``, the real-time FIFO policy)
holds three what-ifs on two cores to 1.5x.

The program checks that the guide's loop on threads equals it serially, and that
``run_steps`` per thread equals the loop, bit for bit; it prints the speed-up of
``run_steps`` on threads over the same calls one after another (informative: it depends
on the machine and its load).

    python examples/guide/gradient_descent.py [--steps N]
"""

from __future__ import annotations

import os

# the threads here are the program's own: one BLAS thread each (set before NumPy and
# SciPy load OpenBLAS), so OpenBLAS's own pool does not fight them for the cores
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

import tensorcode as tc

LEARNING_RATES = (0.002, 0.005, 0.01)
STEPS = 1000  # per what-if: long enough for the system to time-slice three threads


@dataclass
class Problem:
    """One sealed network and the plan every thread shares."""

    network: tc.Network
    plan: tc.Plan
    adjoints: tc.Adjoints
    loss: tc.Expr
    step_plan: tc.Plan  # a step plan (entry.lower(optimizer=...)): it has run_steps


def build(samples: int = 256, hidden: int = 64) -> Problem:
    """A tanh MLP fit to a noisy sine: the samples are the input defaults, so a step needs
    no feeds (they are run state, never part of the spec)."""
    xs = tc.init.uniform(3, 3.0)((samples, 1))
    noise = tc.init.normal(5, 0.1)((samples, 1))
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [1, hidden, 1], activation="tanh", init=tc.init.xavier(7))
    error = mlp(tape.input(xs, name="x")) - tape.input(np.sin(xs) + noise, name="y")
    loss = (error * error).mean()
    adjoints = tape.differentiate(loss, mlp.parameters())
    network = tape.into_network()
    entry = network.entry(adjoints.roots())
    # the step plan fuses tc.optim.Sgd (``p - lr * g``, the loop's rule) into the plan:
    # lowered once, here, and shared by every thread like the network
    return Problem(network, entry.lower(), adjoints, loss,
                   entry.lower(optimizer=tc.optim.Sgd()))


def train(problem: Problem, initial: tc.Parameters, learning_rate: float, steps: int
          ) -> tuple[tc.Parameters, list[float]]:
    """Plain gradient descent from ``initial`` (a table this call owns): the guide's loop."""
    parameters = initial
    losses = []
    for _ in range(steps):
        run = problem.plan.forward(parameters)
        losses.append(float(run.of(problem.loss)))
        gradients = run.recorded_gradients(problem.adjoints)
        parameters = parameters.step(gradients, lambda p, g: p - g * learning_rate)
    return parameters, losses


def serial(problem: Problem, steps: int) -> list[tuple[tc.Parameters, list[float]]]:
    """The three what-ifs one after another on this thread."""
    initial = problem.network.parameters()
    return [train(problem, initial.clone(), rate, steps) for rate in LEARNING_RATES]


def threaded(problem: Problem, steps: int) -> list[tuple[tc.Parameters, list[float]]]:
    """The three what-ifs on three threads: a clone of the table each, one network."""
    initial = problem.network.parameters()
    with ThreadPoolExecutor(max_workers=len(LEARNING_RATES)) as pool:
        futures = [pool.submit(train, problem, initial.clone(), rate, steps)
                   for rate in LEARNING_RATES]
        return [future.result() for future in futures]


def fused(problem: Problem, steps: int, threads: bool = True,
          rates: tuple[float, ...] = LEARNING_RATES
          ) -> list[tuple[tc.Parameters, list[float]]]:
    """The what-ifs (one per learning rate in ``rates``, the three of the guide by
    default), each as one ``run_steps`` call: ``tc.optim.Sgd`` (``p - lr * g``, the loop's
    rule) fused into a step plan, a clone of the table and an optimizer per what-if (the
    step plan is shared, like the network). With ``threads`` each call runs on its own
    thread; without, one after another on this thread."""
    step_plan = problem.step_plan
    initial = problem.network.parameters()

    def train_fused(rate: float) -> tuple[tc.Parameters, list[float]]:
        parameters = initial.clone()  # donated: run_steps updates it in place
        losses = step_plan.run_steps(parameters, tc.optim.Sgd(), {}, [rate] * steps)
        return parameters, [float(loss) for loss in losses]

    if not threads:
        return [train_fused(rate) for rate in rates]
    with ThreadPoolExecutor(max_workers=len(rates)) as pool:
        return list(pool.map(train_fused, rates))


def timed(run, *args) -> tuple[float, list[tuple[tc.Parameters, list[float]]]]:
    """Seconds one call of ``run(*args)`` took, and what it returned."""
    start = time.perf_counter()
    result = run(*args)
    return time.perf_counter() - start, result


def same(a: list[tuple[tc.Parameters, list[float]]],
         b: list[tuple[tc.Parameters, list[float]]]) -> bool:
    """Bit-for-bit equality of every final table and loss curve."""
    return all(pa.equals(pb) and la == lb for (pa, la), (pb, lb) in zip(a, b))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args(argv)
    problem = build(args.samples, args.hidden)
    threaded(problem, 2)  # warm up: compile or load the plan, start the pool once
    fused(problem, 2)  # and the step plan's run_steps

    loop_s, one_by_one = timed(serial, problem, args.steps)
    loop_threads_s, side_by_side = timed(threaded, problem, args.steps)
    assert same(one_by_one, side_by_side), "threaded training differs from serial"
    for rate, (_, losses) in zip(LEARNING_RATES, side_by_side):
        print(f"lr {rate}: loss {losses[0]:.4f} -> {losses[-1]:.4f} after {args.steps} steps")
    print("threaded == serial, table for table and loss for loss: True")
    print(f"the guide's loop: serial {loop_s * 1e3:.1f} ms, {len(LEARNING_RATES)} threads "
          f"{loop_threads_s * 1e3:.1f} ms (its Python between plan calls holds the GIL)")

    fused_serial_s, in_turn = timed(fused, problem, args.steps, False)
    fused_s, in_one_call = timed(fused, problem, args.steps)
    assert same(in_turn, in_one_call), "run_steps on threads differs from serial"
    print(f"run_steps, one call per thread == the loop, bit for bit: "
          f"{same(in_one_call, one_by_one)}")
    print(f"run_steps: serial {fused_serial_s * 1e3:.1f} ms, {len(LEARNING_RATES)} threads "
          f"{fused_s * 1e3:.1f} ms: speed-up {fused_serial_s / fused_s:.2f}x on "
          f"{os.cpu_count()} CPUs ({loop_s / fused_s:.2f}x the serial loop; measured, "
          f"not asserted)")

if __name__ == "__main__":
    main()

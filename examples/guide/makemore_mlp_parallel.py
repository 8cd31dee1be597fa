"""A minibatch sharded across threads, the shard gradients summed as tables.

The Topos guide's ``makemore_mlp_parallel`` ("Learning rates are clones": it "shards a
minibatch across threads and sums the shard gradients as tables"). A character-level
MLP language model with makemore's sizes: three characters of context, an embedding
table of 10, one tanh hidden layer of 200, a softmax over the next character. The
network is recorded over one shard; each step draws a minibatch, splits its shards into
one group of consecutive shards per thread (the calling thread takes the first group, a
pool the others: no thread sits idle waiting for the step), each thread gathers its
examples, runs the shared plan on them (plan calls release the GIL) and sums its shards'
gradients as tables, and the step averages the group sums with table arithmetic:
``sum(shards) / n``, the gradient of the whole minibatch's mean loss.

What the threads gain is bounded by what runs alone each step: the calling thread sums
the group tables and takes ``Parameters.step`` (the minibatches are drawn up front) while
the other threads wait, and every thread reads the new parameters afresh. So a thread's
share of a step must dwarf that: two shards of 1024 examples through makemore's hidden
layer of 200 per thread gain more than shards of 512 (with 64 hidden units a call is
under half as long and the step's own work weighs nearly as much as the calls). Each thread
calls BLAS with one thread of its own. Minibatches are drawn with replacement, as
makemore does, so a minibatch may be larger than the data set.

The program checks that the threaded training equals the same computation done serially,
bit for bit, and prints the measured speed-up (informative, never asserted;
``python -m benchmarks --only parallel`` measures it too).

    python examples/guide/makemore_mlp_parallel.py [--steps N] [--threads T]

The names below were written for TensorCode's example (no external data set is read).
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

NAMES = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper",
         "evelyn", "abigail", "emily", "ella", "elizabeth", "camila", "luna", "sofia",
         "avery", "mila", "aria", "scarlett", "penelope", "layla", "chloe", "victoria",
         "madison", "eleanor", "grace", "nora", "riley", "zoey", "hannah", "hazel", "lily",
         "ellie", "violet", "lillian", "zoe", "stella", "aurora", "natalie", "emilia",
         "everly", "leah", "aubrey", "willow", "addison", "lucy", "audrey", "bella",
         "nova", "brooklyn", "paisley", "liam", "noah", "oliver", "elijah", "william",
         "james", "benjamin", "lucas", "henry", "alexander", "mason", "michael", "ethan",
         "daniel", "jacob", "logan", "jackson", "levi", "sebastian", "mateo", "jack",
         "owen", "theodore", "aiden", "samuel", "joseph", "john", "david", "wyatt",
         "matthew", "luke", "asher", "carter", "julian", "grayson", "leo", "jayden",
         "gabriel", "isaac", "lincoln", "anthony", "hudson", "dylan", "ezra", "thomas",
         "charles", "christopher", "jaxon", "maverick", "josiah", "isaiah", "andrew"]
ALPHABET = "." + "abcdefghijklmnopqrstuvwxyz"  # "." marks the start and end of a name
CONTEXT = 3


def dataset() -> tuple[np.ndarray, np.ndarray]:
    """``(contexts [N, 3], next characters [N])`` as int64 indices into ``ALPHABET``."""
    index = {c: i for i, c in enumerate(ALPHABET)}
    contexts, targets = [], []
    for name in NAMES:
        window = [0] * CONTEXT
        for character in name + ".":
            contexts.append(list(window))
            targets.append(index[character])
            window = window[1:] + [index[character]]
    return np.array(contexts, np.int64), np.array(targets, np.int64)


@dataclass
class Model:
    """One network recorded over a shard of ``shard`` examples, and its plan."""

    network: tc.Network
    plan: tc.Plan
    adjoints: tc.Adjoints
    loss: tc.Expr
    x: tc.Expr
    y: tc.Expr
    shard: int


def build(shard: int, embedding: int = 10, hidden: int = 200) -> Model:
    """The model recorded over ``shard`` examples, lowered to its training plan."""
    network, adjoints, loss, x, y = record(shard, embedding, hidden)
    plan = network.entry(adjoints.roots()).lower()
    return Model(network, plan, adjoints, loss, x, y, shard)


def record(shard: int, embedding: int = 10, hidden: int = 200
           ) -> tuple[tc.Network, tc.Adjoints, tc.Expr, tc.Expr, tc.Expr]:
    """The network over ``shard`` examples: ``(network, adjoints, loss, x, y)``. The
    initial parameters do not depend on ``shard`` (seeded initializers)."""
    tape = tc.Tape()
    table = tc.nn.Embedding(tape, len(ALPHABET), embedding, init=tc.init.normal(1, 1.0))
    mlp = tc.nn.Mlp(tape, [CONTEXT * embedding, hidden, len(ALPHABET)], activation="tanh",
                    init=tc.init.xavier(2))
    x = tape.input(np.zeros((shard, CONTEXT), np.int64), name="contexts")
    y = tape.input(np.zeros(shard, np.int64), name="next")
    logits = mlp(table(x).reshape(shard, CONTEXT * embedding))
    loss = tc.cross_entropy(logits, y)  # the mean over the shard
    adjoints = tape.differentiate(loss, table.parameters() + mlp.parameters())
    return tape.into_network(), adjoints, loss, x, y


def shard_gradients(model: Model, parameters: tc.Parameters, xs: np.ndarray, ys: np.ndarray
                    ) -> tuple[float, tc.Gradients]:
    """One shard's mean loss and gradients (what each thread computes)."""
    run = model.plan.forward(parameters, {model.x: xs, model.y: ys})
    return float(run.of(model.loss)), run.recorded_gradients(model.adjoints)


def train(model: Model, shards: int, steps: int, learning_rate: float = 0.1,
          pool: ThreadPoolExecutor | None = None, seed: int = 0, threads: int | None = None
          ) -> tuple[tc.Parameters, list[float]]:
    """SGD on minibatches of ``shards * model.shard`` examples.

    Each step's shards are split into ``threads`` groups of consecutive shards (default
    ``threads_for(shards)``, one per core); a group runs its shards one after another
    and sums their gradients as tables. With ``pool`` (at least ``threads - 1`` workers)
    the calling thread runs the first group while the pool runs the others; without it
    every group runs on this thread in turn. The group sums are then summed in group
    order, so the two are the same computation, bit for bit. Each minibatch is drawn
    with replacement (as makemore's ``torch.randint`` does), every step's up front; a
    shard gathers its own examples, on its thread."""
    contexts, targets = dataset()
    rng = np.random.default_rng(seed)
    parameters = model.network.parameters()
    losses = []
    groups = threads or threads_for(shards)
    # the examples of every step's shards: [steps, shards, shard] indices (a row a shard)
    for picked in rng.integers(0, len(targets), size=(steps, shards, model.shard)):

        def group(parts: np.ndarray) -> tuple[float, tc.Gradients]:
            results = [shard_gradients(model, parameters, contexts[part], targets[part])
                       for part in parts]
            return sum(loss for loss, _ in results), sum(g for _, g in results)

        split = np.array_split(picked, groups)  # consecutive shards, in shard order
        if pool is None:
            results = [group(parts) for parts in split]
        else:  # the others on the pool, the first here: no thread idles in the step
            others = [pool.submit(group, parts) for parts in split[1:]]
            results = [group(split[0])] + [future.result() for future in others]
        gradients = sum(g for _, g in results) / shards  # tables, summed
        losses.append(sum(loss for loss, _ in results) / shards)
        parameters = parameters.step(gradients, lambda p, g: p - g * learning_rate)
    return parameters, losses


def threads_for(shards: int) -> int:
    """The threads a step runs on: one per core, at most one per shard (the calling
    thread and ``threads_for(shards) - 1`` pool workers)."""
    return max(1, min(shards, os.cpu_count() or 1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--shard", type=int, default=1024, help="examples per shard")
    parser.add_argument("--hidden", type=int, default=200)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads a step runs on, this one included (default: one "
                             "per core, at most one per shard)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="serial and threaded runs, taken in turn (medians printed)")
    args = parser.parse_args(argv)
    threads = min(args.threads or threads_for(args.shards), args.shards)
    model = build(args.shard, hidden=args.hidden)
    times: dict[str, list[float]] = {"serial": [], "threaded": []}
    with ThreadPoolExecutor(max_workers=max(1, threads - 1)) as pool:
        train(model, args.shards, 1, pool=pool, threads=threads)  # warm up: plan, pool
        for _ in range(args.rounds):  # in turn, so a busy machine slows both alike
            start = time.perf_counter()
            serial, serial_losses = train(model, args.shards, args.steps, threads=threads)
            times["serial"].append(time.perf_counter() - start)
            start = time.perf_counter()
            threaded, threaded_losses = train(model, args.shards, args.steps, pool=pool,
                                              threads=threads)
            times["threaded"].append(time.perf_counter() - start)

    assert threaded.equals(serial) and threaded_losses == serial_losses, \
        "threaded training differs from serial"
    serial_s, threaded_s = (float(np.median(times[k])) for k in ("serial", "threaded"))
    print(f"{len(NAMES)} names, {len(dataset()[1])} examples; minibatch "
          f"{args.shards} x {args.shard} over {threads} threads")
    print(f"loss {threaded_losses[0]:.3f} -> {np.mean(threaded_losses[-10:]):.3f} "
          f"(mean of the last 10) after {args.steps} steps")
    print("threaded == serial, payload for payload and loss for loss: True")
    print(f"serial {serial_s * 1e3:.1f} ms, threaded {threaded_s * 1e3:.1f} ms: speed-up "
          f"{serial_s / threaded_s:.2f}x on {os.cpu_count()} CPUs (medians of "
          f"{args.rounds}; measured, not asserted)")


if __name__ == "__main__":
    main()

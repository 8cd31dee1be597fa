"""Save, kill, resume: a resumed run continues bit for bit.

A small regression trains with minibatches and dropout drawn from one
``tc.random.Generator`` (the minibatch rows from its PCG64 stream, the dropout masks
inside the compiled plan from its Philox stream, which ``plan.forward(...,
generator=...)`` advances), an Adam optimizer, and a directory checkpoint written every
few steps. The script trains once without interruption, then starts the same training in a
child process, kills it with SIGKILL after it has checkpointed, resumes from the latest
checkpoint in a fresh process, and checks that the final parameters, the optimizer state
and the generator (its Philox counter after every dropout mask, and its next draws) are
bit-identical to the uninterrupted run.

    python examples/resume.py            # 200 steps
    python examples/resume.py --steps 60 # shorter
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

import tensorcode as tc

BATCH = 16
HIDDEN = 32
DROPOUT = 0.2


def build():
    """The network: a one-hidden-layer tanh regression with dropout on the hidden layer,
    lowered into one plan that draws its masks from the generator it is given."""
    data = tc.init.uniform(3, 3.0)((256, 1))
    tape = tc.Tape()
    first = tc.nn.Linear(tape, 1, HIDDEN, init=tc.init.xavier(1), name="hidden")
    second = tc.nn.Linear(tape, HIDDEN, 1, init=tc.init.xavier(2), name="out")
    dropout = tc.nn.Dropout(DROPOUT)
    x = tape.input(np.zeros((BATCH, 1), np.float32), name="x")
    y = tape.input(np.zeros((BATCH, 1), np.float32), name="y")
    error = second(dropout(first(x).tanh())) - y
    loss = (error * error).mean()
    adjoints = tape.differentiate(loss, first.parameters() + second.parameters())
    network = tape.into_network()
    plan = network.entry(adjoints.roots()).lower()
    return network, (plan, adjoints), (x, y), data


def train(network, adjoints, feeds, data, parameters, optimizer, generator, start, stop,
          checkpoint_dir=None, every=10):
    """Steps ``start..stop``; each draws its minibatch from ``generator`` and its
    dropout masks inside the plan from ``generator``, so the random stream is part of
    the training state."""
    plan, adjoints = adjoints
    x, y = feeds
    for step in range(start, stop):
        rows = generator.choice(len(data), BATCH, replace=False)
        batch = data[rows]
        run = plan.forward(parameters, {x: batch, y: np.sin(batch)}, generator=generator)
        gradients = run.recorded_gradients(adjoints)
        parameters = optimizer.step(parameters, gradients, lr=0.01)
        if checkpoint_dir is not None and (step + 1) % every == 0:
            tc.checkpoint.save(checkpoint_dir, parameters, optimizer, steps=step + 1,
                               progress={"next_step": step + 1}, generator=generator)
            print(f"checkpoint at step {step + 1}", flush=True)
    return parameters


def fresh_state():
    return tc.optim.Adam(betas=(0.9, 0.999), eps=1e-8), tc.random.Generator(2024)


def child(directory: str, total: int, resume: bool) -> None:
    network, adjoints, feeds, data = build()
    optimizer, generator = fresh_state()
    parameters, start = network.parameters(), 0
    if resume:
        restored = tc.checkpoint.load(directory, parameters, optimizer, generator)
        parameters, start = restored.parameters, restored.steps
        print(f"resumed at step {start}", flush=True)
    parameters = train(network, adjoints, feeds, data, parameters, optimizer, generator,
                       start, total, checkpoint_dir=directory, every=10)
    if resume:
        tc.checkpoint.save(directory, parameters, optimizer, steps=total, generator=generator)
        print("finished", flush=True)
    else:  # the first run waits to be killed
        time.sleep(60)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--child", choices=["first", "resume"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.dir, args.steps, args.child == "resume")
        return 0

    network, adjoints, feeds, data = build()
    optimizer, generator = fresh_state()
    straight = train(network, adjoints, feeds, data, network.parameters(), optimizer,
                     generator, 0, args.steps)
    print(f"uninterrupted: {args.steps} steps")

    directory = tempfile.mkdtemp(prefix="tensorcode-resume-")
    command = [sys.executable, os.path.abspath(__file__), "--steps", str(args.steps),
               "--dir", directory]
    first = subprocess.Popen(command + ["--child", "first"], stdout=subprocess.PIPE,
                             text=True)
    target = max(10, (args.steps // 2) // 10 * 10)
    for line in first.stdout:  # kill it once it has checkpointed about half-way
        if line.strip() == f"checkpoint at step {target}":
            break
    first.send_signal(signal.SIGKILL)
    first.wait()
    saved = tc.checkpoint.load(directory, network.parameters()).steps
    print(f"killed the first run (SIGKILL) with its latest checkpoint at step {saved}")
    result = subprocess.run(command + ["--child", "resume"], capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        return 1
    print(result.stdout.strip().splitlines()[0] + " in a fresh process")

    resumed_optimizer, resumed_generator = fresh_state()
    resumed = tc.checkpoint.load(directory, network.parameters(), resumed_optimizer,
                                 resumed_generator)
    same_parameters = resumed.parameters.equals(straight)
    a, b = optimizer.state_dict(), resumed_optimizer.state_dict()
    same_state = all(np.array_equal(a["state"][k][n], b["state"][k][n])
                     for k in a["state"] for n in a["state"][k])
    same_draws = (generator.get_state() == resumed_generator.get_state()  # dropout's counter
                  and np.array_equal(generator.uniform(0, 1, (8,)),
                                     resumed_generator.uniform(0, 1, (8,))))
    print(f"parameters bit-identical: {same_parameters}")
    print(f"optimizer state bit-identical: {same_state}")
    print(f"generator draws the same next numbers: {same_draws}")
    return 0 if same_parameters and same_state and same_draws else 1


if __name__ == "__main__":
    sys.exit(main())

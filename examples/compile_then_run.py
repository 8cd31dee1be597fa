"""Lower a training step to a compiled plan, look at it, save it, and load it in a new
process that finds the compiled code in the plan cache instead of compiling again.

    python examples/compile_then_run.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

import tensorcode as tc
from tensorcode.compiler.plans.plan import compile_stats


def build():
    tape = tc.Tape()
    x = tape.input(np.linspace(-1, 1, 48, dtype=np.float32).reshape(48, 1), name="x")
    y = tape.input(np.sin(3 * np.linspace(-1, 1, 48, dtype=np.float32)).reshape(48, 1),
                   name="y")
    mlp = tc.nn.Mlp(tape, [1, 16, 1], "tanh")
    loss = tc.mse(mlp(x), y)
    adjoints = tape.differentiate(loss, mlp.parameters())
    return tape.into_network(), loss, adjoints


def main() -> None:
    workdir = tempfile.mkdtemp(prefix="tensorcode-example-")
    os.environ.setdefault("TENSORCODE_CACHE_DIR", os.path.join(workdir, "cache"))
    network, loss, adjoints = build()
    entry = network.entry(adjoints.roots())
    print("== before lowering: the entry's program ==")
    print(entry.describe())
    plan = entry.lower()  # the Numba backend, compiled into the plan cache
    print("\n== after lowering ==")
    print(plan.describe())
    print("\nthis process:", compile_stats())

    parameters = network.parameters()
    opt = tc.optim.Sgd()
    for _ in range(200):
        run = plan.forward(parameters)
        parameters = opt.step(parameters, run.recorded_gradients(adjoints), 0.1)
    print(f"loss after 200 steps: {float(plan.forward(parameters).of(loss)):.5f}")

    saved = os.path.join(workdir, "plan")
    plan.save(saved)
    print(f"\nsaved to {saved}: {sorted(os.listdir(saved))}")
    code = textwrap.dedent(f"""
        import json
        from tensorcode.compiler.plans.plan import Plan, compile_stats
        plan = Plan.load({saved!r})
        run = plan.forward(plan.parameters())
        loss = float(run.of(plan.network.symbol(plan.roots[0])))
        print(json.dumps({{"loss": loss, "stats": compile_stats()}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    stats = result["stats"]
    print(f"a new process loaded the plan: loss at the saved initials {result['loss']:.5f}, "
          f"compiled {stats['compiled']} functions, loaded {stats['cache_loaded']} from the "
          f"cache -> {'cache hit' if stats['compiled'] == 0 else 'compiled again'}")


if __name__ == "__main__":
    main()

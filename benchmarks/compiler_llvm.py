"""The llvm backend against the numba backend: cold start, warm start, warm speed.

Rows (each peer measured in the same run, alternated, on the same workloads W1..W5 of
``compiler_workloads``):

- cold start: a fresh process with an empty plan cache, from its spawn to the end of its
  first training step (import, build the network, lower, step; its exit, the
  interpreter's and libraries' teardown, is in the note), per workload and
  backend; with JAX's fresh-process ``jax.jit`` first step for W2 when JAX is installed
  (every fresh process with Python's bytecode cache on and primed, as a user's is);
- warm start: the same with the cache the cold run filled (W2), and whether Numba was
  imported; beside it the floor, a fresh process that only imports NumPy and
  ``llvmlite.binding``;
- warm speed: one training step per backend in this process (the fused step plan when
  the backend lowers the optimizer's update, else the gradient plan and the optimizer's
  own step; the row says which).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from .compiler_workloads import WORKLOADS, make_data, repeats, tensorcode_network
from .harness import Row, median_time, module_available

SUITE = "compiler"
ROOT = pathlib.Path(__file__).resolve().parents[1]
BACKENDS = ("llvm", "numba")

_SCRIPT = """
import time; t0 = time.perf_counter(); c0 = time.process_time()
import json, os, sys
sys.path.insert(0, {root!r})
import numpy as np
from benchmarks.compiler_workloads import WORKLOADS, make_data, tensorcode_network
from tensorcode.compiler.backends.counters import compile_stats
from tensorcode.errors import CompileError
from tensorcode.runtime import optim
spec = WORKLOADS[{workload!r}]; data = make_data(spec)
network, loss, adjoints = tensorcode_network(spec, data)
opt = optim.Adam() if spec["opt"] == "adam" else optim.Sgd()
t1 = time.perf_counter()
parameters = network.parameters()
try:
    plan = network.entry(adjoints.roots()).lower({backend!r}, optimizer=opt)
    fused = True
except CompileError:
    plan = network.entry(adjoints.roots()).lower({backend!r})
    fused = False
t2 = time.perf_counter()
if fused:
    plan.step(parameters, opt, None, spec["lr"])
else:
    run = plan.forward(parameters)
    opt.step(parameters, run.recorded_gradients(adjoints), spec["lr"])
t3 = time.perf_counter()
print(json.dumps({{"end": time.time(), "first_step": t3 - t0, "lower": t2 - t1,
                  "cpu": time.process_time() - c0,
                  "fused": fused, "stats": compile_stats(), "numba": "numba" in sys.modules}}))
"""


#: the floor of a warm start: the interpreter, NumPy and LLVM's library (every warm llvm
#: process loads them to call a cached object), and nothing of TensorCode's
_FLOOR_SCRIPT = """
import json, time
import numpy, llvmlite.binding
print(json.dumps({"end": time.time()}))
"""


def environment(**extra: str) -> dict:
    """The fresh processes' environment: this one's, with Python's bytecode cache on (as
    a user's is; some shells here set ``PYTHONDONTWRITEBYTECODE``, which would make
    every fresh process compile every module's source again)."""
    env = dict(os.environ, **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def prime(*extra: str) -> None:
    """Write the bytecode of the modules the fresh processes import (and of ``extra``),
    once, so the first process measured does not pay for it (JAX's too, when it is
    installed)."""
    modules = ["numba", "numpy", "tensorcode.runtime.optim", "tensorcode.compiler.plans.plan",
               "tensorcode.compiler.backends.llvm.codegen",
               "tensorcode.compiler.backends.numba.backend"]
    if module_available("jax"):
        modules.append("jax")
    modules += extra
    subprocess.run([sys.executable, "-c", "import " + ", ".join(modules)], env=environment(),
                   capture_output=True, timeout=600, check=True)


def _fresh(backend: str, workload: str, cache: str) -> dict:
    env = environment(TENSORCODE_CACHE_DIR=cache)
    code = _SCRIPT.format(root=str(ROOT), workload=workload, backend=backend)
    return _spawn(code, env, 1800)


def _spawn(code: str, env: dict, timeout: float) -> dict:
    """Run ``code`` in a fresh interpreter; the JSON document it prints last, with
    ``to_step`` (seconds from before the spawn to the end of its first step, the
    document's ``end`` in wall-clock time: what a user waits for) and ``wall`` (the same
    to the process's exit, which adds the interpreter's and the libraries' teardown)."""
    spawned = time.time()
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=timeout, env=env)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    data = json.loads(result.stdout.strip().splitlines()[-1])
    data["wall"] = wall
    data["to_step"] = data["end"] - spawned
    return data


def _note(run: dict) -> str:
    kind = "fused step" if run["fused"] else "gradient plan + opt.step (no fused step)"
    return (f"{kind}; lower {run['lower']:.2f} s, {run['cpu']:.2f} s CPU in process, "
            f"{run['wall']:.2f} s to its exit; "
            f"compiled {run['stats']['compiled']}, numba imported: {run['numba']}")


def cold_rows(quick: bool = False) -> list[Row]:
    """Fresh process, empty cache, to the first step: llvm and numba per workload
    (alternated), then the warm start of W2 for both, and JAX's W2 when installed."""
    rows = []
    names = ["W1", "W2"] if quick else list(WORKLOADS)
    warm_caches: dict[str, str] = {}
    prime()
    with tempfile.TemporaryDirectory(prefix="tensorcode-llvm-bench-") as tmp:
        for name in names:
            title = WORKLOADS[name]["title"]
            for backend in BACKENDS:
                cache = os.path.join(tmp, f"{name}-{backend}")
                run = _fresh(backend, name, cache)
                if name == "W2":
                    warm_caches[backend] = cache
                rows.append(Row(SUITE, f"{title}: cold start to 1st step", backend,
                                run["to_step"], unit="s", baseline=backend == "numba",
                                note=f"fresh process, empty cache; {_note(run)}"))
        # the warm starts and the floor alternated, so load hits them alike
        warm: dict[str, list[dict]] = {backend: [] for backend in (*BACKENDS, "floor")}
        for _ in range(1 if quick else 3):
            for backend in BACKENDS:
                warm[backend].append(_fresh(backend, "W2", warm_caches[backend]))
            warm["floor"].append(_spawn(_FLOOR_SCRIPT, environment(), 120))
        middle = {backend: sorted(runs, key=lambda r: r["to_step"])[len(runs) // 2]
                  for backend, runs in warm.items()}
        for backend in BACKENDS:
            run = middle[backend]
            rows.append(Row(SUITE, "W2: warm start to 1st step (llvm vs numba)", backend,
                            run["to_step"], unit="s", baseline=backend == "numba",
                            note=f"fresh process, warm cache; {_note(run)}"))
        floor = "W2: warm start, llvm over its floor"
        rows += [Row(SUITE, floor, "llvm", middle["llvm"]["to_step"], unit="s",
                     baseline=True, note="the llvm row above"),
                 Row(SUITE, floor, "imports only", middle["floor"]["to_step"], unit="s",
                     note="fresh process importing NumPy and llvmlite.binding (LLVM's "
                          "library) and nothing else; the ratio is its share of llvm's")]
    if module_available("jax"):
        from .compiler_workloads import jax_fresh_process_script

        try:
            run = _spawn(jax_fresh_process_script(), environment(), 600)
        except RuntimeError as error:  # report, do not abort the suite
            rows.append(Row(SUITE, f"{WORKLOADS['W2']['title']}: cold start to 1st step",
                            "jax jit (failed)", 0.0, unit="s",
                            note=str(error).splitlines()[-1][:80]))
        else:
            rows.append(Row(SUITE, f"{WORKLOADS['W2']['title']}: cold start to 1st step",
                            "jax jit", run["to_step"], unit="s",
                            note="fresh process: import, trace, XLA compile, first step; "
                                 f"{run['wall']:.2f} s to its exit"))
    return rows


def _step(backend: str, spec: dict, data: dict):
    """A warm step closure and whether it is the fused step."""
    from tensorcode.errors import CompileError
    from tensorcode.runtime import optim

    network, _, adjoints = tensorcode_network(spec, data)
    opt = optim.Adam() if spec["opt"] == "adam" else optim.Sgd()
    parameters = network.parameters()
    lr = spec["lr"]
    try:
        plan = network.entry(adjoints.roots()).lower(backend, optimizer=opt)
    except CompileError:
        plan = network.entry(adjoints.roots()).lower(backend)
        state = {"p": parameters}

        def unfused():
            run = plan.forward(state["p"])
            state["p"] = opt.step(state["p"], run.recorded_gradients(adjoints), lr)
        return unfused, False
    inputs = [network.graph.nodes[s.index].value for s in plan.inputs()]
    bound = plan.bind(parameters, opt)
    return (lambda: bound(lr, *inputs)), True


def warm_rows(quick: bool = False) -> list[Row]:
    """One warm training step per workload, llvm and numba alternated in this process."""
    rows = []
    for name, spec in WORKLOADS.items():
        if quick and name == "W5":
            continue
        data = make_data(spec)
        n = repeats(name, quick)
        steps = {b: _step(b, spec, data) for b in BACKENDS}
        samples: dict[str, list[float]] = {b: [] for b in BACKENDS}
        for _ in range(3):
            for backend in BACKENDS:
                samples[backend].append(median_time(steps[backend][0], repeat=n, warmup=3))
        for backend in BACKENDS:
            value = sorted(samples[backend])[1]
            kind = "fused step plan" if steps[backend][1] else \
                "gradient plan + opt.step (no fused step)"
            rows.append(Row(SUITE, f"{spec['title']}: warm step (llvm vs numba)", backend,
                            value * 1e6, unit="us", baseline=backend == "numba",
                            note=f"{kind}; median of 3 alternated medians of {n}"
                                 + ("; one core: numba runs partitioned loops serially"
                                    if backend == "numba" else "")))
    return rows


def run(quick: bool = False) -> list[Row]:
    return warm_rows(quick) + cold_rows(quick)


_LARGE = """
import json, sys, time
sys.path.insert(0, {root!r})
import numpy as np
from tensorcode.models import gpt2
from tensorcode.nn.transformer import GptConfig
config = GptConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)
model = gpt2.GptModel(config, seed=0, context={context}, cache_length={cache},
                      backend={backend!r})
ids = np.zeros((1, {context}), np.int64)
start, cpu = time.perf_counter(), time.process_time()
model.logits(ids)
full_wall, full_cpu = time.perf_counter() - start, time.process_time() - cpu
start, cpu = time.perf_counter(), time.process_time()
model.layered().lower_decode()
decode_wall, decode_cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({{"full_cpu": full_cpu, "full_wall": full_wall, "decode_cpu": decode_cpu,
                  "decode_wall": decode_wall, "numba": "numba" in sys.modules}}))
"""


def large_plan_rows(quick: bool = False) -> list[Row]:
    """GPT-2 124M's full-context plans (lowered and run once) and its four decode plans,
    lowered cold in a fresh process with an empty cache: CPU seconds per backend."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="tensorcode-llvm-gpt-") as tmp:
        for backend in BACKENDS:
            code = _LARGE.format(root=str(ROOT), context=128, cache=256, backend=backend)
            env = dict(os.environ, TENSORCODE_CACHE_DIR=os.path.join(tmp, backend))
            result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, timeout=3600, env=env)
            if result.returncode != 0:
                raise RuntimeError(result.stderr[-2000:])
            data = json.loads(result.stdout.strip().splitlines()[-1])
            rows.append(Row(SUITE, "GPT-2 124M cold lowering, full (T=128) + decode", backend,
                            data["full_cpu"] + data["decode_cpu"], unit="s CPU",
                            baseline=backend == "numba",
                            note=f"fresh process, empty cache; full {data['full_cpu']:.1f} s "
                                 f"CPU ({data['full_wall']:.1f} s wall, one forward run "
                                 f"included), decode {data['decode_cpu']:.1f} s CPU "
                                 f"({data['decode_wall']:.1f} s wall)"))
    return rows


__all__ = ["run", "cold_rows", "warm_rows", "large_plan_rows"]

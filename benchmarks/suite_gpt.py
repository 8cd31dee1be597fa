"""GPT-2 at two sizes: full-context forward, cached decoding, compile costs, training.

Workloads (each against the same model in PyTorch eager, in its own process, on the
same weights, read from the same released-layout directory):

- ``forward``: full-context logits of one row of T tokens (B = 1);
- ``decode``: tokens per second of the one-token decode step with the key/value cache,
  also stated as the rate the weights are read at and against the memory-bandwidth bound
  (weight bytes per token over the memory traffic rate of a large copy on this machine,
  reads plus writes, measured in the same run); then at one and at two threads, and
  against ONNX Runtime's decode of the same step (the cache fed as inputs);

Forward and decode run in alternating rounds (ours, PyTorch, ours, ...; ``ROUNDS``,
one with ``--quick``) so both sides meet the same machine load; each keeps its best.
- ``train``: one AdamW step (forward, gradients, update) of a 4-layer, 128-wide
  character model at batch 16, T = 64, and that step's matmul floor (its matmul flops
  at the one-thread sgemm rate measured in the same process: the bound on any ratio);
- for the 124M configuration (12 layers, 12 heads, 768 wide, vocabulary 50,257;
  random weights): the cold lowering of the decode plans (empty plan cache), a fresh
  process's time to the first token with a warm cache (import, load, lower, prompt of
  one token, one new token), and that process's peak resident memory;
- ``chat step``: the Chatbot's 2-layer transformer (width 32 and 64, context 64 and
  128, 16 rows of this repository's docs text, Adam) against its PyTorch eager twin
  with SDPA attention (``transformer_step``; ``--quick``: width 32, context 128);
- ``kernels``: where the small configuration's forward and training step (and, without
  ``--quick``, GPT-2 124M's forward at T = 128) spend their time, per kernel kind,
  against same-shape sgemm and copy bandwidth (``gpt_kernels``).

On a shared machine, run with ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``: threaded
BLAS (and PyTorch's threads) spin against other processes and both sides slow down by
an order of magnitude. ``--quick`` runs the small configuration only (the 124M rows
take several minutes: random initialization, a 500 MB weight file, cold compiles and a
fresh process). The training rows lower the layered training plans (one block forward,
one block backward, the embedding and the head with the loss) into an empty plan cache,
reporting that cold cost, then time our step and PyTorch's alternately in one process.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

from .harness import Row, median_time, module_available, run_in_subprocess

SUITE = "gpt"
ROOT = pathlib.Path(__file__).resolve().parents[1]
SMALL = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)
GPT2_124M = dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)
FORWARD_T = 128
DECODE_CACHE = 256
#: alternating rounds of ours and PyTorch's forward and decode (``--quick``: one)
ROUNDS = 2


def _config(shape: dict):
    from tensorcode.nn.transformer import GptConfig
    return GptConfig(**shape)


def _write_model(shape: dict, directory: pathlib.Path, seed: int = 0) -> None:
    """Random GPT-2 weights (GPT-2's initialization) in the released layout."""
    from tensorcode.models import gpt2
    gpt2.save(gpt2.GptModel(_config(shape), seed=seed, context=8), directory)


def _copy_bandwidth() -> float:
    """Bytes per second of memory traffic in a large float32 copy (each byte is read
    once and written once, so a copy of N bytes moves 2N)."""
    a = np.ones(64 << 20, np.float32)  # 256 MB
    b = np.empty_like(a)
    seconds = median_time(lambda: np.copyto(b, a), repeat=5, warmup=1)
    return 2 * a.nbytes / seconds


class _Ours:
    """The loaded model, its decoder and the inputs, kept across measuring rounds."""

    def __init__(self, shape: dict, directory: pathlib.Path, backend: str | None = None
                 ) -> None:
        from tensorcode.models import gpt2

        self.config = config = _config(shape)
        self.t = t = min(FORWARD_T, config.block_size)
        self.cache = cache = min(DECODE_CACHE, config.block_size)
        options = {} if backend is None else {"backend": backend}
        self.model = gpt2.load(directory, context=t, cache_length=cache, **options)
        self.ids = np.random.default_rng(1).integers(0, config.vocab_size, (1, t))
        self.model.logits(self.ids)  # lower (or load) the plans
        self.decoder = self.model.decoder()

    def _step(self) -> None:
        decoder = self.decoder
        if decoder.position >= self.cache:
            decoder.reset()
        decoder.step(np.array([decoder.position % self.config.vocab_size]))

    def measure(self, quick: bool) -> dict:
        """Forward and decode at this process's thread count, then decode at one and at
        two threads (``tc.set_num_threads``), alternately in the same round."""
        import tensorcode as tc

        repeat = 3 if quick or self.config.n_layer >= 12 else 10
        steps = 20 if quick else 40
        forward = median_time(lambda: self.model.logits(self.ids), repeat=repeat, warmup=1)
        measured = {"forward": forward,
                    "decode": median_time(self._step, repeat=steps, warmup=2)}
        if tc.get_num_threads() >= 1 and _cpus() >= 2:
            before = tc.get_num_threads()
            try:
                for threads in (1, 2):
                    tc.set_num_threads(threads)
                    measured[f"decode_{threads}"] = median_time(self._step, repeat=steps,
                                                                warmup=2)
            finally:
                tc.set_num_threads(before)
        return measured


def _alternating(shape: dict, directory: pathlib.Path, quick: bool
                 ) -> tuple[dict, dict | None, dict]:
    """Ours and PyTorch's forward and decode, measured in alternating rounds (ours,
    then PyTorch, then ours again, ...) so both sides see the same machine load; each
    side keeps its best round. The same plans on the ``numba`` backend are a third side,
    measured in each round before and after ours in turn (ours, numba, numba, ours), so
    neither backend is always the first after a pause (GPT-2 124M's Numba plans take
    minutes to compile)."""
    ours = _Ours(shape, directory)
    numba = _Ours(shape, directory, "numba")
    config = ours.config
    rounds = 1 if quick else ROUNDS
    best: dict = {}
    best_numba: dict = {}
    peer: dict | None = None
    onnx: dict | None = None
    for _ in range(rounds):
        for side, kept in ((ours, best), (numba, best_numba), (numba, best_numba),
                           (ours, best)):
            for key, value in side.measure(quick).items():
                kept[key] = min(kept.get(key, value), value)
        if module_available("torch"):
            out = run_in_subprocess(_TORCH.format(directory=str(directory), t=ours.t,
                                                  cache=ours.cache, quick=quick),
                                    timeout=1800)
            peer = out if peer is None else {
                **out, "forward": min(peer["forward"], out["forward"]),
                "decode": min(peer["decode"], out["decode"])}
        if module_available("torch") and module_available("onnxruntime"):
            out = run_in_subprocess(_ORT.format(directory=str(directory), t=ours.t,
                                                cache=ours.cache, quick=quick,
                                                threads=_plan_threads()), timeout=1800)
            onnx = out if onnx is None else {
                **out, "forward": min(onnx["forward"], out["forward"]),
                "decode": min(onnx["decode"], out["decode"])}
    best.update(t=ours.t, cache=ours.cache, rounds=rounds,
                weight_bytes=4 * config.parameter_count())
    best["onnx"] = onnx
    return best, peer, best_numba


def _cpus() -> int:
    from tensorcode.compiler.backends.threads import available_cpus
    return available_cpus()


def _plan_threads() -> int:
    """The threads our plans use here (``tc.get_num_threads()``: the pool's, BLAS one
    per call); ONNX Runtime gets as many intra-op threads."""
    import tensorcode as tc
    return tc.get_num_threads()


def _speed_rows(label: str, shape: dict, directory: pathlib.Path, quick: bool) -> list[Row]:
    ours, peer, numba = _alternating(shape, directory, quick)
    t, cache, rounds = ours["t"], ours["cache"], ours["rounds"]
    weight_bytes = ours["weight_bytes"]
    bandwidth = _copy_bandwidth()
    bound = bandwidth / weight_bytes
    note = f"layered plans (one block body for every layer); {_plan_threads()} threads; " \
           f"best of {rounds} round{'s' if rounds > 1 else ''} alternating with the peer"
    tok_s = 1 / ours["decode"]
    fits = ", which fit in cache" if weight_bytes < 32e6 else ""
    decode = f"{label} decode (KV cache {cache})"
    rows = [Row(SUITE, f"{label} forward B=1 T={t}", "tensorcode", ours["forward"] * 1e3,
                unit="ms", note=note),
            Row(SUITE, decode, "tensorcode", tok_s,
                unit="tok/s", lower_is_better=False,
                note=f"{note}; weights read at {weight_bytes * tok_s / 1e9:.1f} GB/s; "
                     f"bandwidth bound {bound:.1f} tok/s ({weight_bytes / 1e6:.0f} "
                     f"MB of weights per token{fits} at {bandwidth / 1e9:.1f} GB/s of copy "
                     f"traffic, measured in the same run): {tok_s / bound:.0%} of it")]
    if "decode_2" in ours:
        one, two = 1 / ours["decode_1"], 1 / ours["decode_2"]
        rows.append(Row(SUITE, f"{decode} at 2 threads", "tensorcode", two, unit="tok/s",
                        lower_is_better=False,
                        note=f"tc.set_num_threads(2) against 1 in the same rounds: {one:.1f} "
                             f"tok/s at one thread ({one / bound:.0%} of the bound), "
                             f"2 threads / 1 thread {two / one:.2f}x"))
    same = "the same plans on backend='numba' (the default is llvm), ours, numba, numba, " \
           "ours in each round"
    rows += [Row(SUITE, f"{label} forward B=1 T={t}", "tensorcode numba",
                 numba["forward"] * 1e3, unit="ms",
                 note=f"{same}; llvm/numba speed {numba['forward'] / ours['forward']:.2f}x"),
             Row(SUITE, f"{label} decode (KV cache {cache})", "tensorcode numba",
                 1 / numba["decode"], unit="tok/s", lower_is_better=False,
                 note=f"{same}; llvm/numba speed {numba['decode'] / ours['decode']:.2f}x")]
    onnx = ours["onnx"]
    if onnx is not None:
        rows.append(Row(SUITE, f"{label} forward B=1 T={t}", "onnxruntime",
                        onnx["forward"] * 1e3, unit="ms",
                        note=f"onnxruntime {onnx['version']}, all graph optimizations, "
                             f"{onnx['threads']} intra-op threads; the torch program "
                             "exported with torch.onnx.export"))
        ort_tok_s = 1 / onnx["decode"]
        rows.append(Row(SUITE, decode, "onnxruntime", ort_tok_s, unit="tok/s",
                        lower_is_better=False,
                        note=f"the same session options; one step exported with the cache "
                             f"as inputs ({cache} positions a layer, an additive mask, the "
                             f"new key and value concatenated in the graph and written "
                             f"back between steps); {ort_tok_s / bound:.0%} of the bound"))
    if peer is not None:
        peer_note = f"torch {peer['version']} eager, {peer['threads']} threads"
        rows += [Row(SUITE, f"{label} forward B=1 T={t}", "torch eager",
                     peer["forward"] * 1e3, unit="ms", note=peer_note),
                 Row(SUITE, f"{label} decode (KV cache {cache})", "torch eager",
                     1 / peer["decode"], unit="tok/s", lower_is_better=False,
                     note=peer_note + ", SDPA over the cache")]
    return rows


_TORCH_MODEL = textwrap.dedent("""
    import json, math, statistics, time, sys
    import torch, torch.nn.functional as F
    from safetensors.numpy import load_file
    directory, t, cache, quick = {directory!r}, {t}, {cache}, {quick}
    config = json.load(open(directory + "/config.json"))
    w = {{k: torch.from_numpy(v) for k, v in load_file(directory + "/model.safetensors").items()}}
    H, C, L = config["n_head"], config["n_embd"], config["n_layer"]
    eps = config["layer_norm_epsilon"]
    D = C // H

    def block(x, k, kc=None, vc=None, pos=None):
        p = "h.%d." % k
        b, n, _ = x.shape
        a = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        q, key, v = (a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]).split(C, 2)
        q, key, v = (z.view(b, n, H, D).transpose(1, 2) for z in (q, key, v))
        if kc is None:
            y = F.scaled_dot_product_attention(q, key, v, is_causal=True)
        else:
            kc[:, :, pos] = key[:, :, 0]
            vc[:, :, pos] = v[:, :, 0]
            y = F.scaled_dot_product_attention(q, kc[:, :, :pos + 1], vc[:, :, :pos + 1])
        y = y.transpose(1, 2).reshape(b, n, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = F.gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        return x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]

    def head(x):
        return F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], eps) @ w["wte.weight"].T

    def forward(ids):
        x = w["wte.weight"][ids] + w["wpe.weight"][:ids.shape[1]]
        for k in range(L):
            x = block(x, k)
        return head(x)

    def median(fn, repeat, warmup):
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(repeat):
            start = time.perf_counter(); fn(); samples.append(time.perf_counter() - start)
        return statistics.median(samples)
""")

_TORCH = _TORCH_MODEL + textwrap.dedent("""
    torch.manual_seed(1)
    ids = torch.randint(0, config["vocab_size"], (1, t))
    with torch.inference_mode():
        fwd = median(lambda: forward(ids), 3 if quick or L >= 12 else 10, 1)
        caches = [(torch.zeros(1, H, cache, D), torch.zeros(1, H, cache, D)) for _ in range(L)]
        state = {{"pos": 0}}

        def step():
            pos = state["pos"] % cache
            token = torch.tensor([[pos % config["vocab_size"]]])
            x = w["wte.weight"][token] + w["wpe.weight"][pos:pos + 1]
            for k in range(L):
                x = block(x, k, caches[k][0], caches[k][1], pos)
            head(x)
            state["pos"] += 1
        dec = median(step, 20 if quick else 40, 2)
    print(json.dumps({{"forward": fwd, "decode": dec, "threads": torch.get_num_threads(),
                      "version": torch.__version__}}))
""")


#: ONNX Runtime's forward and decode step of the same model: the PyTorch program above
#: exported with ``torch.onnx.export`` (the TorchScript exporter, which needs no
#: onnxscript) and run with every graph optimization, ``threads`` intra-op threads (as
#: many as our plans use)
_ORT = _TORCH_MODEL + textwrap.dedent("""
    import os, tempfile
    import numpy as np
    import onnxruntime as ort

    class Forward(torch.nn.Module):
        def forward(self, ids):
            return forward(ids)

    torch.manual_seed(1)
    ids = torch.randint(0, config["vocab_size"], (1, t))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt2.onnx")
        with torch.inference_mode():
            torch.onnx.export(Forward(), (ids,), path, dynamo=False, input_names=["ids"],
                              output_names=["logits"])
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = {threads}
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feed = {{"ids": ids.numpy()}}
    fwd = median(lambda: session.run(None, feed), 3 if quick or L >= 12 else 10, 1)

    # decode: one token against a static cache of `cache` positions per layer, given as
    # inputs (the past-key-values scheme): the graph attends over the cache and the new
    # key and value (concatenated), an additive mask hiding the unused positions; the
    # new keys and values come back as outputs and are written into the cache here
    def step_block(x, k, keys, values, mask):
        p = "h.%d." % k
        a = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        q, key, v = (a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]).split(C, 2)
        q, key, v = (z.view(1, 1, H, D).transpose(1, 2) for z in (q, key, v))
        every_key, every_value = torch.cat([keys, key], 2), torch.cat([values, v], 2)
        scores = (q @ every_key.transpose(2, 3)) / math.sqrt(D) + mask
        y = (scores.softmax(-1) @ every_value).transpose(1, 2).reshape(1, 1, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = F.gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        return x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"], key, v

    class Step(torch.nn.Module):
        def forward(self, token, position, mask, keys, values):
            x = w["wte.weight"][token] + w["wpe.weight"][position]
            new_keys, new_values = [], []
            for k in range(L):
                x, key, v = step_block(x, k, keys[k], values[k], mask)
                new_keys.append(key)
                new_values.append(v)
            return head(x), torch.stack(new_keys), torch.stack(new_values)

    shape = (L, 1, H, cache, D)
    args = (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long),
            torch.zeros(1, 1, 1, cache + 1), torch.zeros(shape), torch.zeros(shape))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt2_step.onnx")
        with torch.inference_mode():
            torch.onnx.export(Step(), args, path, dynamo=False,
                              input_names=["token", "position", "mask", "keys", "values"],
                              output_names=["logits", "key", "value"])
        step_session = ort.InferenceSession(path, options,
                                            providers=["CPUExecutionProvider"])
    keys, values = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    mask = np.full((1, 1, 1, cache + 1), -1e9, np.float32)
    mask[..., cache] = 0.0
    state = {{"pos": 0}}

    def step():
        pos = state["pos"] % cache
        if pos == 0:
            mask[..., :cache] = -1e9
        feed = {{"token": np.array([[pos % config["vocab_size"]]]),
                 "position": np.array([pos]), "mask": mask, "keys": keys, "values": values}}
        _, key, value = step_session.run(None, feed)
        keys[:, :, :, pos] = key[:, :, :, 0]
        values[:, :, :, pos] = value[:, :, :, 0]
        mask[..., pos] = 0.0
        state["pos"] += 1
    dec = median(step, 20 if quick else 40, 2)
    print(json.dumps({{"forward": fwd, "decode": dec, "threads": {threads},
                      "version": ort.__version__}}))
""")


_TRAIN = textwrap.dedent("""
    import json, statistics, sys, time
    import numpy as np
    sys.path.insert(0, {root!r})
    import tensorcode as tc
    from tensorcode.models import gpt2
    from tensorcode.models.gpt_training import PLANS
    from tensorcode.nn.transformer import GptConfig
    config = GptConfig(**{shape!r})
    V, T, L, H, C = (config.vocab_size, config.block_size, config.n_layer, config.n_head,
                     config.n_embd)
    start, cpu = time.perf_counter(), time.process_time()
    model = gpt2.GptModel(config, batch=16, context=T)
    training = model.training()
    training.lower()
    lowered, lowered_cpu = time.perf_counter() - start, time.process_time() - cpu
    kernels = sum(len(training.plan(name).schedule.kernels) for name in PLANS)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, V, (16, T))
    targets = rng.integers(0, V, (16, T))
    optimizer = tc.optim.AdamW(weight_decay=0.01)
    steps = {{"tensorcode": lambda: model.train_step(ids, targets, optimizer, 1e-3)}}
    out = {{"lowered": lowered, "lowered_cpu": lowered_cpu, "kernels": kernels}}
    # the same model and step on the numba backend (the default is llvm), timed alternately
    twin = gpt2.GptModel(config, batch=16, context=T, backend="numba")
    twin_optimizer = tc.optim.AdamW(weight_decay=0.01)
    begin = time.perf_counter()
    twin.training().lower()
    out["numba_lowered"] = time.perf_counter() - begin
    steps["numba"] = lambda: twin.train_step(ids, targets, twin_optimizer, 1e-3)
    if {torch}:
        import torch, torch.nn.functional as F
        from benchmarks.torch_gpt_twin import gpt_twin
        torch.manual_seed(0)
        peer = gpt_twin(V, T, C, H, L)
        peer_optimizer = torch.optim.AdamW(peer.parameters(), lr=1e-3, weight_decay=0.01)
        ids_t, targets_t = torch.from_numpy(ids), torch.from_numpy(targets)

        def torch_step():
            peer_optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(peer(ids_t).reshape(-1, V), targets_t.reshape(-1))
            loss.backward()
            peer_optimizer.step()
        steps["torch"] = torch_step
        out.update(threads=torch.get_num_threads(), version=torch.__version__)
    samples = {{name: [] for name in steps}}
    for _ in range(2):
        for fn in steps.values():
            fn()
    for _ in range({repeat}):  # alternately, so load on a shared machine hits both alike
        for name, fn in steps.items():
            begin = time.perf_counter(); fn(); samples[name].append(time.perf_counter() - begin)
    out["step"] = statistics.median(samples["tensorcode"])
    out["numba_step"] = statistics.median(samples["numba"])
    if "torch" in samples:
        out["torch_step"] = statistics.median(samples["torch"])
    # the matmul floor: the step's matmul flops (forward, then twice that backward) at
    # this machine's single-thread sgemm rate for a block's largest product
    B, BT = 16, 16 * T
    flops = 3 * (L * (24 * BT * C * C + 4 * B * T * T * C) + 2 * BT * C * V)
    a = np.ones((BT, C), np.float32); b = np.ones((C, 4 * C), np.float32)
    rate = []
    for _ in range(20):
        begin = time.perf_counter(); a @ b; rate.append(time.perf_counter() - begin)
    out["sgemm"] = 2 * BT * C * 4 * C / statistics.median(rate)
    out["floor"] = flops / out["sgemm"]
    print(json.dumps(out))
""")


def _train(quick: bool) -> list[Row]:
    """Ours and PyTorch's step alternately in one process (so load on a shared machine
    hits both alike), after lowering ours into an empty plan cache (the cold cost)."""
    repeat = 5 if quick else 20
    workload = "char model 4x128 train step B=16 T=64 AdamW"
    code = _TRAIN.format(root=str(ROOT), shape=SMALL, repeat=repeat,
                         torch=module_available("torch"))
    with tempfile.TemporaryDirectory(prefix="tensorcode-gpt-train-cache-") as cache_dir:
        out = _fresh(code, cache_dir)
    rows = [Row(SUITE, workload, "tensorcode", out["step"] * 1e3, unit="ms",
                note="layered plans: one block forward and one block backward for every "
                     "layer; ours and torch timed alternately in one process"),
            Row(SUITE, "char model 4x128 cold lowering of the training plans", "tensorcode",
                out["lowered"], unit="s",
                note=f"five plans ({out['kernels']} kernels), empty plan cache, incl. "
                     f"recording; {out['lowered_cpu']:.1f} s of CPU; the same for any "
                     "depth")]
    rows.insert(1, Row(SUITE, workload, "tensorcode numba", out["numba_step"] * 1e3,
                       unit="ms", note=f"the same plans on backend='numba', timed alternately; "
                                       f"numba/llvm {out['numba_step'] / out['step']:.2f}x; "
                                       f"its cold lowering {out['numba_lowered']:.1f} s"))
    if "torch_step" in out:
        rows.insert(2, Row(SUITE, workload, "torch eager", out["torch_step"] * 1e3, unit="ms",
                           note=f"torch {out['version']} eager, {out['threads']} threads"))
    floor = out["floor"]
    best = (f"; so no step can beat this torch step by more than "
            f"{out['torch_step'] / floor:.2f}x" if "torch_step" in out else "")
    rows.append(Row(SUITE, "char model 4x128 train step: its matmuls alone", "sgemm floor",
                    floor * 1e3, unit="ms",
                    note=f"the step's matmul flops at this machine's one-thread sgemm rate "
                         f"({out['sgemm'] / 1e9:.0f} GFLOP/s, measured in the same process)"
                         f"{best}; tensorcode's step is {floor / out['step']:.0%} matmul"))
    return rows


_FRESH = textwrap.dedent("""
    import time
    start, cpu = time.perf_counter(), time.process_time()
    import json, resource, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from tensorcode.models import gpt2
    model = gpt2.load({directory!r}, context=8, cache_length={cache})
    loaded = time.perf_counter() - start
    model.layered().lower_decode()
    lowered = time.perf_counter() - start
    out = gpt2.generate(model, np.array([464]), 1)
    first = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:  # this program's own high-water mark: ru_maxrss keeps the forking parent's
        with open("/proc/self/status") as status:
            peak = [int(line.split()[1]) / 1024 for line in status
                    if line.startswith("VmHWM:")][0]
    except (OSError, IndexError):
        pass
    print(json.dumps({{"first_token": first, "loaded": loaded, "lowered": lowered,
                      "cpu": time.process_time() - cpu, "peak_mb": peak}}))
""")

_COLD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {root!r})
    from tensorcode.models import gpt2
    model = gpt2.load({directory!r}, context=8, cache_length={cache})
    start, cpu = time.perf_counter(), time.process_time()
    model.layered().lower_decode()
    print(json.dumps({{"lowering": time.perf_counter() - start,
                      "cpu": time.process_time() - cpu}}))
""")


def _fresh(code: str, cache_dir: str) -> dict:
    """Run ``code`` in a fresh process with its own plan cache and Python's bytecode
    cache on and primed (as a user's is; see ``compiler_llvm.environment``)."""
    from .compiler_llvm import environment, prime

    prime("tensorcode.models.gpt2", "tensorcode.models.gpt_training")
    env = environment(TENSORCODE_CACHE_DIR=cache_dir)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=3600, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _compile_rows(label: str, directory: pathlib.Path) -> list[Row]:
    cache = DECODE_CACHE
    with tempfile.TemporaryDirectory(prefix="tensorcode-gpt-cache-") as cache_dir:
        cold = _fresh(_COLD.format(root=str(ROOT), directory=str(directory), cache=cache),
                      cache_dir)
        warm = _fresh(_FRESH.format(root=str(ROOT), directory=str(directory), cache=cache),
                      cache_dir)
    return [Row(SUITE, f"{label} cold lowering of the decode plans", "tensorcode",
                cold["lowering"], unit="s",
                note=f"empty plan cache; four plans (embedding, the block's two halves, "
                     f"head) for any depth; {cold['cpu']:.1f} s of CPU; target < 30 s"),
            Row(SUITE, f"{label} fresh process to first token", "tensorcode",
                warm["first_token"], unit="s",
                note=f"warm plan cache; import + load {warm['loaded']:.1f} s, plans "
                     f"{warm['lowered'] - warm['loaded']:.1f} s; {warm['cpu']:.1f} s of CPU; "
                     "target < 3 s"),
            Row(SUITE, f"{label} fresh process peak memory", "tensorcode", warm["peak_mb"],
                unit="MB", note=f"resident set of the first-token process (weights "
                                f"{4 * _config(GPT2_124M).parameter_count() / 1e6:.0f} MB, "
                                "mapped from the file)")]


def run(quick: bool) -> list[Row]:
    rows: list[Row] = []
    sizes = [("small 4x128", SMALL)] + ([] if quick else [("gpt2-124M", GPT2_124M)])
    for label, shape in sizes:
        with tempfile.TemporaryDirectory(prefix="tensorcode-gpt-") as tmp:
            directory = pathlib.Path(tmp) / "model"
            started = time.perf_counter()
            _write_model(shape, directory)
            measured = _speed_rows(label, shape, directory, quick)
            if shape is GPT2_124M:
                measured += _compile_rows(label, directory)
            for row in measured:
                row.extra["suite_seconds"] = round(time.perf_counter() - started, 1)
            rows += measured
    if not quick:  # GPT-2 124M's cold lowering on the llvm backend beside numba
        from .compiler_llvm import large_plan_rows

        rows += large_plan_rows(quick)
    from .gpt_kernels import kernel_rows
    from .transformer_step import step_rows

    rows += _train(quick) + step_rows(quick)
    rows += kernel_rows(SUITE, "small 4x128", SMALL, 5 if quick else 20,
                        min(FORWARD_T, SMALL["block_size"]))
    if not quick:  # GPT-2 124M's forward, kernel by kernel (random weights)
        rows += kernel_rows(SUITE, "gpt2-124M", GPT2_124M, 3, FORWARD_T, train=False)
    return rows

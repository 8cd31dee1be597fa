"""The tools on product tasks against PyTorch twins (rows of the ``tools`` suite).

For each tool (``Scene`` on scikit-learn's digits, ``Decision`` on a 6-way sentence
classification built from the data-set descriptions scikit-learn ships, ``Chatbot`` on a
corpus of those descriptions' lines; ``benchmarks/tool_tasks.py``) and its PyTorch twin
of the same architecture, optimizer (Adam), learning rate and batches:

- warm ``fit`` per update: ``trainer.fit(experiences, epochs=E)`` after one warm-up
  fit (plans compiled, experiences prepared), against the twin's loop over the same
  batches (features computed once, as the trainer prepares them once);
- prediction: one input through the tool's call (input checks, featurization, one plan
  call, the softmax) against the same featurization and the twin's ``no_grad`` forward
  and softmax (for the Chatbot, a transformer over ``context`` characters, one
  next-character step: ``next_logits``, the ``[1, context]`` forward, against the
  twin's ``no_grad`` forward of the same row);
- first ``fit`` in a fresh process with an empty plan cache, per update (compiles
  included), beside the twin's first update in a fresh process.

PyTorch runs in its own process, single-threaded like the plans, measured before and
after TensorCode (the faster of the two runs is kept: the machine may be loaded).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

from .harness import Row, format_table, median_time, module_available, run_in_subprocess

SUITE = "tools"
KINDS = ("scene", "decision", "chat")
LR = {"scene": 0.003, "decision": 0.01, "chat": 0.01}
WORK = {"scene": "Scene on digits (batch 32, 10 descriptions)",
        "decision": "Decision on 6-way sentences (batch 32)",
        "chat": "Chatbot (transformer) on description lines (8 pairs per batch)"}


def _tasks(kind: str) -> dict:
    from . import tool_tasks

    return {"scene": tool_tasks.scene_task, "decision": tool_tasks.decision_task,
            "chat": tool_tasks.chat_task}[kind]()


def build(kind: str) -> tuple[Any, Any, list, dict]:
    """The tool, its trainer and its captured experiences for ``kind``."""
    import tensorcode as tc
    from tensorcode.tools import Chatbot, Decision, Scene
    from tensorcode.training import Trainer

    task = _tasks(kind)
    if kind == "scene":
        tool: Any = Scene(observation_size=task["observation_size"])
        train_rows = [row for inputs, _ in task["batches"] for row in inputs]
        tool.fit_standardizer([row["observation"] for row in train_rows])
    elif kind == "decision":
        tool = Decision()
    else:
        tool = Chatbot()
    trainer = Trainer.from_tool(tool, lr=LR[kind], optimizer=lambda _: tc.optim.Adam())
    experiences = [trainer.capture(inputs, targets, source=kind)
                   for inputs, targets in task["batches"]]
    return tool, trainer, experiences, task


def tensorcode_times(kind: str, quick: bool) -> dict:
    tool, trainer, experiences, task = build(kind)
    epochs = 2 if quick else 6
    trainer.fit(experiences, epochs=1, progress=False)  # compile and prepare
    per_update = min(median_time(lambda: trainer.fit(experiences, epochs=epochs,
                                                     progress=False),
                                 repeat=3, warmup=0) for _ in range(2))
    per_update /= epochs * len(experiences)
    tool.eval()
    if kind == "chat":
        from tensorcode.tools.chatbot import TURN

        sequence = tool.encode(task["test"][0][0]) + [TURN]
        predict = median_time(lambda: tool.next_logits(sequence), repeat=200, warmup=5)
        accuracy = float("nan")
    else:
        inputs, labels = task["test"]
        predict = median_time(lambda: tool(inputs[0]), repeat=200, warmup=5)
        found = tool(inputs)
        chosen = [f.index for f in found] if kind == "scene" else [
            list(f.ids).index(f.chosen) for f in found]
        accuracy = float(np.mean([c == t for c, t in zip(chosen, labels)]))
    return {"update": per_update, "predict": predict, "accuracy": accuracy,
            "updates": len(experiences)}


def first_fit(kind: str) -> dict:
    """In a fresh process with an empty plan cache: the first ``fit`` (one epoch) per
    update, compiles included."""
    start = time.perf_counter()
    _, trainer, experiences, _ = build(kind)
    built = time.perf_counter()
    trainer.fit(experiences, epochs=1, progress=False)
    done = time.perf_counter()
    return {"per_update": (done - built) / len(experiences), "fit": done - built,
            "setup": built - start}


def torch_times(quick: bool, kinds: tuple[str, ...] = KINDS) -> dict:
    """The twins' figures (seconds), measured in this (fresh) process: each twin's first
    update first, then the warm figures."""
    import torch
    import torch.nn.functional as F

    from benchmarks.torch_gpt_twin import gpt_twin
    from benchmarks.torch_pair_scorer import pair_scorer
    from tensorcode.operations.base import row_bucket
    from tensorcode.tools import Chatbot
    from tensorcode.tools.chatbot import TURN
    from tensorcode.tools.scorer import PairScorer

    torch.set_num_threads(1)
    torch.manual_seed(0)
    results: dict = {}
    for kind in kinds:
        task = _tasks(kind)
        if kind == "chat":
            bot = Chatbot()
            c = bot.config
            model = gpt_twin(bot.vocab, c["context"], c["dim"], c["heads"], c["layers"])
            batches = []
            for inputs, targets in task["batches"]:
                ids, _, _ = bot.teacher_rows(inputs, targets)
                padded = np.zeros((row_bucket(len(ids)), ids.shape[1]), np.int64)
                padded[:len(ids)] = ids
                batches.append((torch.from_numpy(padded),
                                torch.from_numpy(bot.check_target(inputs, targets))))

            def loss_of(batch: tuple) -> Any:
                logits = model(batch[0])
                onehot = batch[1]
                return -(F.log_softmax(logits, -1) * onehot).sum() / onehot.sum().clamp(min=1)

            sequence = bot.encode(task["test"][0][0]) + [TURN]

            def predict() -> Any:
                with torch.no_grad():
                    row, position = bot.window(sequence)
                    return model(torch.from_numpy(row))[0, position]
        else:
            query = 64 if kind == "scene" else None
            scorer = PairScorer(query, None)  # TensorCode's featurization (no plan)
            model = pair_scorer(32, 32, 4096, query_size=query)
            mean = task.get("mean")
            scale = task.get("scale")

            def features(inputs: list) -> list:
                if kind == "scene":
                    queries = np.stack([(np.asarray(i["observation"]) - mean) / scale
                                        for i in inputs]).astype(np.float32)
                    items = [i["descriptions"] for i in inputs]
                else:
                    queries = [i["context"] for i in inputs]
                    items = [[h["text"] for h in i["hypotheses"]] for i in inputs]
                return [torch.from_numpy(np.asarray(a)) for a in scorer.convert([queries,
                                                                                  items])]

            batches = [(features(inputs), torch.tensor(targets))
                       for inputs, targets in task["batches"]]

            def loss_of(batch: tuple) -> Any:
                return F.cross_entropy(model(*batch[0]), batch[1])

            one = task["test"][0][0]

            def predict() -> Any:
                with torch.no_grad():
                    arrays = features([one])
                    return torch.softmax(model(*arrays)[0], -1)

        optimizer = torch.optim.Adam(model.parameters(), lr=LR[kind])

        def update(batch: tuple) -> float:
            optimizer.zero_grad()
            loss = loss_of(batch)
            loss.backward()
            optimizer.step()
            return float(loss)

        start = time.perf_counter()
        update(batches[0])
        first = time.perf_counter() - start
        epochs = 2 if quick else 6

        def fit() -> None:
            for _ in range(epochs):
                for k in np.random.default_rng(0).permutation(len(batches)):
                    update(batches[int(k)])

        fit()  # warm
        per_update = min(median_time(fit, repeat=3, warmup=0) for _ in range(2))
        per_update /= epochs * len(batches)
        results[kind] = {"first": first, "update": per_update,
                         "predict": median_time(predict, repeat=200, warmup=5)}
        if kind != "chat":
            inputs, labels = task["test"]
            with torch.no_grad():
                chosen = model(*features(inputs)).argmax(-1).numpy()
            results[kind]["accuracy"] = float(np.mean(chosen == np.asarray(labels)))
    return results


def _torch(kinds: tuple[str, ...]) -> dict:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import json, sys; sys.path.insert(0, {here!r}); "
            "from benchmarks.suite_tools_products import torch_times; "
            f"print(json.dumps(torch_times({QUICK[0]!r}, {kinds!r})))")
    return run_in_subprocess(code, timeout=1800)


QUICK = [False]


def rows(quick: bool, kinds: tuple[str, ...] = KINDS) -> list[Row]:
    """The rows (see the module doc) of the tools ``kinds`` names; one explaining row
    when scikit-learn is missing."""
    if not module_available("sklearn"):
        return [Row(SUITE, "tools on product tasks", "scikit-learn (not installed)", 0.0,
                    note="pip install 'tensorcode[bench]' (scikit-learn's digits and "
                         "descriptions are the data)")]
    QUICK[0] = quick
    have_torch = module_available("torch")
    twins = [_torch(kinds)] if have_torch else []
    mine = {kind: tensorcode_times(kind, quick) for kind in kinds}
    if have_torch:
        twins.append(_torch(kinds))
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cold = {}
    with tempfile.TemporaryDirectory() as empty:
        for kind in mine:
            code = (f"import json, sys; sys.path.insert(0, {here!r}); "
                    "from benchmarks.suite_tools_products import first_fit; "
                    f"print(json.dumps(first_fit({kind!r})))")
            saved = os.environ.get("TENSORCODE_CACHE_DIR")
            os.environ["TENSORCODE_CACHE_DIR"] = os.path.join(empty, kind)
            try:
                cold[kind] = run_in_subprocess(code, timeout=3600)
            finally:
                if saved is None:
                    del os.environ["TENSORCODE_CACHE_DIR"]
                else:
                    os.environ["TENSORCODE_CACHE_DIR"] = saved
    out: list[Row] = []
    for kind, found in mine.items():
        work = WORK[kind]
        twin = ({key: min(t[kind][key] for t in twins) for key in ("first", "update",
                                                                    "predict")}
                if twins else None)
        accuracy = ("" if kind == "chat" else
                    f"; held-out accuracy {found['accuracy']:.3f}"
                    + (f" (twin {twins[-1][kind]['accuracy']:.3f})" if twins else ""))
        out.append(Row(SUITE, f"{work}: warm fit per update", "tensorcode",
                       found["update"] * 1e6,
                       note=f"trainer.fit over {found['updates']} experiences, Adam{accuracy}"))
        if twin:
            out.append(Row(SUITE, f"{work}: warm fit per update", "torch eager twin",
                           twin["update"] * 1e6, note="same batches, architecture, Adam, lr; "
                           "features computed once"))
        out.append(Row(SUITE, f"{work}: prediction", "tensorcode", found["predict"] * 1e6,
                       note="next_logits (one step)" if kind == "chat" else
                       "tool(input): checks, features, one plan call, softmax"))
        if twin:
            out.append(Row(SUITE, f"{work}: prediction", "torch eager twin",
                           twin["predict"] * 1e6, note="same features + no_grad forward"))
        out.append(Row(SUITE, f"{work}: first fit, fresh process", "tensorcode",
                       cold[kind]["per_update"] * 1e3, unit="ms",
                       note=f"empty plan cache: one epoch in {cold[kind]['fit']:.1f} s, "
                            "compiles included"))
        if twin:
            out.append(Row(SUITE, f"{work}: first fit, fresh process", "torch eager twin",
                           twin["first"] * 1e3, unit="ms",
                           note="its first update in a fresh process"))
    return out


if __name__ == "__main__":  # pragma: no cover - a manual entry point
    # python -m benchmarks.suite_tools_products [--quick] [scene|decision|chat ...]
    chosen = tuple(a for a in sys.argv[1:] if a in KINDS) or KINDS
    print(format_table(rows("--quick" in sys.argv, chosen)))

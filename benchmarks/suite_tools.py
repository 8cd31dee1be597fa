"""Owned tools: a Decision prediction and one Decision training step against the same
architecture written in PyTorch eager.

The workload is one context with 8 hypotheses (the default config: a 4096 x 32 hashed
feature embedding, 32 hidden units). Both peers featurize the texts with the same
function (TensorCode's hashed n-grams, cached per text) and run the same computation:

- predict: TensorCode's ``decision.decide(inputs)`` (input checks, one plan call, the
  softmax) against featurization + ``torch.no_grad`` forward + softmax;
- train step: TensorCode's ``trainer.step(experience)`` on a captured experience
  (replay preparation with featurization, one compiled forward-and-gradient plan, the
  SGD update) against featurization + forward + cross-entropy + backward +
  ``torch.optim.SGD.step`` (zeroing the gradients first); and ``trainer.fit`` per
  update, which runs ``steps_per_call`` updates in one compiled ``run_steps`` call
  (the experience prepared once per fit, as a training loop over data does).

PyTorch runs in its own process, single-threaded like the compiled plan.
"""

from __future__ import annotations

import sys

from .harness import Row, median_time, module_available, run_in_subprocess

SUITE = "tools"
HYPOTHESES = 8


def inputs() -> dict:
    texts = ["free disk space on the host", "renew the TLS certificate",
             "restart the stuck service", "add capacity and scale out",
             "fix the DNS record", "reset the user's password",
             "replace the faulty network link", "roll back the latest deploy"]
    return {"context": "writes fail on the billing api: no space left on device",
            "hypotheses": [{"id": f"h{k}", "text": t} for k, t in enumerate(texts)]}


def run(quick: bool) -> list[Row]:
    import tensorcode as tc
    from tensorcode.tools import Decision
    from tensorcode.training import Trainer

    repeat = 30 if quick else 200
    tool = Decision(seed=0)
    example = inputs()
    rows = []
    predict = median_time(lambda: tool.decide(example), repeat=repeat, warmup=5)
    work = f"Decision predict (1 context, {HYPOTHESES} hyp.)"
    rows.append(Row(SUITE, work, "tensorcode", predict * 1e6,
                    note="decide(): checks + one plan call + softmax"))
    trainer = Trainer.from_tool(tool, lr=0.01, optimizer=lambda _: tc.optim.Sgd())
    experience = trainer.capture(example, "h0", source="bench")
    trainer.step(experience)  # lower (and compile) before timing
    step = median_time(lambda: trainer.step(experience), repeat=repeat, warmup=3)
    work_step = f"Decision train step ({HYPOTHESES} hyp.)"
    rows.append(Row(SUITE, work_step, "tensorcode", step * 1e6,
                    note="trainer.step(experience): replay prep + plan + SGD"))
    epochs = 64
    fit = median_time(lambda: trainer.fit([experience], epochs=epochs, progress=False),
                      repeat=max(5, repeat // 20), warmup=1) / epochs
    rows.append(Row(SUITE, work_step, f"tensorcode fit, {trainer.steps_per_call} per call",
                    fit * 1e6, note=f"trainer.fit([experience], epochs={epochs}) per update: "
                    f"run_steps, {trainer.steps_per_call} fused updates per compiled call"))
    if module_available("torch"):
        code = (f"import json, sys; sys.path.insert(0, {sys.path[0]!r}); "
                "from benchmarks.suite_tools import torch_times; "
                f"print(json.dumps(torch_times({quick!r})))")
        times = run_in_subprocess(code)
        rows.append(Row(SUITE, work, "torch eager", times["predict"] * 1e6,
                        note="same features + no_grad forward + softmax"))
        rows.append(Row(SUITE, work_step, "torch eager", times["step"] * 1e6,
                        note="same features + forward + CE + backward + SGD"))
    from .suite_tools_products import rows as product_rows

    return rows + product_rows(quick)


def torch_times(quick: bool) -> dict:
    """PyTorch eager medians (seconds) for the same model and workload."""
    import numpy as np
    import torch

    from benchmarks.torch_pair_scorer import pair_scorer
    from tensorcode.tools.scorer import PairScorer

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dim = hidden = 32
    buckets = 4096
    scorer = PairScorer(None, None, dim=dim, hidden=hidden, buckets=buckets)  # features

    model = pair_scorer(dim, hidden, buckets)
    example = inputs()
    context = example["context"]
    texts = [h["text"] for h in example["hypotheses"]]

    def features() -> list:
        return [torch.from_numpy(np.asarray(a)) for a in scorer.convert([context, texts])]

    def predict() -> object:
        with torch.no_grad():
            logits = model(*features())
            return torch.softmax(logits[:HYPOTHESES], -1)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    target = torch.tensor([0])

    def step() -> float:
        optimizer.zero_grad()
        logits = model(*features())
        loss = torch.nn.functional.cross_entropy(logits.unsqueeze(0), target)
        loss.backward()
        optimizer.step()
        return float(loss)

    repeat = 30 if quick else 200
    return {"predict": median_time(predict, repeat=repeat, warmup=5),
            "step": median_time(step, repeat=repeat, warmup=5)}

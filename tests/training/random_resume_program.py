"""The program the exact-resume test runs in fresh processes (``python THIS MODE DIR``).

An MLP with dropout on both hidden layers trains with Adam on shuffled minibatches
(the Trainer's generator draws the order and every dropout mask), then a sampling loop
draws tokens with ``tc.random.sample``. Modes:

- ``straight``: 4 epochs, then 24 sampled tokens, uninterrupted;
- ``first``: 2 epochs, then a checkpoint;
- ``resume``: loads it, 2 more epochs, 12 tokens, then a checkpoint holding the
  sampler's generator state and last token in ``progress``;
- ``sample``: loads that, 12 more tokens.

Each writes ``MODE.json``; every float as ``float.hex``, so comparisons are bit for bit.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

import tensorcode as tc
from tensorcode.operations import MlpOperation
from tensorcode.training import Trainer


def experiences(mlp):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(5):
        x = rng.normal(size=(8, 2)).astype(np.float32)
        session = tc.trace()
        y = session.run(lambda: mlp(x))
        session.supervise(y, np.sin(x[:, :1] + x[:, 1:]), loss="mse", source="synthetic")
        out.append(session)
    return out


def sample_tokens(mlp, generator, count, token):
    """A tiny language model: logits over 8 tokens from the MLP's (eval) outputs."""
    mlp.eval()
    grid = np.stack(np.meshgrid(np.linspace(-1, 1, 8), np.linspace(-1, 1, 8)), -1)
    table = mlp(grid.reshape(-1, 2).astype(np.float32)).reshape(8, 8) * 4
    mlp.train()
    tokens = []
    for _ in range(count):
        token = int(tc.random.sample(table[token][None], generator, temperature=0.9,
                                     top_k=6, top_p=0.95)[0])
        tokens.append(token)
    return tokens


def main(mode: str, directory: str) -> None:
    folder = pathlib.Path(directory)
    mlp = MlpOperation([2, 16, 16, 1], dropout=0.1, seed=1)
    data = experiences(mlp)
    mlp.train()
    trainer = Trainer.from_ops({"mlp": mlp}, optimizer=tc.optim.Adam(), lr=0.01, seed=5)
    sampler = tc.random.Generator(77)
    token, losses, tokens = 0, [], []
    if mode == "straight":
        losses = trainer.fit(data, epochs=4, progress=False)
        tokens = sample_tokens(mlp, sampler, 24, token)
    elif mode == "first":
        losses = trainer.fit(data, epochs=2, progress=False)
        trainer.save_checkpoint(folder / "first")
    elif mode == "resume":
        trainer.load_checkpoint(folder / "first")
        losses = trainer.fit(data, epochs=2, progress=False)
        tokens = sample_tokens(mlp, sampler, 12, token)
        trainer.save_checkpoint(folder / "sampling",
                                progress={"sampler": sampler.get_state(), "token": tokens[-1]})
    else:
        progress = trainer.load_checkpoint(folder / "sampling")
        sampler.set_state(progress["sampler"])
        tokens = sample_tokens(mlp, sampler, 12, progress["token"])
    result = {"losses": [float(v).hex() for v in losses], "tokens": tokens,
              "parameters": [[float(v).hex() for v in p.reshape(-1)]
                             for _, p in mlp.named_parameters()],
              "generator": trainer.generator.get_state()}
    (folder / f"{mode}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

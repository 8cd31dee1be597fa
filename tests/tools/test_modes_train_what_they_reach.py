"""Each Investigator mode trains only the operation its loss reaches: with plain SGD,
momentum, Adam and AdamW (weight decay included), a step of one mode leaves every other
operation's parameters, optimizer state and step counts exactly as they were, as PyTorch
leaves a parameter whose ``grad`` is ``None``; through ``trainer.step`` (one update) and
through ``fit`` (fused ``run_steps`` calls)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.tools.investigator import Investigator
from tensorcode.training import Trainer

CONFIG = {"dim": 8, "hidden": 8, "buckets": 128, "retrieval_encoder": {"dim": 8}}
PAIR = {"premise": "The connection was refused.", "hypothesis": "The connection succeeded."}
CANDIDATES = [{"id": "a", "text": "free disk space"}, {"id": "b", "text": "restart it"}]
EXAMPLES = {
    "verification": ({"mode": "verification", "inputs": PAIR}, "contradiction", "verifier"),
    "proposal": ({"mode": "proposal", "inputs": {"evidence": "disk full",
                                                 "hypotheses": CANDIDATES}}, "a", "proposer"),
    "rank": ({"query": "disk full", "candidates": CANDIDATES}, "a", "ranker"),
    "retrieval": ({"mode": "retrieval", "inputs": {
        "queries": ["How was the service restored?"],
        "documents": ["Restoring the connection recovered the service.",
                      "The maintenance window starts tomorrow."]}}, [[True, False]],
        "episodic_encoder"),
}
OPTIMIZERS = {
    "sgd": lambda p: tc.optim.Sgd(p, lr=0.05, backend="reference"),
    "sgd-momentum-decay": lambda p: tc.optim.Sgd(p, lr=0.05, momentum=0.9, weight_decay=0.01,
                                                 backend="reference"),
    "adam": lambda p: tc.optim.Adam(p, lr=0.01, weight_decay=0.01, backend="reference"),
    "adamw-amsgrad": lambda p: tc.optim.AdamW(p, lr=0.01, amsgrad=True, backend="reference"),
}


def snapshot(trainer: Trainer, owner: str) -> dict:
    """Every slot of the operations other than ``owner``: value and optimizer state."""
    state = trainer.optimizer.state_dict()["state"]
    kept = {}
    for k, slot in enumerate(trainer.parameters.layout.slots):
        if not slot.name.startswith(owner + "."):
            kept[slot.name] = (trainer.parameters.payloads()[k].copy(),
                               {key: np.array(v, copy=True)
                                for key, v in state.get(k, {}).items()})
    return kept


def owned(trainer: Trainer, owner: str) -> list[np.ndarray]:
    return [p.copy() for s, p in zip(trainer.parameters.layout.slots,
                                     trainer.parameters.payloads())
            if s.name.startswith(owner + ".")]


@pytest.mark.parametrize("fused", [False, True], ids=["step", "fit-fused"])
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_each_mode_moves_only_its_own_operation(optimizer, fused):
    model = Investigator(CONFIG, backend="reference")
    trainer = Trainer.from_tool(model, optimizer=OPTIMIZERS[optimizer], backend="reference",
                                steps_per_call=4 if fused else 1)
    captured = {mode: trainer.capture(inputs, target, "test")
                for mode, (inputs, target, _) in EXAMPLES.items()}
    # every operation gets optimizer state first, so momentum and moments could move it
    for mode in EXAMPLES:
        trainer.step(captured[mode])
    for mode, (_, _, owner) in EXAMPLES.items():
        before, mine = snapshot(trainer, owner), owned(trainer, owner)
        fingerprint = model.verifier.fingerprint()
        if fused:
            trainer.fit([captured[mode]] * 4, progress=False, shuffle=False)
        else:
            trainer.step(captured[mode])
        after = snapshot(trainer, owner)
        assert after.keys() == before.keys()
        for name, (value, state) in before.items():
            assert np.array_equal(after[name][0], value), f"{mode} moved {name}"
            assert after[name][1].keys() == state.keys(), f"{mode} changed {name}'s state"
            for key in state:
                assert np.array_equal(after[name][1][key], state[key]), \
                    f"{mode} changed {name}'s {key}"
        assert any(not np.array_equal(a, b) for a, b in zip(owned(trainer, owner), mine)), \
            f"{mode} did not train {owner}"
        if owner != "verifier":  # the verifier's calibration stays valid
            assert model.verifier.fingerprint() == fingerprint

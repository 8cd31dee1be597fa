"""Checkpoints are pure state: named snapshots under structured paths.

``named_snapshot`` walks a module's parameters under paths such as ``0.weights``; a
restore builds a new table and touches no graph.
"""

from __future__ import annotations

import tensorcode as tc

from . import GuideResult


def run(quick: bool = False) -> GuideResult:
    """Snapshot an MLP's parameters under named paths and restore them into a new table."""
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [3, 4, 2], activation="relu", init=tc.init.xavier(11))
    network = tape.into_network()
    parameters = network.parameters()

    snapshot = tc.checkpoint.named_snapshot(parameters, mlp)
    restored = tc.checkpoint.named_restore(parameters, mlp, snapshot)
    lines = [f"{path:<12} {list(payload.shape)}" for path, payload in snapshot.items()]
    same = restored.equals(parameters)
    lines += ["", f"restored == original, payload for payload: {same}"]
    return GuideResult("named_checkpoint", "a checkpoint is pure state", lines,
                       claims={"paths": {p: list(v.shape) for p, v in snapshot.items()},
                               "restored_equal": same})

"""Checkpoints are pure state: named snapshots under structured paths, and positional ones.

``named_snapshot`` walks a module's parameters under paths such as ``0.weights``;
``snapshot`` copies the same payloads in visit order (the form for the same module in
the same code). A restore of either builds a new table and touches no graph.

    python examples/guide/named_checkpoint.py [--plot PATH]   (the plate needs the plot extra)
"""

from __future__ import annotations

import tensorcode as tc
from tensorcode.guide import GuideResult, main


def run(quick: bool = False) -> GuideResult:
    """Snapshot an MLP's parameters under named paths and by position, and restore both
    into new tables."""
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [3, 4, 2], activation="relu", init=tc.init.xavier(11))
    network = tape.into_network()
    parameters = network.parameters()

    # A named snapshot is the module's parameters under structured paths; a restore
    # builds a new table from one.
    snapshot = tc.checkpoint.named_snapshot(parameters, mlp)
    restored = tc.checkpoint.named_restore(parameters, mlp, snapshot)
    # The positional form, side by side: the same payloads in visit order.
    payloads = tc.checkpoint.snapshot(parameters, mlp)
    restored_by_position = tc.checkpoint.restore(parameters, mlp, payloads)

    lines = [f"{path:<12} {list(payload.shape)}" for path, payload in snapshot.items()]
    same = restored.equals(parameters)
    same_by_position = restored_by_position.equals(parameters)
    lines += ["", f"positional snapshot: {len(payloads)} payloads in visit order "
                  f"{[list(p.shape) for p in payloads]}",
              f"restored by position == original: {same_by_position}",
              f"restored == original, payload for payload: {same}"]
    return GuideResult("named_checkpoint", "a checkpoint is pure state", lines,
                       claims={"paths": {p: list(v.shape) for p, v in snapshot.items()},
                               "restored_equal": same,
                               "positional_shapes": [list(p.shape) for p in payloads],
                               "restored_by_position_equal": same_by_position})


if __name__ == "__main__":
    main("named_checkpoint", run, __doc__)

"""Scene and Planner: their inputs, their targets, training, and save/load.

A ``Scene`` matches an observation (a numeric vector) to one of the descriptions supplied
with it; its target names the description that applies. A ``Planner`` predicts each
supplied candidate's outcome for a state and ranks them; its target is the observed
outcome of the one candidate that was tried.

    python examples/tools/scene_and_planner.py [--backend reference]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import tensorcode as tc
from tensorcode.compiler.backends import DEFAULT_BACKEND
from tensorcode.tools import Planner, Scene
from tensorcode.training import Trainer

LIGHTS = ["the light is red", "the light is green", "the light is off"]
SCENES = [({"observation": [1.0, 0.0, 0.0], "descriptions": LIGHTS}, "the light is red"),
          ({"observation": [0.0, 1.0, 0.0], "descriptions": LIGHTS}, 1),
          ({"observation": [0.0, 0.0, 0.0], "descriptions": LIGHTS[::-1]}, "the light is off")]
ACTIONS = [{"candidate_id": "scale", "text": "scale out the workers"},
           {"candidate_id": "wait", "text": "wait and keep watching"},
           {"candidate_id": "rollback", "text": "roll back the release"}]
# each experience: a state, the candidates on offer, and what happened to the one tried
OBSERVED = [("traffic doubled and latency rises", "scale", 0.9),
            ("traffic doubled and latency rises", "wait", -0.6),
            ("errors jumped after the release", "rollback", 0.8),
            ("errors jumped after the release", "scale", -0.3),
            ("everything is quiet", "wait", 0.7),
            ("everything is quiet", "rollback", -0.6)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    args = parser.parse_args()
    backend = args.backend
    optimizer = lambda parameters: tc.optim.Adam(backend=backend or DEFAULT_BACKEND)  # noqa: E731

    scene = Scene(observation_size=3, dim=16, hidden=16, buckets=1024, backend=backend)
    trainer = Trainer.from_tool(scene, lr=0.05, optimizer=optimizer, backend=backend)
    experience = trainer.capture([s for s, _ in SCENES], [t for _, t in SCENES],
                                 source="authored-example:scene")
    losses = trainer.fit([experience], epochs=30, progress=False)
    scene.eval()
    print(f"Scene loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    for inputs, _ in SCENES:
        matched = scene.match(inputs)
        print(f"  observation {inputs['observation']}: {matched.description!r} "
              f"(p={matched.probabilities[matched.index]:.2f})")

    planner = Planner(dim=16, hidden=16, buckets=1024, backend=backend)
    trainer = Trainer.from_tool(planner, lr=0.05, optimizer=optimizer, backend=backend)
    inputs = [{"state": state, "candidates": ACTIONS} for state, _, _ in OBSERVED]
    targets = [{"candidate_id": tried, "outcome": outcome} for _, tried, outcome in OBSERVED]
    experience = trainer.capture(inputs, targets, source="authored-example:planner")
    losses = trainer.fit([experience], epochs=60, progress=False)
    planner.eval()
    print(f"Planner loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    for state in dict.fromkeys(s for s, _, _ in OBSERVED):
        ranked = planner.plan({"state": state, "candidates": ACTIONS})
        print(f"  {state!r}: " + ", ".join(f"{r.candidate_id} {r.outcome:+.2f}"
                                           for r in ranked))

    with tempfile.TemporaryDirectory() as work:
        planner.save_pretrained(pathlib.Path(work) / "planner")
        again = Planner.from_pretrained(pathlib.Path(work) / "planner", backend=backend)
        same = again.plan(inputs[0]) == planner.plan(inputs[0])
        print(f"reloaded planner ranks identically: {same}")


if __name__ == "__main__":
    main()

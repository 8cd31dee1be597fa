"""The owned-vector lifecycle: a Latent in a Space, traced, saved, reloaded, trained.

The training guide's ``ownedVectorLifecycle``: build a ``Latent`` in a ``Space``, feed
it to an operation under a trace, save the experience with ``latent_codecs()`` (the
allowlist for ``Latent`` and ``Space``), load it back bound to the same operation, and
train on it. A ``CandidateSet`` is a vector record too, but ``latent_codecs()`` does not
cover it: saving one needs its own allowlist entry, and loading needs the same entry.

    python examples/owned_vector_lifecycle.py [--backend reference]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile

import tensorcode as tc
from tensorcode.errors import ArtifactError, TensorCodeError
from tensorcode.operations import Classifier
from tensorcode.operations.vec import CandidateSet, Space, latent_codecs
from tensorcode.training import Trainer, load_experience


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        run(pathlib.Path(work), args.backend)


def run(work: pathlib.Path, backend: str | None) -> None:
    space = Space("sensor-embedding", 4)
    latent = space.latent([0.2, -0.4, 1.0, 0.5])
    head = Classifier(4, ["normal", "fault"], seed=1, backend=backend)

    session = tc.trace()
    prediction = session.run(lambda: head(latent))
    session.supervise(prediction, "fault", source="technician:ticket-7")
    session.save(work / "latent.json", operations={"head": head}, codecs=latent_codecs())
    print(f"saved a trace holding {latent.space.name}[{latent.space.dim}] with "
          f"latent_codecs() = {sorted(latent_codecs())}")

    loaded = load_experience(work / "latent.json", operations={"head": head},
                             codecs=latent_codecs())
    print(f"reloaded Latent equals the original: {loaded.calls[0].inputs[0].value == latent}")
    trainer = Trainer.from_ops({"head": head}, lr=0.5, backend=backend)
    losses = trainer.fit([loaded], epochs=10, progress=False)
    print(f"trained on the reloaded trace: loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
          f"predicts {head.predict(latent)!r}")

    candidates = CandidateSet(space, ["pump", "valve"], [[1, 0, 0, 1], [0, 1, 1, 0]])
    batch = tc.trace()
    batch.supervise(batch.run(lambda: head(candidates)), ["fault", "normal"],
                    source="technician:ticket-8")
    try:
        batch.save(work / "candidates.json", operations={"head": head},
                   codecs=latent_codecs())
    except TensorCodeError as error:
        print(f"a CandidateSet with latent_codecs() only is refused: {error}")
    codecs = {**latent_codecs(), "candidate-set": CandidateSet}
    batch.save(work / "candidates.json", operations={"head": head}, codecs=codecs)
    try:
        load_experience(work / "candidates.json", operations={"head": head},
                        codecs=latent_codecs())
    except ArtifactError as error:
        print(f"loading it without its entry is refused: {error}")
    again = load_experience(work / "candidates.json", operations={"head": head},
                            codecs=codecs)
    print(f"with its own entry it round-trips: {again.calls[0].inputs[0].value == candidates}")


if __name__ == "__main__":
    main()

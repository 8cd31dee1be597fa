"""Latent, Space and CandidateSet records: validated, captured by traces, and saved and
loaded only through an explicit codec allowlist."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError, ShapeError, TensorCodeError
from tensorcode.operations import LinearOperation
from tensorcode.operations.vec import CandidateSet, Latent, Space, latent_codecs
from tensorcode.training import load_experience

REF = "reference"
SPACE = Space("features", 3)


def test_records_validate_and_are_frozen():
    latent = SPACE.latent([0.5, -1.0, 2.0])
    assert latent == Latent(SPACE, np.array([0.5, -1.0, 2.0]))
    assert not latent.values.flags.writeable
    assert latent_codecs() == {"latent": Latent, "space": Space}
    with pytest.raises(ShapeError):
        SPACE.latent([1.0, 2.0])
    with pytest.raises(ValueError):
        SPACE.latent([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError):
        Space("has space", 3)
    with pytest.raises(ValueError):
        CandidateSet(SPACE, ["a", "a"], np.zeros((2, 3)))


def test_latents_round_trip_through_experiences_only_when_allowlisted(tmp_path):
    layer = LinearOperation(3, 2, seed=1, backend=REF)
    latent = SPACE.latent([0.5, -1.0, 2.0])
    session = tc.trace()
    session.supervise(session.run(lambda: layer(latent)), 1, source="test")
    with pytest.raises(TensorCodeError, match="no codec for a Latent"):
        session.save(tmp_path / "e.json", operations={"layer": layer})
    session.save(tmp_path / "e.json", operations={"layer": layer}, codecs=latent_codecs())
    loaded = load_experience(tmp_path / "e.json", operations={"layer": layer},
                             codecs=latent_codecs())
    assert loaded.calls[0].inputs[0].value == latent
    with pytest.raises(ArtifactError, match="'latent' is not allowlisted"):
        load_experience(tmp_path / "e.json", operations={"layer": layer})


def test_a_candidate_set_needs_its_own_entry(tmp_path):
    layer = LinearOperation(3, 2, seed=1, backend=REF)
    candidates = CandidateSet(SPACE, ["a", "b"], [[1, 2, 3], [4, 5, 6]])
    session = tc.trace()
    session.supervise(session.run(lambda: layer(candidates)), [0, 1], source="test")
    with pytest.raises(TensorCodeError, match="no codec for a CandidateSet"):
        session.save(tmp_path / "c.json", operations={"layer": layer}, codecs=latent_codecs())
    codecs = {**latent_codecs(), "candidate-set": CandidateSet}
    session.save(tmp_path / "c.json", operations={"layer": layer}, codecs=codecs)
    with pytest.raises(ArtifactError, match="'candidate-set' is not allowlisted"):
        load_experience(tmp_path / "c.json", operations={"layer": layer},
                        codecs=latent_codecs())
    loaded = load_experience(tmp_path / "c.json", operations={"layer": layer}, codecs=codecs)
    assert loaded.calls[0].inputs[0].value == candidates

"""Tools as a PyTorch user calls them: ``tool(inputs)`` predicts, ``tool.output`` answers
for exactly the items supplied, ``Trainer.from_tool`` follows the tool's backend, and a
``Scene`` standardizes raw observations the way scikit-learn's ``StandardScaler`` does."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ShapeError, TrainingError
from tensorcode.tools import ConfigError, Decision, Investigator, Planner, Scene
from tensorcode.training import Trainer

REF = "reference"
SMALL = {"dim": 8, "hidden": 8, "buckets": 256}
TEXTS = ["free disk space", "renew the certificate", "restart the service", "scale out",
         "fix dns"]


def decision_input(n):
    return {"context": "the disk is full on the database host",
            "hypotheses": [{"id": f"h{k}", "text": TEXTS[k]} for k in range(n)]}


# -- calling a tool predicts ---------------------------------------------------------------

def test_calling_a_tool_runs_its_prediction():
    decision = Decision(SMALL, backend=REF)
    called, named = decision(decision_input(3)), decision.decide(decision_input(3))
    assert called.chosen == named.chosen
    np.testing.assert_array_equal(called.probabilities, named.probabilities)
    scene = Scene(SMALL, observation_size=3, backend=REF)
    one = {"observation": [1.0, 0.0, -1.0], "descriptions": ["red", "green", "blue"]}
    assert scene(one).description == scene.match(one).description
    planner = Planner(SMALL, backend=REF)
    state = {"state": "the queue is long",
             "candidates": [{"candidate_id": "a", "text": "scale out"},
                            {"candidate_id": "b", "text": "wait"}]}
    assert [r.candidate_id for r in planner(state)] == [r.candidate_id
                                                         for r in planner.plan(state)]
    investigator = Investigator(SMALL, backend=REF)
    pair = {"premise": "the disk is full", "hypothesis": "writes fail"}
    verified = investigator({"mode": "verification", "inputs": pair})
    assert verified.label == investigator.verify(pair).label
    ranking = {"query": "disk full", "candidates": [{"id": "a", "text": "free space"},
                                                    {"id": "b", "text": "add cpu"}]}
    assert investigator(ranking) == investigator.rank(ranking)


def test_a_call_never_trains():
    decision = Decision(SMALL, backend=REF)
    before = [p.copy() for p in decision.operations["scorer"].parameters.payloads()]
    decision(decision_input(2))
    after = decision.operations["scorer"].parameters.payloads()
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    assert not decision.training


# -- output answers for what it was given --------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_output_is_trimmed_to_the_supplied_items(n):
    decision = Decision(SMALL, backend=REF)
    logits = decision.output(decision_input(n))
    assert logits.shape == (n,)
    padded = decision.supervised_output(decision_input(n))
    np.testing.assert_array_equal(logits, padded[:n])
    assert np.all(padded[n:] == -1e9)


def test_a_batch_output_is_trimmed_to_its_largest_row():
    decision = Decision(SMALL, backend=REF)
    logits = decision.output([decision_input(2), decision_input(5)])
    assert logits.shape == (2, 5)  # the padded batch holds 8 slots
    assert np.all(logits[0, 2:] == -1e9)  # the shorter row's own padding stays masked
    planner = Planner(SMALL, backend=REF)
    outcomes = planner.output({"state": "s", "candidates": [
        {"candidate_id": c, "text": c} for c in "abc"]})
    assert outcomes.shape == (3,)
    investigator = Investigator(SMALL, backend=REF)
    labels = investigator.output({"mode": "verification", "inputs": {
        "premise": "p", "hypothesis": "h"}})
    assert labels.shape == (3,)  # entailment, neutral, contradiction: no padded slot


def test_training_still_supervises_the_padded_output():
    decision = Decision(SMALL, backend=REF)
    trainer = Trainer.from_tool(decision, lr=0.05, optimizer=lambda _: tc.optim.Adam(
        backend=REF))
    experience = trainer.capture(decision_input(3), "h1", source="test")
    losses = trainer.fit([experience], epochs=5, progress=False)
    assert losses[-1] < losses[0]


# -- the trainer follows the tool's backend ------------------------------------------------

def test_from_tool_defaults_to_the_tools_backend():
    trainer = Trainer.from_tool(Decision(SMALL, backend=REF))
    assert trainer.backend == REF
    assert trainer.optimizer.backend == REF
    experience = trainer.capture(decision_input(2), "h0", source="test")
    trainer.step(experience)
    (lowered,) = trainer._steps.values()
    assert lowered.plan.backend == REF
    explicit = Trainer.from_tool(Decision(SMALL, backend=REF), backend="numba")
    assert explicit.backend == "numba"  # an explicit backend still wins


# -- Scene inputs and standardization ------------------------------------------------------

def test_scene_refuses_bad_observations_with_the_packages_errors():
    scene = Scene(SMALL, observation_size=3, backend=REF)
    with pytest.raises(ShapeError, match="3 numbers"):
        scene.match({"observation": [1.0, 2.0], "descriptions": ["a"]})
    with pytest.raises(TrainingError, match=r"observation\[1\] is nan"):
        scene.match({"observation": [1.0, float("nan"), 2.0], "descriptions": ["a"]})
    with pytest.raises(ShapeError):
        scene.fit_standardizer([])


def raw_two_class_data(n=64, seed=0):
    """Two classes told apart only by a small feature (about +-0.1) beside a large one
    (about 30, pure noise): the scales of a raw table a scikit-learn user brings."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    small = np.where(labels == 1, 0.1, -0.1) + rng.normal(0, 0.02, n)
    large = 30 + rng.normal(0, 5, n)
    return np.stack([large, small, large * 0.5 + 7], axis=1), labels


def train_scene(standardize, epochs=40):
    X, y = raw_two_class_data()
    scene = Scene(SMALL, observation_size=3, standardize=standardize, backend=REF)
    trainer = Trainer.from_tool(scene, lr=0.05, optimizer=lambda _: tc.optim.Adam(
        backend=REF))
    inputs = [{"observation": row.tolist(), "descriptions": ["class a", "class b"]}
              for row in X]
    experience = trainer.capture(inputs, [int(t) for t in y], source="test")
    losses = trainer.fit([experience], epochs=epochs, progress=False)
    scene.eval()
    accuracy = np.mean([m.index == t for m, t in zip(scene.match(inputs), y)])
    return scene, losses, accuracy


def test_scene_standardizes_raw_features_and_learns():
    scene, losses, accuracy = train_scene(True)
    assert scene.standardizer["samples"] == 64  # learned from the captured batch
    X, _ = raw_two_class_data()
    np.testing.assert_allclose(scene.standardizer["mean"], X.mean(axis=0))
    np.testing.assert_allclose(scene.standardizer["scale"], X.std(axis=0))
    assert losses[-1] < 0.5 * losses[0]
    assert accuracy > 0.9
    _, raw_losses, raw_accuracy = train_scene(False)
    # without it, the large feature saturates the tanh layer: no better than chance
    assert raw_losses[-1] > 0.6 and raw_accuracy < 0.75


def test_the_standardizer_is_saved_with_the_model(tmp_path):
    scene, _, _ = train_scene(True, epochs=2)
    scene.save_pretrained(tmp_path / "scene")
    loaded = Scene.from_pretrained(tmp_path / "scene", backend=REF)
    for key in ("mean", "scale"):
        np.testing.assert_array_equal(loaded.standardizer[key], scene.standardizer[key])
    one = {"observation": [31.0, 0.1, 22.0], "descriptions": ["class a", "class b"]}
    np.testing.assert_array_equal(loaded.match(one).probabilities,
                                  scene.match(one).probabilities)


def test_fit_standardizer_is_standard_scaler_fit():
    X, _ = raw_two_class_data()
    X[:, 2] = 4.0  # a constant feature keeps scale 1, as StandardScaler's does
    scene = Scene(SMALL, observation_size=3, backend=REF).fit_standardizer(X)
    expected = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    assert scene.standardizer["scale"][2] == 1.0
    scene.train()  # a fitted scaler is kept: capturing in training mode does not refit
    Trainer.from_tool(scene).capture({"observation": [0.0, 0.0, 0.0],
                                      "descriptions": ["a", "b"]}, 0, source="test")
    assert scene.standardizer["samples"] == len(X)
    standardized = (X - scene.standardizer["mean"]) / scene.standardizer["scale"]
    np.testing.assert_allclose(standardized, expected)
    with pytest.raises(ConfigError, match="standardize"):
        Scene(SMALL, observation_size=3, standardize=False).fit_standardizer(X)

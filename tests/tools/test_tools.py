"""Owned tools: Decision, Scene and Planner predict through plans, train with
Trainer.from_tool, refuse malformed targets and inputs, save and load pretrained
directories strictly, and resume from checkpoints that match their operations."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError, DTypeError, ShapeError, TrainingError
from tensorcode.tools import ConfigError, Decision, Planner, Scene
from tensorcode.tools.scorer import PairScorer
from tensorcode.training import Trainer, load_experience

REF = "reference"
SMALL = {"dim": 8, "hidden": 8, "buckets": 256}


def decision_input(n=3):
    texts = ["free disk space", "renew the certificate", "restart the service",
             "scale out", "fix dns"]
    return {"context": "the disk is full on the database host",
            "hypotheses": [{"id": f"h{k}", "text": texts[k]} for k in range(n)]}


PLANNER_INPUT = {"state": "the queue is long",
                 "candidates": [{"candidate_id": "scale", "text": "scale out"},
                                {"candidate_id": "wait", "text": "wait"},
                                {"candidate_id": "page", "text": "page someone"}]}
SCENE_INPUT = {"observation": [1.0, 0.0, -1.0], "descriptions": ["red light", "green light"]}


def trainer_for(tool, lr=0.1, seed=0):
    return Trainer.from_tool(tool, lr=lr, backend=REF, seed=seed,
                             optimizer=lambda _: tc.optim.Adam(backend=REF))


@pytest.fixture()
def decision():
    return Decision(SMALL, seed=3, backend=REF)


# -- predictions -------------------------------------------------------------------------

def test_decision_probabilities_cover_only_supplied_hypotheses(decision):
    for n in (1, 2, 3, 5):
        decided = decision.decide(decision_input(n))
        assert decided.ids == tuple(f"h{k}" for k in range(n))
        assert decided.probabilities.shape == (n,)
        assert abs(decided.probabilities.sum() - 1) < 1e-9
        assert decided.chosen == decided.ids[int(np.argmax(decided.probabilities))]
    padded = decision.supervised_output(decision_input(3))
    assert padded.shape == (4,) and padded[3] == -1e9  # padded: zero probability
    logits = decision.output(decision_input(3))  # answers for the supplied hypotheses
    np.testing.assert_array_equal(logits, padded[:3])
    # 1, 2 -> 2 slots; 3 -> 4; 5 -> 8: one plan per bucket, not per count
    assert decision.operations["scorer"].plan_count() == 3


def test_a_batch_gives_the_same_decisions_as_single_calls(decision):
    inputs = [decision_input(2), decision_input(5)]
    batch = decision.decide(inputs)
    for one, inp in zip(batch, inputs):
        alone = decision.decide(inp)
        assert one.chosen == alone.chosen
        np.testing.assert_allclose(one.probabilities, alone.probabilities, rtol=1e-5)


def test_numba_scores_like_the_reference_interpreter():
    # vectors on both sides: the smallest graph (texts add the pooling, checked above)
    outputs = [PairScorer(3, 2, dim=4, hidden=4, mask="zero", seed=1, backend=b)(
        [0.5, -1.0, 2.0], [[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]) for b in ("numba", REF)]
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)
    assert outputs[0][3] == 0.0  # a padded candidate


def test_planner_ranks_and_scene_matches():
    planner = Planner(SMALL, backend=REF)
    ranked = planner.plan(PLANNER_INPUT)
    assert sorted(r.candidate_id for r in ranked) == ["page", "scale", "wait"]
    assert [r.outcome for r in ranked] == sorted((r.outcome for r in ranked), reverse=True)
    vectors = Planner(SMALL, state_size=2, candidate_size=3, backend=REF)
    outcomes = vectors.predict_outcomes({"state": [0.5, 1.0], "candidates": [
        {"candidate_id": "a", "features": [1, 2, 3]}, {"candidate_id": "b",
                                                       "features": [0, 0, 1]}]})
    assert list(outcomes) == ["a", "b"]
    scene = Scene(SMALL, observation_size=3, backend=REF)
    matched = scene.match(SCENE_INPUT)
    assert matched.description == SCENE_INPUT["descriptions"][matched.index]


# -- training ------------------------------------------------------------------------------

def test_decision_trains_on_ids_indices_and_distributions(decision):
    trainer = trainer_for(decision)
    assert decision.training and trainer.tool is decision
    inputs = decision_input(3)
    by_id = trainer.capture(inputs, "h0", source="review:1")
    by_index = trainer.capture(inputs, 0, source="review:2")
    soft = trainer.capture(inputs, [0.8, 0.1, 0.1], source="review:3")
    assert trainer.steps == 0  # capture makes no update
    assert by_id.supervisions[0].target == by_index.supervisions[0].target == 0
    first = trainer.step(by_id)
    losses = trainer.fit([by_index, soft], epochs=5)
    assert trainer.steps == 11 and losses[-1] < first
    decision.eval()
    assert not decision.training and decision.decide(inputs).chosen == "h0"


def test_feedback_never_reaches_the_prediction(decision):
    trainer = trainer_for(decision)
    inputs = decision_input(3)
    outputs = [trainer.capture(inputs, t, source="s").calls[0].output for t in ("h0", "h2")]
    np.testing.assert_array_equal(outputs[0], outputs[1])
    experience = trainer.capture(inputs, "h1", source="s")
    recorded = json.dumps([[i.value for i in c.inputs] for c in experience.calls])
    assert "h1" not in recorded and "free disk space" in recorded


@pytest.mark.parametrize("target, message", [
    ("nope", "not a supplied hypothesis"),
    (3, "out of range"),
    (-1, "out of range"),
    ([0.5, -0.5, 1.0], r"\[1\] = -0.5"),
    ([0.5, float("nan"), 0.5], "nan"),
    ([0.5, 0.4, 0.0], "sums to 0.9"),
    ([0.5, 0.5], "needs 3 entries"),
    (True, "got True"),
    ({"id": "h0"}, "a target is"),
])
def test_malformed_decision_targets_are_refused_and_nothing_changes(decision, target,
                                                                    message):
    trainer = trainer_for(decision)
    before = [p.copy() for p in decision.operations["scorer"].parameters.payloads()]
    with pytest.raises(TrainingError, match=message):
        trainer.capture(decision_input(3), target, source="s")
    assert trainer.steps == 0
    for a, b in zip(before, decision.operations["scorer"].parameters.payloads()):
        np.testing.assert_array_equal(a, b)


def test_planner_trains_on_the_tried_candidate_only():
    planner = Planner(SMALL, backend=REF)
    trainer = trainer_for(planner, lr=0.05)
    experience = trainer.capture(PLANNER_INPUT, {"candidate_id": "scale", "outcome": 2.0},
                                 source="observed:1")
    others = {k: v for k, v in planner.predict_outcomes(PLANNER_INPUT).items() if k != "scale"}
    losses = [trainer.step(experience) for _ in range(30)]
    assert losses[-1] < 0.1 * losses[0]
    assert abs(planner.predict_outcomes(PLANNER_INPUT)["scale"] - 2.0) < 0.5
    assert others  # the untried candidates carried no target
    for target, message in [({"candidate_id": "other", "outcome": 1.0}, "not supplied"),
                            ({"candidate_id": "scale", "outcome": float("inf")}, "finite"),
                            ({"candidate_id": "scale", "outcome": "1"}, "number"),
                            ({"candidate_id": "scale"}, "must be")]:
        with pytest.raises(TrainingError, match=message):
            trainer.capture(PLANNER_INPUT, target, source="s")


def test_scene_targets_name_a_supplied_description():
    scene = Scene(SMALL, observation_size=3, backend=REF)
    trainer = trainer_for(scene)
    experience = trainer.capture([SCENE_INPUT, SCENE_INPUT], ["green light", 1], source="s")
    losses = [trainer.step(experience) for _ in range(10)]
    assert losses[-1] < losses[0]
    assert scene.match(SCENE_INPUT).description == "green light"
    with pytest.raises(TrainingError, match="not a supplied description"):
        trainer.capture(SCENE_INPUT, "blue light", source="s")
    with pytest.raises(TrainingError, match="a target is"):
        trainer.capture(SCENE_INPUT, [0.5, 0.5], source="s")


@pytest.mark.parametrize("make, inputs, error", [
    (lambda: Decision(SMALL, backend=REF), "just text", TypeError),
    (lambda: Decision(SMALL, backend=REF), {"context": "x", "hypotheses": []}, TypeError),
    (lambda: Decision(SMALL, backend=REF),
     {"context": "x", "hypotheses": [{"id": "a", "text": "t"}, {"id": "a", "text": "u"}]},
     ValueError),
    (lambda: Decision(SMALL, backend=REF), {"context": 3, "hypotheses": [
        {"id": "a", "text": "t"}]}, TypeError),
    (lambda: Scene(SMALL, observation_size=3, backend=REF),
     {"observation": [1, 2], "descriptions": ["a"]}, ShapeError),
    (lambda: Scene(SMALL, observation_size=3, backend=REF),
     {"observation": [[1, 2, 3]], "descriptions": ["a"]}, ShapeError),
    (lambda: Scene(SMALL, observation_size=3, backend=REF),
     {"observation": ["1", "2", "3"], "descriptions": ["a"]}, DTypeError),
    (lambda: Scene(SMALL, observation_size=3, backend=REF),
     {"observation": [1, 2, float("nan")], "descriptions": ["a"]}, TrainingError),
    (lambda: Scene(SMALL, observation_size=3, backend=REF),
     {"observation": [1, float("inf"), 2], "descriptions": ["a"]}, TrainingError),
    (lambda: Planner(SMALL, backend=REF), {"state": "s", "candidates": [{"id": "a"}]},
     ValueError),
])
def test_inputs_of_the_wrong_kind_are_refused(make, inputs, error):
    with pytest.raises(error):
        make().output(inputs)
    with pytest.raises(error):
        make()(inputs)  # the prediction refuses them the same way


def test_configs_are_validated_by_key():
    with pytest.raises(ConfigError, match="'dim'"):
        Decision(dim=0)
    with pytest.raises(ConfigError, match="'colour'"):
        Decision(colour="red")
    with pytest.raises(ConfigError, match="observation_size"):
        Scene()
    assert Decision(SMALL, backend=REF).config == {**SMALL, "seed": 0}
    with pytest.raises(ConfigError, match="standardize"):
        Scene(observation_size=2, standardize="yes")


# -- pretrained directories ------------------------------------------------------------------

def test_save_and_load_pretrained_gives_identical_predictions(decision, tmp_path):
    decision.calibration.load_payloads([np.float32(1.5)])
    decision.save_pretrained(tmp_path / "model")
    loaded = Decision.from_pretrained(tmp_path / "model", backend=REF)
    assert loaded.config == decision.config and loaded.temperature == 1.5
    assert not loaded.training
    a, b = decision.decide(decision_input(3)), loaded.decide(decision_input(3))
    np.testing.assert_array_equal(a.probabilities, b.probabilities)
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == [
        "tool.json", "weights.safetensors"]


def _tamper(path, edit):
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update({"class": "Planner"}), "class"),
    (lambda d: d.update({"format": "other"}), "format"),
    (lambda d: d.update({"version": 2}), "version"),
    (lambda d: d["config"].update({"dim": -1}), "config.dim"),
    (lambda d: d["config"].update({"module": "os"}), "config.module"),
    (lambda d: d["config"].update({"buckets": 128}), "fingerprint"),
    (lambda d: d["operations"].update({"extra": {}}), "operations"),
    (lambda d: d["tensors"].update({"sha256": "0" * 64}), "sha256"),
    (lambda d: d["buffers"].update({"calibration.temperature": [[2], "float32"]}),
     "buffers.calibration.temperature"),
    (lambda d: d.update({"code": "import os"}), "(document)"),
])
def test_tampered_pretrained_directories_are_refused_naming_the_field(decision, tmp_path,
                                                                      edit, field):
    decision.save_pretrained(tmp_path)
    _tamper(tmp_path / "tool.json", edit)
    with pytest.raises(ArtifactError, match=field.replace(".", r"\.").replace("(", r"\(")
                       .replace(")", r"\)")):
        Decision.from_pretrained(tmp_path, backend=REF)


def test_a_changed_weight_file_or_another_class_is_refused(decision, tmp_path):
    decision.save_pretrained(tmp_path / "d")
    with pytest.raises(ArtifactError, match="holds a 'Decision', not a 'Planner'"):
        Planner.from_pretrained(tmp_path / "d")
    weights = tmp_path / "d" / "weights.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="SHA-256"):
        Decision.from_pretrained(tmp_path / "d")
    with pytest.raises(ArtifactError, match=r"no tool\.json"):
        Decision.from_pretrained(tmp_path / "missing")


# -- experiences and checkpoints ---------------------------------------------------------------

def test_experiences_round_trip_and_resume_restores_everything(decision, tmp_path):
    trainer = trainer_for(decision)
    experience = trainer.capture(decision_input(3), [0.6, 0.4, 0.0], source="review:1")
    experience.save(tmp_path / "e.json", operations=trainer.operations)
    loaded = load_experience(tmp_path / "e.json", operations=trainer.operations)
    trainer.fit([loaded], epochs=2)
    trainer.save_checkpoint(tmp_path / "ck", progress={"next_example": 3})
    decision.save_pretrained(tmp_path / "model")
    expected = trainer.fit([loaded], epochs=2, shuffle=False)

    model = Decision.from_pretrained(tmp_path / "model", backend=REF)
    resumed = trainer_for(model, seed=5)
    assert resumed.load_checkpoint(tmp_path / "ck") == {"next_example": 3}
    assert resumed.steps == 2 and model.training
    again = load_experience(tmp_path / "e.json", operations=resumed.operations)
    assert resumed.fit([again], epochs=2, shuffle=False) == expected


def test_a_checkpoint_of_other_operations_is_refused_and_nothing_changes(tmp_path):
    tool = Decision(SMALL, backend=REF)
    trainer = trainer_for(tool)
    trainer.fit([trainer.capture(decision_input(2), "h1", source="s")])
    trainer.save_checkpoint(tmp_path / "ck")
    other = Decision({**SMALL, "seed": 1}, backend=REF)  # same meaning: loads
    trainer_for(other).load_checkpoint(tmp_path / "ck")
    scene = Scene({**SMALL, "observation_size": 8}, backend=REF)  # same shapes, other meaning
    target = trainer_for(scene)
    before = [p.copy() for p in target.parameters.payloads()]
    with pytest.raises(ArtifactError, match="operation 'scorer' differs"):
        target.load_checkpoint(tmp_path / "ck")
    assert target.steps == 0 and scene.training
    for a, b in zip(before, target.parameters.payloads()):
        np.testing.assert_array_equal(a, b)


def test_shape_errors_name_the_problem():
    with pytest.raises(ShapeError, match="vector of 3"):
        PairScorer(3, None, dim=8, hidden=8, buckets=64, backend=REF)([1.0, 2.0], ["a"])

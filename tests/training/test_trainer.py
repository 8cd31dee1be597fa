"""The Trainer: gradients against a NumPy oracle, learning, errors before updates,
checkpoints that resume bit for bit and roll back on failure."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tensorcode as tc
from tensorcode import trace
from tensorcode.errors import ArtifactError, ShapeError, TrainingError
from tensorcode.operations import Classifier, LinearOperation, Operation, TextEncoder
from tensorcode.training import Trainer, load_experience

REF = "reference"

DATA = [("the invoice was charged twice", "billing"), ("refund my payment", "billing"),
        ("the site is down again", "outage"), ("service unavailable error", "outage"),
        ("how do I change my avatar", "other"), ("where is the settings page", "other")]


def program(seed=0):
    encoder = TextEncoder(8, buckets=512, seed=seed, backend=REF)
    head = Classifier(8, ["billing", "outage", "other"], seed=seed + 1, backend=REF)
    return encoder, head


def experiences(encoder, head, data=DATA):
    result = []
    for text, label in data:
        session = trace()
        out = session.run(lambda: head(encoder(text)))
        session.supervise(out, label, source="test:labels")
        result.append(session)
    return result


def test_sgd_step_matches_hand_gradient():
    layer = LinearOperation(3, 2, seed=5, backend=REF)
    x = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]], np.float32)
    target = np.array([[1.0, 0.0], [0.0, -1.0]], np.float32)
    session = trace()
    out = session.run(lambda: layer(x))
    session.supervise(out, target, loss="mse", source="test")
    w, b = [p.copy() for p in layer.parameters.payloads()]
    trainer = Trainer.from_ops({"layer": layer}, lr=0.1, backend=REF)
    assert isinstance(trainer.optimizer, tc.optim.Sgd)
    loss = trainer.step(session)
    error = x @ w + b - target
    assert loss == pytest.approx(float((error ** 2).mean()), rel=1e-6)
    grad = 2 * error / error.size
    new_w, new_b = layer.parameters.payloads()
    np.testing.assert_allclose(new_w, w - 0.1 * (x.T @ grad), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(new_b, b - 0.1 * grad.sum(axis=0), rtol=1e-5, atol=1e-7)
    assert trainer.steps == 1
    np.testing.assert_array_equal(trainer.parameters.payloads()[0], new_w)


def test_losses_decrease_on_a_learnable_task_and_plans_are_shared():
    encoder, head = program()
    trainer = Trainer.from_ops({"encoder": encoder, "head": head}, lr=0.5, backend=REF)
    losses = trainer.fit(experiences(encoder, head), epochs=15, progress=False)
    assert len(losses) == 15 * len(DATA)
    first, last = np.mean(losses[:len(DATA)]), np.mean(losses[-len(DATA):])
    assert last < 0.25 * first
    assert [head.predict(encoder(t)) for t, _ in DATA] == [label for _, label in DATA]
    assert len(trainer._steps) == 2  # texts pad to 8 or 16 n-grams: two structures


def test_label_strings_and_indices_give_the_same_loss():
    encoder, head = program()
    by_name = experiences(encoder, head, DATA[:1])[0]
    session = trace()
    out = session.run(lambda: head(encoder(DATA[0][0])))
    session.supervise(out, 0, source="test")
    a = Trainer.from_ops({"encoder": encoder, "head": head}, lr=1e-9, backend=REF)
    assert a.step(by_name) == pytest.approx(a.step(session), rel=1e-6)
    bad = trace()
    out = bad.run(lambda: head(encoder("x")))
    bad.supervise(out, "nonsense", source="test")
    with pytest.raises(TrainingError, match="unknown label"):
        a.step(bad)


def test_mse_needs_exact_shapes_and_custom_losses_work_by_name():
    layer = LinearOperation(2, 2, backend=REF)
    session = trace()
    out = session.run(lambda: layer(np.ones((3, 2))))
    session.supervise(out, np.zeros((3, 1)), loss="mse", source="test")
    trainer = Trainer.from_ops({"layer": layer}, lr=0.1, backend=REF,
                               losses={"l1": lambda o, t: (o - t).abs().mean()})
    with pytest.raises(ShapeError, match="exactly"):
        trainer.step(session)
    custom = trace()
    out = custom.run(lambda: layer(np.ones((3, 2))))
    custom.supervise(out, np.full((3, 2), 0.5), loss="l1", source="test")
    expected = float(np.abs(out - 0.5).mean())
    assert trainer.step(custom) == pytest.approx(expected, rel=1e-6)
    unknown = trace()
    out = unknown.run(lambda: layer(np.ones(2)))
    unknown.supervise(out, np.ones(2), loss="huber", source="test")
    with pytest.raises(TrainingError, match="unknown loss"):
        trainer.step(unknown)


def _unchanged(trainer, before):
    return trainer.steps == 0 and all(
        np.array_equal(a, b) for a, b in zip(trainer.parameters.payloads(), before))


def test_disconnected_nondifferentiable_and_nonfinite_losses_change_nothing():
    layer = LinearOperation(2, 1, backend=REF)
    trainer = Trainer.from_ops({"layer": layer}, lr=0.1, backend=REF, losses={
        "ignores_output": lambda o, t: (t * 2.0).sum(),
        "step_function": lambda o, t: (o > t).sum(),
        "log_of_negative": lambda o, t: (o * 0.0 + t).log().sum()})
    before = [p.copy() for p in trainer.parameters.payloads()]
    for loss, target, message in [("ignores_output", [1.0], "disconnected"),
                                  ("step_function", [0.0], "nondifferentiable"),
                                  ("log_of_negative", [-1.0], "nonfinite")]:
        session = trace()
        out = session.run(lambda: layer(np.ones(2)))
        session.supervise(out, np.array(target), loss=loss, source="test")
        with pytest.raises(TrainingError, match=message):
            trainer.step(session)
        assert _unchanged(trainer, before)


def test_supervising_an_external_result_is_nondifferentiable():
    class Remote(Operation):
        qualified_name = "tests.Remote"
        replay = "external"

        def __init__(self):
            self._initialize()

        def compute(self, x):
            return np.asarray(x, np.float32) + 1

    remote, layer = Remote(), LinearOperation(2, 2, backend=REF)
    trainer = Trainer.from_ops({"remote": remote, "layer": layer}, backend=REF)
    session = trace()
    hidden = session.run(lambda: remote(np.ones(2)))
    out = session.run(lambda: layer(hidden))
    session.supervise(hidden, np.zeros(2), loss="mse", source="test")
    with pytest.raises(TrainingError, match="nondifferentiable"):
        trainer.step(session)
    # the recorded external result is a constant input to the layer: training works
    good = trace()
    hidden = good.run(lambda: remote(np.ones(2)))
    out = good.run(lambda: layer(hidden))
    good.supervise(out, np.zeros(2), loss="mse", source="test")
    assert trainer.step(good) > 0
    # an external operation holds no parameters and is never re-run: it need not be bound
    assert Trainer.from_ops({"layer": layer}, backend=REF).step(good) > 0


def test_operations_outside_the_trainer_and_foreign_optimizers_are_refused():
    encoder, head = program()
    (session,) = experiences(encoder, head, DATA[:1])
    trainer = Trainer.from_ops({"head": head}, backend=REF)
    with pytest.raises(TrainingError, match="does not train"):
        trainer.step(session)
    other = LinearOperation(5, 5, backend=REF)
    adam = tc.optim.Adam(backend=REF)
    adam.step(other.parameters, tc.Gradients.from_payloads(
        other.parameters.layout, [np.zeros((5, 5), np.float32), np.zeros(5, np.float32)]),
        lr=0.1)
    with pytest.raises(TrainingError, match="exactly"):
        Trainer.from_ops({"head": head}, optimizer=adam, backend=REF)
    # the same instance under two names is one set of parameters
    shared = Trainer.from_ops({"a": head, "b": head}, backend=REF)
    assert len(shared.parameters) == 2


def test_trains_on_experience_loaded_from_a_file(tmp_path):
    encoder, head = program()
    operations = {"encoder": encoder, "head": head}
    for k, session in enumerate(experiences(encoder, head)):
        session.save(tmp_path / f"e{k}.json", operations=operations, release=True)
    loaded = [load_experience(tmp_path / f"e{k}.json", operations=operations)
              for k in range(len(DATA))]
    trainer = Trainer.from_ops(operations, lr=0.5, backend=REF)
    losses = trainer.fit(loaded, epochs=10, progress=False)
    assert np.mean(losses[-len(DATA):]) < 0.5 * np.mean(losses[:len(DATA)])


def make_trainer(seed=0):
    encoder, head = program(seed)
    trainer = Trainer.from_ops({"encoder": encoder, "head": head}, lr=0.05, backend=REF,
                               optimizer=tc.optim.Adam(backend=REF), seed=7)
    return trainer, experiences(encoder, head)


def test_resume_equals_uninterrupted_training_bit_for_bit(tmp_path):
    straight, data = make_trainer()
    full = straight.fit(data, epochs=4, progress=False)

    first, data = make_trainer()
    head_part = first.fit(data, epochs=2, progress=False)
    first.operations["head"].train(True)
    first.save_checkpoint(tmp_path / "ckpt", progress={"epochs": 2})

    resumed, data = make_trainer()
    progress = resumed.load_checkpoint(tmp_path / "ckpt")
    assert progress == {"epochs": 2} and resumed.steps == 2 * len(DATA)
    assert resumed.operations["head"].training is True
    tail_part = resumed.fit(data, epochs=2, progress=False)
    assert head_part + tail_part == full
    for a, b in zip(straight.parameters.payloads(), resumed.parameters.payloads()):
        assert np.array_equal(a, b)
    for a, b in zip(straight.operations["encoder"].parameters.payloads(),
                    resumed.operations["encoder"].parameters.payloads()):
        assert np.array_equal(a, b)


def test_failed_checkpoint_load_changes_nothing(tmp_path):
    trainer, data = make_trainer()
    trainer.fit(data[:2], epochs=1, progress=False)
    trainer.save_checkpoint(tmp_path / "ckpt", progress={"n": 1})
    manifest = tmp_path / "ckpt" / "training.json"
    document = json.loads(manifest.read_text())
    document["modes"] = {"encoder": False}
    manifest.write_text(json.dumps(document))

    target, data = make_trainer(seed=3)
    target.fit(data[:1], epochs=1, progress=False)
    before = [p.copy() for p in target.parameters.payloads()]
    state = target.generator.get_state()
    optimizer_state = target.optimizer.state_dict()
    with pytest.raises(ArtifactError):
        target.load_checkpoint(tmp_path / "ckpt")
    assert target.steps == 1 and target.generator.get_state() == state
    assert all(np.array_equal(a, b) for a, b in zip(target.parameters.payloads(), before))
    after = target.optimizer.state_dict()
    assert after["param_groups"] == optimizer_state["param_groups"]
    for k, entry in optimizer_state["state"].items():
        for name, value in entry.items():
            assert np.array_equal(np.asarray(after["state"][k][name]), np.asarray(value))


class TicketTool:
    """A tool: owns its operations, declares its objective and mode policy."""

    objective = "cross_entropy"

    def __init__(self):
        self.encoder, self.head = program()
        self.operations = {"encoder": self.encoder, "head": self.head}

    def set_training(self, training):
        self.head.train(training)  # the encoder stays in evaluation mode by policy

    def predict(self, texts):
        return self.head(self.encoder(texts))


def test_from_tool_captures_and_trains():
    tool = TicketTool()
    trainer = Trainer.from_tool(tool, lr=2.0, optimizer=lambda params: tc.optim.Sgd(
        backend=REF), backend=REF)
    assert tool.head.training and not tool.encoder.training
    texts = [t for t, _ in DATA]
    labels = [label for _, label in DATA]
    experience = trainer.capture(texts, labels, source="authored-example:1")
    assert trainer.steps == 0 and len(experience.calls) == 2
    losses = [trainer.step(experience) for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0]
    with pytest.raises(TrainingError, match="trace"):
        Trainer.from_ops({"head": tool.head}, backend=REF).capture(texts, labels, "x")


def test_numba_backend_trains_like_the_reference():
    results = []
    for backend in ("numba", REF):
        layer = LinearOperation(3, 2, seed=1, backend=backend)
        session = trace()
        out = session.run(lambda: layer(np.ones((4, 3))))
        session.supervise(out, [0, 1, 1, 0], source="test")
        trainer = Trainer.from_ops({"layer": layer}, lr=0.1, backend=backend)
        results.append([trainer.step(session) for _ in range(3)])
        results.append(layer.parameters.payloads())
    np.testing.assert_allclose(results[0], results[2], rtol=1e-5)
    for a, b in zip(results[1], results[3]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_gradients_flow_through_referenced_outputs_like_one_recorded_network():
    first = LinearOperation(3, 4, seed=1, backend=REF)
    second = LinearOperation(4, 2, seed=2, backend=REF)
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], np.float32)
    target = np.array([[1.0, -1.0], [0.0, 2.0]], np.float32)
    # the oracle: the same computation recorded as one network, differentiated eagerly
    tape = tc.Tape()
    a, b = tc.nn.Linear(tape, 3, 4), tc.nn.Linear(tape, 4, 2)
    error = b(a(tape.leaf(x))) - tape.leaf(target)
    loss = (error * error).mean()
    network = tape.into_network()
    params = network.parameters().replace(dict(zip(
        a.parameters() + b.parameters(),
        first.parameters.payloads() + second.parameters.payloads())))
    run = network.forward(params)
    expected = params.step(run.backward(loss).parameters(params), lambda p, g: p - 0.1 * g)

    session = trace()
    out = session.run(lambda: second(first(x)))
    session.supervise(out, target, loss="mse", source="test")
    trainer = Trainer.from_ops({"first": first, "second": second}, lr=0.1, backend=REF)
    assert trainer.step(session) == pytest.approx(float(run.of(loss)), rel=1e-6)
    for got, want in zip(first.parameters.payloads() + second.parameters.payloads(),
                         expected.payloads()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_plain_python_between_operations_is_not_a_gradient_path():
    first = LinearOperation(3, 4, seed=1, backend=REF)
    second = LinearOperation(4, 2, seed=2, backend=REF)
    session = trace()
    out = session.run(lambda: second(first(np.ones((2, 3))) * 2.0))
    session.supervise(out, np.zeros((2, 2)), loss="mse", source="test")
    before = [p.copy() for p in first.parameters.payloads()]
    trainer = Trainer.from_ops({"first": first, "second": second}, lr=0.1, backend=REF)
    trainer.step(session)
    assert all(np.array_equal(a, b) for a, b in zip(first.parameters.payloads(), before))
    assert not np.array_equal(second.parameters.payloads()[0],
                              LinearOperation(4, 2, seed=2).parameters.payloads()[0])


def test_operation_tables_are_immutable_snapshots_between_steps():
    encoder, head = program()
    (session,) = experiences(encoder, head, DATA[:1])
    trainer = Trainer.from_ops({"encoder": encoder, "head": head}, lr=0.5)
    trainer.step(session)
    kept = head.parameters
    copy = [p.copy() for p in kept.payloads()]
    for _ in range(3):
        trainer.step(session)
    assert all(np.array_equal(a, b) for a, b in zip(kept.payloads(), copy))
    assert not np.array_equal(head.parameters.payloads()[0], copy[0])
    np.testing.assert_array_equal(head.parameters.payloads()[1],
                                  trainer.parameters.payloads()[-1])


def test_fit_checks_every_experience_before_the_first_update():
    layer = LinearOperation(2, 1, backend=REF)
    good, bad = trace(), trace()
    out = good.run(lambda: layer(np.ones(2)))
    good.supervise(out, np.zeros(1), loss="mse", source="test")
    out = bad.run(lambda: layer(np.ones(2)))
    bad.supervise(out, np.zeros(1), loss="ignores_output", source="test")
    trainer = Trainer.from_ops({"layer": layer}, backend=REF,
                               losses={"ignores_output": lambda o, t: t.sum()})
    before = [p.copy() for p in trainer.parameters.payloads()]
    with pytest.raises(TrainingError, match="disconnected"):
        trainer.fit([good, bad], epochs=3, progress=False)
    assert _unchanged(trainer, before)


def test_progress_bar_only_on_a_terminal(monkeypatch):
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    layer = LinearOperation(2, 1, backend=REF)
    session = trace()
    out = session.run(lambda: layer(np.ones(2)))
    session.supervise(out, np.zeros(1), loss="mse", source="test")
    trainer = Trainer.from_ops({"layer": layer}, backend=REF)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    trainer.fit([session], epochs=2)
    assert "2/2" in terminal.getvalue()
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    trainer.fit([session], epochs=2)
    assert pipe.getvalue() == ""


def test_experiences_differing_in_unneeded_calls_share_a_plan():
    encoder, head = program()
    (text_a, label_a), (text_b, label_b) = DATA[1], DATA[3]  # both pad to 8 n-grams
    plain = experiences(encoder, head, [(text_a, label_a)])[0]
    noisy = trace()

    def with_extra_calls():
        encoder("an unrelated call first")
        encoder("and another one")
        return head(encoder(text_b))

    out = noisy.run(with_extra_calls)
    noisy.supervise(out, label_b, source="test")
    trainer = Trainer.from_ops({"encoder": encoder, "head": head}, lr=0.1, backend=REF)
    trainer.step(plain)
    logits = head(encoder(text_b)).astype(np.float64)
    expected = np.log(np.exp(logits).sum()) - logits[head.label_index(label_b)]
    assert trainer.step(noisy) == pytest.approx(expected, rel=1e-5)
    assert len(trainer._steps) == 1


def test_text_encoder_and_head_step_matches_a_numpy_gradient():
    from tensorcode.operations.text import ngram_ids

    encoder, head = program()
    text, label = "refund refund my payment", "billing"   # a repeated n-gram
    table = encoder.parameters.payloads()[0].astype(np.float64)
    weights, bias = [p.astype(np.float64) for p in head.parameters.payloads()]
    ids = ngram_ids(text, encoder.ngrams, encoder.buckets)
    vector = table[ids].mean(axis=0)
    logits = vector @ weights + bias
    p = np.exp(logits - logits.max())
    p /= p.sum()
    d_logits = p - np.eye(3)[head.label_index(label)]
    d_table = np.zeros_like(table)
    for i in ids:
        d_table[i] += (weights @ d_logits) / len(ids)
    lr = 0.5
    (session,) = experiences(encoder, head, [(text, label)])
    loss = Trainer.from_ops({"encoder": encoder, "head": head}, lr=lr, backend=REF).step(session)
    assert loss == pytest.approx(-np.log(p[head.label_index(label)]), rel=1e-5)
    np.testing.assert_allclose(encoder.parameters.payloads()[0], table - lr * d_table,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(head.parameters.payloads()[0],
                               weights - lr * np.outer(vector, d_logits), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(head.parameters.payloads()[1], bias - lr * d_logits,
                               rtol=1e-5, atol=1e-6)


def test_a_checkpoint_is_refused_by_operations_of_another_meaning(tmp_path):
    """Same shapes, other labels: the fingerprints in training.json tell them apart."""
    encoder, head = program()
    trainer = Trainer.from_ops({"encoder": encoder, "head": head}, backend=REF)
    trainer.fit(experiences(encoder, head)[:2], progress=False)
    trainer.save_checkpoint(tmp_path / "ck")
    saved = json.loads((tmp_path / "ck" / "training.json").read_text())
    assert saved["fingerprints"] == trainer.fingerprints()
    relabeled = Classifier(8, ["billing", "outage", "spam"], backend=REF)
    other = Trainer.from_ops({"encoder": TextEncoder(8, buckets=512, backend=REF),
                              "head": relabeled}, backend=REF)
    before = [p.copy() for p in other.parameters.payloads()]
    with pytest.raises(ArtifactError, match="operation 'head' differs") as caught:
        other.load_checkpoint(tmp_path / "ck")
    assert caught.value.field == "fingerprints.head"
    assert other.steps == 0
    assert all(np.array_equal(a, b) for a, b in zip(before, other.parameters.payloads()))
    # a checkpoint written before fingerprints were recorded still loads
    del saved["fingerprints"]
    (tmp_path / "ck" / "training.json").write_text(json.dumps(saved))
    Trainer.from_ops({"encoder": TextEncoder(8, buckets=512, backend=REF),
                      "head": Classifier(8, ["billing", "outage", "other"], backend=REF)},
                     backend=REF).load_checkpoint(tmp_path / "ck")

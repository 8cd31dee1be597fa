"""Tracing, supervision, experience files (round trip, validation) and replay."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tensorcode import OutputRef, trace
from tensorcode.errors import ArtifactError, TensorCodeError
from tensorcode.operations import Classifier, LinearOperation, Operation, TextEncoder
from tensorcode.training import load_experience

REF = "reference"


def make_program():
    encoder = TextEncoder(6, buckets=128, seed=1, backend=REF)
    head = Classifier(6, ["billing", "outage", "other"], seed=2, backend=REF)
    return encoder, head


def traced(encoder, head, text="the service is down", label="outage"):
    session = trace()
    prediction = session.run(lambda: head(encoder(text)))
    session.supervise(prediction, label, source="human:review-42")
    return session, prediction


class Point:
    """An allowlisted record type; counts how many the loader constructs."""

    record_fields = ("x", "y")
    built = 0

    def __init__(self, x, y):
        self.x, self.y = x, y

    def to_record(self):
        return {"x": self.x, "y": self.y}

    @classmethod
    def from_record(cls, fields):
        cls.built += 1
        return cls(fields["x"], fields["y"])


class Remote(Operation):
    """An external effect: recorded, never recomputed unless told."""

    qualified_name = "tests.Remote"
    replay = "external"

    def __init__(self):
        self._initialize()
        self.calls = 0

    def compute(self, vector):
        self.calls += 1
        return np.asarray(vector, np.float32) * 2


# -- capture -------------------------------------------------------------------------------

def test_run_captures_calls_refs_and_supervision():
    encoder, head = make_program()
    session, prediction = traced(encoder, head)
    assert [type(c.operation).__name__ for c in session.calls] == ["TextEncoder", "Classifier"]
    assert session.calls[1].inputs == (OutputRef(session.id, 0),)
    assert session.ref(prediction) == OutputRef(session.id, 1)
    (record,) = session.supervisions
    assert (record.target, record.loss, record.source) == ("outage", "cross_entropy",
                                                           "human:review-42")
    np.testing.assert_array_equal(prediction, head(encoder("the service is down")))


def test_identity_decides_not_value():
    encoder, _ = make_program()
    session = trace()
    a, b = session.run(lambda: (encoder("same text"), encoder("same text")))
    np.testing.assert_array_equal(a, b)
    assert session.ref(a).call == 0 and session.ref(b).call == 1
    with pytest.raises(TensorCodeError, match="identity"):
        session.ref(np.array(a))


def test_plain_python_between_operations_is_an_external_root():
    encoder, head = make_program()
    session = trace()
    out = session.run(lambda: head(encoder("disk full") * 0.5))
    example = session.example(out)
    assert example.calls == (1,)
    (root,) = example.roots
    assert root.key == (1, 0)
    np.testing.assert_array_equal(root.value, session.calls[0].output * 0.5)


def test_example_returns_closure_and_roots():
    encoder, head = make_program()
    session = trace()

    def program():
        encoder("unrelated")
        return head(encoder("payment failed"))

    out = session.run(program)
    example = session.example(out)
    assert example.calls == (1, 2)
    assert [r.value for r in example.roots] == ["payment failed"]


def test_captured_values_cannot_be_mutated():
    encoder, head = make_program()
    vector = np.ones(6, np.float32)
    session = trace()
    out = session.run(lambda: head(vector))
    vector[:] = 7  # the caller's array is free; the trace holds a snapshot
    np.testing.assert_array_equal(session.calls[0].inputs[0].value, np.ones(6))
    with pytest.raises(ValueError):
        out[0] = 1.0
    with pytest.raises(ValueError):
        out.flags.writeable = True


def test_mutated_container_output_is_rejected_before_reuse_and_save(tmp_path):
    class Lookup(Operation):
        qualified_name = "tests.Lookup"
        replay = "external"

        def __init__(self):
            self._initialize()

        def compute(self, key):
            return {"key": key, "hits": [1]}

    lookup = Lookup()
    session = trace()
    result = session.run(lambda: lookup("k"))
    result["hits"].append(2)
    with pytest.raises(TensorCodeError, match="mutated"):
        session.run(lambda: lookup(result))
    with pytest.raises(TensorCodeError, match="mutated"):
        session.save(tmp_path / "x.json", operations={"lookup": lookup})
    with pytest.raises(TensorCodeError, match="mutated"):
        session.release()
    assert not (tmp_path / "x.json").exists()


def test_supervise_requires_a_source_and_feedback():
    encoder, head = make_program()
    session = trace()
    out = session.run(lambda: head(encoder("x")))
    with pytest.raises(TensorCodeError, match="source"):
        session.supervise(out, "outage", source="  ")
    with pytest.raises(TypeError):
        session.supervise(out, "outage")
    with pytest.raises(TensorCodeError, match="feedback"):
        session.supervise(out, out, loss="mse", source="self")


def test_capture_continues_across_await_and_sessions_stay_apart():
    encoder, head = make_program()

    async def program(text):
        vector = encoder(text)
        await asyncio.sleep(0)
        return head(vector)

    async def main():
        first, second = trace(), trace()
        outs = await asyncio.gather(first.run(lambda: program("a b")),
                                    second.run(lambda: program("c")))
        return first, second, outs

    first, second, outs = asyncio.run(main())
    assert len(first.calls) == 2 and len(second.calls) == 2
    assert first.ref(outs[0]).call == 1 and second.ref(outs[1]).call == 1
    assert first.calls[0].inputs[0].value == "a b"


def test_release_keeps_refs_usable_but_stops_capture(tmp_path):
    encoder, head = make_program()
    session, prediction = traced(encoder, head)
    ref = session.ref(prediction)
    session.release()
    with pytest.raises(TensorCodeError, match="released"):
        session.run(lambda: encoder("x"))
    with pytest.raises(TensorCodeError, match="OutputRef"):
        session.example(prediction)
    np.testing.assert_array_equal(session.replay(ref), prediction)


# -- replay --------------------------------------------------------------------------------

def test_replay_uses_current_parameters_and_input_overrides():
    encoder, head = make_program()
    session, prediction = traced(encoder, head)
    np.testing.assert_array_equal(session.replay(prediction), prediction)
    weights, bias = head.parameters.payloads()
    head.load_payloads([weights * 2, bias + 1])
    np.testing.assert_allclose(session.replay(prediction), prediction * 2 - 2 * bias + bias + 1,
                               rtol=1e-5, atol=1e-6)
    other = session.replay(prediction, inputs={(0, 0): "billing question"})
    np.testing.assert_allclose(other, head(encoder("billing question")), rtol=1e-6)
    assert np.array_equal(session.replay(prediction, inputs=["billing question"]), other)
    with pytest.raises(TensorCodeError, match="not an external root"):
        session.replay(prediction, inputs={(1, 0): 0})


def test_replay_boundaries_for_external_effects():
    remote = Remote()
    layer = LinearOperation(3, 2, seed=0, backend=REF)
    session = trace()
    out = session.run(lambda: layer(remote(np.ones(3))))
    assert remote.calls == 1
    with pytest.raises(TensorCodeError, match="boundary='recorded'"):
        session.replay(out)
    np.testing.assert_array_equal(session.replay(out, boundary="recorded"), out)
    assert remote.calls == 1  # never re-run
    with pytest.raises(TensorCodeError, match="boundary"):
        session.replay(out, boundary="maybe")


# -- files ---------------------------------------------------------------------------------

def test_save_and_load_round_trip_with_codecs(tmp_path):
    encoder, head = make_program()
    layer = LinearOperation(2, 2, backend=REF)

    class Packed(Operation):
        qualified_name = "tests.Packed"
        replay = "external"

        def __init__(self):
            self._initialize()

        def compute(self, value):
            return value

    packed = Packed()
    session = trace()
    payload = {"bytes": b"\x00\xff", "tuple": (1, 2.5, None, True), "list": ["a", [1]],
               "ints": np.arange(4, dtype=np.int32), "point": Point(1, "two"),
               "big": 2 ** 70, "inf": float("inf")}
    session.run(lambda: (packed(payload), head(encoder("down")), layer(np.eye(2))))
    session.supervise(session.calls[2].output, "outage", source="review")
    session.supervise(session.calls[3].output, np.zeros((2, 2)), loss="mse", source="review")
    path = tmp_path / "experience.json"
    operations = {"packed": packed, "encoder": encoder, "head": head, "layer": layer}
    session.save(path, operations=operations, codecs={"point": Point})
    assert sorted(os.listdir(tmp_path)) == ["experience.json"]  # no temp file left
    loaded = load_experience(path, operations=operations, codecs={"point": Point})
    value = loaded.calls[0].inputs[0].value
    assert value["bytes"] == b"\x00\xff" and value["tuple"] == (1, 2.5, None, True)
    assert value["list"] == ["a", [1]] and value["big"] == 2 ** 70 and value["inf"] == np.inf
    assert value["ints"].dtype == np.int32 and value["ints"].tolist() == [0, 1, 2, 3]
    assert isinstance(value["point"], Point) and value["point"].y == "two"
    assert loaded.calls[2].inputs == (OutputRef(loaded.id, 1),)
    for a, b in zip(session.calls[1:], loaded.calls[1:]):
        np.testing.assert_array_equal(a.output, b.output)
        assert a.output.dtype == b.output.dtype
    assert [s.loss for s in loaded.supervisions] == ["cross_entropy", "mse"]
    np.testing.assert_array_equal(loaded.replay(OutputRef(loaded.id, 2)),
                                  session.calls[2].output)
    with pytest.raises(TensorCodeError, match="no codec"):
        session.save(tmp_path / "y.json", operations=operations)


def test_save_requires_every_operation_bound(tmp_path):
    encoder, head = make_program()
    session, _ = traced(encoder, head)
    with pytest.raises(TensorCodeError, match="does not bind"):
        session.save(tmp_path / "e.json", operations={"encoder": encoder})
    with pytest.raises(TensorCodeError, match="bound twice"):
        session.save(tmp_path / "e.json", operations={"a": encoder, "b": encoder, "h": head})


SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from tensorcode import trace
    from tensorcode.operations import Classifier, TextEncoder
    from tensorcode.training import load_experience
    encoder = TextEncoder(6, buckets=128, seed=1, backend="reference")
    head = Classifier(6, ["billing", "outage", "other"], seed=2, backend="reference")
    operations = {"encoder": encoder, "head": head}
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "save":
        session = trace()
        out = session.run(lambda: head(encoder("the service is down")))
        session.supervise(out, "outage", source="human:review-42")
        session.save(path, operations=operations, release=True)
    else:
        loaded = load_experience(path, operations=operations)
        ref = loaded.supervisions[0].ref
        print(repr(loaded.replay(ref).tolist()), loaded.supervisions[0].target)
""")


def test_round_trip_across_processes(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(SCRIPT)
    other = tmp_path / "from-other-process.json"
    subprocess.run([sys.executable, str(script), "save", str(other)], check=True)
    encoder, head = make_program()
    loaded = load_experience(other, operations={"encoder": encoder, "head": head})
    expected = head(encoder("the service is down"))
    np.testing.assert_array_equal(loaded.calls[1].output, expected)
    assert loaded.supervisions[0].target == "outage"

    here = tmp_path / "from-this-process.json"
    session, prediction = traced(encoder, head)
    session.save(here, operations={"encoder": encoder, "head": head})
    result = subprocess.run([sys.executable, str(script), "load", str(here)], check=True,
                            capture_output=True, text=True)
    assert result.stdout.strip() == f"{prediction.tolist()!r} outage"


# -- validation ----------------------------------------------------------------------------

@pytest.fixture()
def saved(tmp_path):
    encoder, head = make_program()
    session = trace()
    vector = session.run(lambda: encoder("refund please"))
    out = session.run(lambda: head(vector))
    session.supervise(out, {"label": "billing", "by": Point(3, 4)}, loss="custom",
                      source="review")
    path = tmp_path / "experience.json"
    operations = {"encoder": encoder, "head": head}
    session.save(path, operations=operations, codecs={"point": Point})
    return path, operations, json.loads(path.read_text())


def tamper(path, document):
    path.write_text(json.dumps(document))


@pytest.mark.parametrize("case, field", [
    ("fingerprint", "operations.head.fingerprint"),
    ("unknown binding", "operations.ghost"),
    ("dangling reference", "calls[1].inputs[0]"),
    ("forward reference", "calls[0].inputs[0]"),
    ("unknown codec tag", "calls[0].inputs[0].value"),
    ("wrong version", "version"),
    ("wrong format", "format"),
    ("record not allowlisted", "supervision[0].target.by"),
    ("bad array", "calls[1].output"),
    ("wrapping shape", "calls[1].output"),
    ("overflowing float32", "calls[1].output"),
    ("bad supervision call", "supervision[0].call"),
    ("qualified name", "operations.encoder.qualified_name"),
    ("operation is a list", "calls[0].operation"),
    ("operation is an object", "calls[1].operation"),
])
def test_every_validation_failure_raises_and_constructs_nothing(saved, case, field):
    path, operations, document = saved
    if case == "fingerprint":
        document["operations"]["head"]["fingerprint"] = "0" * 64
    elif case == "unknown binding":
        document["operations"]["ghost"] = dict(document["operations"]["head"])
    elif case == "dangling reference":
        document["calls"][1]["inputs"][0] = {"ref": 5}
    elif case == "forward reference":
        document["calls"][0]["inputs"][0] = {"ref": 0}
    elif case == "unknown codec tag":
        document["calls"][0]["inputs"][0]["value"] = {"t": "pickle", "v": "gASV"}
    elif case == "wrong version":
        document["version"] = 2
    elif case == "wrong format":
        document["format"] = "something.else"
    elif case == "record not allowlisted":
        document["supervision"][0]["target"]["v"]["by"]["name"] = "os.system"
    elif case == "bad array":
        document["calls"][1]["output"]["shape"] = [2]
    elif case == "wrapping shape":
        document["calls"][1]["output"].update(shape=[2 ** 32, 2 ** 32], v=[])
    elif case == "overflowing float32":
        document["calls"][1]["output"]["v"][0] = 1e300
    elif case == "bad supervision call":
        document["supervision"][0]["call"] = 9
    elif case == "qualified name":
        document["operations"]["encoder"]["qualified_name"] = "evil.Module"
    elif case == "operation is a list":
        document["calls"][0]["operation"] = ["encoder"]
    elif case == "operation is an object":
        document["calls"][1]["operation"] = {"name": "head"}
    tamper(path, document)
    Point.built = 0
    with pytest.raises(ArtifactError) as error:
        load_experience(path, operations=operations, codecs={"point": Point})
    assert error.value.field == field
    assert str(path) in str(error.value)
    assert Point.built == 0


def _linear_experience(tmp_path):
    layer = LinearOperation(3, 2, seed=1, backend=REF)
    encoder = TextEncoder(6, buckets=128, seed=1, backend=REF)
    session = trace()
    session.run(lambda: layer(np.ones((1, 3), np.float32)))
    session.run(lambda: encoder("a text"))
    operations = {"layer": layer, "encoder": encoder}
    path = tmp_path / "calls.json"
    session.save(path, operations=operations)
    return path, operations, json.loads(path.read_text())


@pytest.mark.parametrize("call, inputs, fragment", [
    (0, [], "takes one input"),
    (0, [{"value": {"t": "str", "v": "not a tensor"}}], "Linear"),
    (0, [{"value": {"t": "array", "dtype": "float32", "shape": [1, 5],
                    "v": [1.0, 2.0, 3.0, 4.0, 5.0]}}], "Linear"),
    (1, [{"value": {"t": "none"}}], "TextEncoder"),
    (1, [{"value": {"t": "str", "v": "one"}}, {"value": {"t": "str", "v": "two"}}],
     "takes one input"),
    (1, [{"ref": 0}], "TextEncoder"),
])
def test_loaded_calls_are_checked_against_their_operations_signature(tmp_path, call, inputs,
                                                                      fragment):
    path, operations, document = _linear_experience(tmp_path)
    document["calls"][call]["inputs"] = inputs
    tamper(path, document)
    with pytest.raises(ArtifactError, match=fragment) as error:
        load_experience(path, operations=operations)
    assert error.value.field == f"calls[{call}].inputs"
    assert f"call {call}" in str(error.value)


def test_valid_file_constructs_the_allowlisted_record(saved):
    path, operations, _ = saved
    Point.built = 0
    loaded = load_experience(path, operations=operations, codecs={"point": Point})
    assert Point.built == 1 and loaded.supervisions[0].target["by"].x == 3
    with pytest.raises(ArtifactError, match="allowlisted"):
        load_experience(path, operations=operations)


@pytest.mark.parametrize("text", ["not json", '{"format": NaN}', '{"a": 1, "a": 2}', "[]"])
def test_malformed_json_is_an_artifact_error(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ArtifactError):
        load_experience(path, operations={})


def test_missing_file_is_an_artifact_error(tmp_path):
    with pytest.raises(ArtifactError, match="cannot read"):
        load_experience(tmp_path / "absent.json", operations={})


def test_nonfinite_arrays_are_not_saved(tmp_path):
    layer = LinearOperation(2, 2, backend=REF)
    session = trace()
    session.run(lambda: layer(np.ones(2)))
    session.supervise(session.calls[0].output, np.array([np.inf, 0.0]), loss="mse",
                      source="test")
    with pytest.raises(TensorCodeError, match="finite"):
        session.save(tmp_path / "e.json", operations={"layer": layer})
    assert not (tmp_path / "e.json").exists()


def test_scalar_outputs_are_named_by_their_call():
    class Score(Operation):
        qualified_name = "tests.Score"
        replay = "external"

        def __init__(self):
            self._initialize()

        def compute(self, value):
            return 1

    score = Score()
    session = trace()
    a, b = session.run(lambda: (score("x"), score("y")))
    assert a is b  # Python shares the int: identity cannot tell the calls apart
    with pytest.raises(TensorCodeError, match=r"session\.calls"):
        session.ref(a)
    assert session.ref(session.calls[1]) == OutputRef(session.id, 1)
    session.supervise(session.calls[0], 0, loss="mse", source="test")
    assert session.supervisions[0].ref.call == 0
    other = trace()
    with pytest.raises(TensorCodeError, match="another trace"):
        other.ref(session.calls[0])

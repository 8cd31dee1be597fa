"""The reference types (``InputRef``, ``OutputRef``) and scalar outputs named by their
``session.calls[i].output`` handle, as the training guide's "Capture and supervision"."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode
from tensorcode import InputRef, OutputRef, trace
from tensorcode.errors import TensorCodeError
from tensorcode.operations import Operation
from tensorcode.training import load_experience


class Score(Operation):
    """An external effect answering a Python int: equal answers are one shared object."""

    qualified_name = "tests.references.Score"
    replay = "external"

    def __init__(self):
        self._initialize()

    def compute(self, value):
        return 1


class Half(Operation):
    """An operation answering an array (a fresh object per call)."""

    qualified_name = "tests.references.Half"
    replay = "external"

    def __init__(self):
        self._initialize()

    def compute(self, value):
        return np.asarray(value, dtype=np.float64) * 0.5


def test_both_reference_types_come_from_tensorcode():
    assert "InputRef" in tensorcode.__all__ and "OutputRef" in tensorcode.__all__
    half = Half()
    session = trace()
    first = session.run(lambda: half(np.ones(2)))
    session.run(lambda: half(first))
    root = session.calls[0].inputs[0]
    assert isinstance(root, InputRef) and root.key == (0, 0)
    np.testing.assert_array_equal(root.value, np.ones(2))
    assert session.calls[1].inputs == (OutputRef(session.id, 0),)
    assert session.example(session.calls[1].output).roots == (root,)


def test_scalar_outputs_are_named_by_calls_output_everywhere(tmp_path):
    score = Score()
    session = trace()
    a, b = session.run(lambda: (score("x"), score("y")))
    assert a is b  # Python shares the int: identity cannot tell the two calls apart
    with pytest.raises(TensorCodeError, match=r"session\.calls\[index\]\.output"):
        session.ref(a)
    first, second = session.calls[0].output, session.calls[1].output
    assert (first, second) == (OutputRef(session.id, 0), OutputRef(session.id, 1))
    assert session.calls[0].value == 1  # the result itself
    # equal-valued independent outputs are not merged
    assert session.ref(first) != session.ref(second)
    assert session.example(second).calls == (1,)
    assert session.replay(second, boundary="recorded") == 1
    session.supervise(first, 0, loss="mse", source="test:scalar")
    session.supervise(second, 1, loss="mse", source="test:scalar")
    assert [s.ref.call for s in session.supervisions] == [0, 1]
    # a handle of another trace is refused
    with pytest.raises(TensorCodeError, match="another trace"):
        trace().ref(first)
    # the handles survive a save and load: the loaded trace names its own calls
    path = tmp_path / "experience.json"
    session.save(path, operations={"score": score})
    loaded = load_experience(path, operations={"score": score})
    assert loaded.calls[1].output == OutputRef(loaded.id, 1)
    assert loaded.ref(loaded.calls[1].output).call == 1
    assert [s.ref.call for s in loaded.supervisions] == [0, 1]


def test_array_outputs_are_their_own_handles():
    half = Half()
    session = trace()
    out = session.run(lambda: half(np.ones(3)))
    assert session.calls[0].output is out and session.calls[0].value is out
    assert session.ref(session.calls[0].output) == OutputRef(session.id, 0)
    session.supervise(session.calls[0].output, np.zeros(3), loss="mse", source="test:array")
    assert session.supervisions[0].ref.call == 0

"""Messages are records that experiences hold through the ``message`` codec entry."""

from __future__ import annotations

import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError, TensorCodeError
from tensorcode.operations import Operation
from tensorcode.text import Message, message_codecs
from tensorcode.training import load_experience


class Echo(Operation):
    """An external operation (a chat service stand-in) that answers a message."""

    qualified_name = "tests.Echo"
    replay = "external"

    def __init__(self):
        self._initialize("reference")

    def compute(self, message):
        return Message("assistant", message.content.upper())


def test_messages_round_trip_only_with_the_message_codec(tmp_path):
    echo = Echo()
    session = tc.trace()
    answer = session.run(lambda: echo(Message("user", "hello")))
    assert answer == Message("assistant", "HELLO")
    with pytest.raises(TensorCodeError, match="no codec for a Message"):
        session.save(tmp_path / "m.json", operations={"echo": echo})
    session.save(tmp_path / "m.json", operations={"echo": echo}, codecs=message_codecs())
    loaded = load_experience(tmp_path / "m.json", operations={"echo": echo},
                             codecs={"message": Message})
    assert loaded.calls[0].inputs[0].value == Message("user", "hello")
    assert loaded.calls[0].output == answer
    with pytest.raises(ArtifactError, match="'message' is not allowlisted"):
        load_experience(tmp_path / "m.json", operations={"echo": echo})


def test_roles_are_checked():
    with pytest.raises(ValueError, match="role"):
        Message("robot", "hi")
    with pytest.raises(TypeError):
        Message("user", 3)

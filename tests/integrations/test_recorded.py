"""RecordedModel replays a validated recording in order and keeps the prompts."""

from __future__ import annotations

import json
import threading

import pytest

from tensorcode.errors import ArtifactError
from tensorcode.integrations import (
    Model,
    ModelError,
    ModelRequest,
    RecordedModel,
    as_author,
    ask,
    save_replies,
)


def test_replays_in_order_and_records_prompts(tmp_path):
    path = tmp_path / "replies.json"
    save_replies(path, ["first", "second"], note="two replies")
    model = RecordedModel(path)
    assert isinstance(model, Model)
    assert model.complete(ModelRequest(prompt="p1")) == "first"
    assert model.complete("p2") == "second"
    assert model.prompts == ["p1", "p2"] and model.remaining == 0
    with pytest.raises(ModelError, match="all were used"):
        model.complete("p3")
    assert model.prompts == ["p1", "p2"]


@pytest.mark.parametrize("document, field", [
    ({"format": "other", "version": 1, "replies": []}, "format"),
    ({"format": "tensorcode.recorded-replies", "version": 9, "replies": []}, "version"),
    ({"format": "tensorcode.recorded-replies", "version": 1, "replies": [1]}, "replies"),
])
def test_invalid_recordings_are_refused(tmp_path, document, field):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match=field):
        RecordedModel(path)


def test_not_json_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{replies: nope")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        RecordedModel(path)


def test_concurrent_replay_hands_each_reply_out_once():
    model = RecordedModel([f"r{i}" for i in range(400)])
    seen = []
    lock = threading.Lock()

    def work():
        for _ in range(100):
            reply = model.complete("p")
            with lock:
                seen.append(reply)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == sorted(f"r{i}" for i in range(400))


def test_callables_are_authors_and_other_things_are_not():
    author = as_author(lambda prompt: prompt.upper())
    assert author(ModelRequest(prompt="abc")) == "ABC"
    with pytest.raises(ModelError, match="not reply text"):
        ask(lambda prompt: 42, ModelRequest(prompt="abc"))
    with pytest.raises(TypeError, match="author"):
        as_author(42)

"""A pretrained tool's config is bounded by its tensor file before anything is built:
a size key asking for a dimension larger than any the file holds is refused, naming it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensorcode.errors import ArtifactError
from tensorcode.tools import Decision, Investigator, Planner, Scene
from tensorcode.tools.chatbot import Chatbot

SMALL = [(Decision, {"dim": 2, "hidden": 3, "buckets": 8}),
         (Investigator, {"dim": 2, "hidden": 3, "buckets": 8,
                         "retrieval_encoder": {"dim": 4, "buckets": 16, "scale": 10.0}}),
         (Planner, {"state_size": 5, "candidate_size": 3, "dim": 2, "hidden": 3}),
         (Scene, {"observation_size": 6, "dim": 2, "hidden": 3, "buckets": 8}),
         (Chatbot, {"context": 3, "dim": 2, "heads": 1, "layers": 1})]


@pytest.mark.parametrize("cls, config", SMALL, ids=[c.__name__ for c, _ in SMALL])
def test_every_size_key_is_a_dimension_the_file_holds(cls, config, tmp_path):
    """The bound never refuses a directory ``save_pretrained`` wrote."""
    tool = cls(config, backend="reference")
    loaded = cls.from_pretrained(tool.save_pretrained(tmp_path / "tool"), backend="reference")
    assert loaded.config == tool.config
    for (name, a), (_, b) in zip(tool.operations["scorer" if "scorer" in tool.operations
                                                 else next(iter(tool.operations))]
                                 .named_parameters(), next(iter(
                                     loaded.operations.values())).named_parameters()):
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("key, value", [
    (["buckets"], 8_000_000_000), (["dim"], 2 ** 40),
    (["retrieval_encoder", "buckets"], 10 ** 9)])
def test_a_size_beyond_the_file_is_refused_before_building(tmp_path, key, value):
    tool = Investigator(SMALL[1][1], backend="reference")
    directory = tool.save_pretrained(tmp_path / "tool")
    document = json.loads((directory / "tool.json").read_text())
    node = document["config"]
    for step in key[:-1]:
        node = node[step]
    node[key[-1]] = value
    (directory / "tool.json").write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match=r"config\.{}.*larger than any dimension".format(
            r"\.".join(key))):
        Investigator.from_pretrained(directory, backend="reference")


def test_a_long_alphabet_is_bounded_by_its_length(tmp_path):
    tool = Chatbot(SMALL[4][1], backend="reference")
    directory = tool.save_pretrained(tmp_path / "tool")
    document = json.loads((directory / "tool.json").read_text())
    document["config"]["alphabet"] = "".join(chr(0x4E00 + k) for k in range(100_000))
    (directory / "tool.json").write_text(json.dumps(document))
    with pytest.raises(ArtifactError, match=r"config\.alphabet.*larger than any dimension"):
        Chatbot.from_pretrained(directory, backend="reference")

"""A pretrained tool's config is bounded by its tensor file before anything is built:
a size key asking for a dimension larger than any the file holds is refused, naming it;
a config whose products of sizes (``buckets * dim``) describe more parameter values than
the file holds, or more bytes than ``max_bytes``, is refused in well under a second."""

from __future__ import annotations

import json
import math
import time
import tracemalloc

import numpy as np
import pytest

from tensorcode.errors import ArtifactError
from tensorcode.tools import Decision, Investigator, Planner, Scene
from tensorcode.tools.base import MAX_PRETRAINED_BYTES
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


def _built_parameters(tool) -> int:
    return sum(math.prod(shape) for op in tool.operations.values()
               for _, shape, _ in op.parameter_signature())


@pytest.mark.parametrize("cls, config", SMALL + [
    (Decision, {}), (Planner, {"state_size": 3}), (Planner, {"candidate_size": 4}),
    (Investigator, {"dim": 5, "hidden": 7}), (Scene, {"observation_size": 2, "dim": 3}),
    (Chatbot, {"context": 5, "dim": 12, "heads": 3, "layers": 3, "alphabet": "abc"})],
    ids=lambda value: value.__name__ if isinstance(value, type) else "")
def test_planned_parameters_are_the_parameters_built(cls, config):
    """The count a loader bounds before building is the count the tool builds."""
    tool = cls(config, backend="reference")
    assert tool.planned_parameters() == _built_parameters(tool)


def _crafted(tmp_path, change, cls=Decision, config=None):
    tool = cls(config or {"dim": 8, "hidden": 3, "buckets": 4096}, backend="reference")
    directory = tool.save_pretrained(tmp_path / "tool")
    document = json.loads((directory / "tool.json").read_text())
    document["config"].update(change)
    (directory / "tool.json").write_text(json.dumps(document))
    return directory


@pytest.mark.parametrize("change", [{"dim": 4096}, {"dim": 1000}, {"hidden": 4096}])
def test_a_product_of_sizes_beyond_the_file_is_refused_fast_and_small(tmp_path, change):
    """Each size is a dimension the file holds (4096 buckets), but ``buckets * dim``
    asks for 16.8 million values where the file holds about 33 thousand: refused before
    the table is built, in well under a second and a few MiB."""
    directory = _crafted(tmp_path, change)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ArtifactError, match=r"field 'config'.*parameter values, but "
                                                r"the tensor file holds") as caught:
            Decision.from_pretrained(directory, backend="reference")
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.field == "config"
    assert elapsed < 1.0 and peak < 100 * 2 ** 20, (elapsed, peak)


def test_max_bytes_bounds_the_config_and_the_file_and_can_be_raised(tmp_path):
    directory = _crafted(tmp_path, {})
    planned = Decision({"dim": 8, "hidden": 3, "buckets": 4096}).planned_parameters() * 4
    header = json.loads((directory / "weights.safetensors").read_bytes()[8:][:int.from_bytes(
        (directory / "weights.safetensors").read_bytes()[:8], "little")])
    data = max(end for key, entry in header.items() if key != "__metadata__"
               for end in entry["data_offsets"])
    assert planned < data  # the file holds the calibration buffer too
    with pytest.raises(ArtifactError, match=r"field 'config'.*more than max_bytes"):
        Decision.from_pretrained(directory, backend="reference", max_bytes=planned - 1)
    with pytest.raises(ArtifactError, match=r"bytes of tensors, more than max_bytes") as caught:
        Decision.from_pretrained(directory, backend="reference", max_bytes=data - 1)
    assert caught.value.field == "data"
    loaded = Decision.from_pretrained(directory, backend="reference", max_bytes=data)
    assert loaded.config["buckets"] == 4096 and MAX_PRETRAINED_BYTES == 1 << 30
    chatbot = _crafted(tmp_path / "chat", {}, Chatbot, SMALL[4][1])
    with pytest.raises(ArtifactError, match="max_bytes=100"):
        Chatbot.from_pretrained(chatbot, backend="reference", max_bytes=100)

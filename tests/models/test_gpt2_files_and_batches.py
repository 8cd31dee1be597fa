"""GPT-2 loading checks the config against the tensor file before building anything,
a mapped table refuses a file changed under it, and generation takes any batch size."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

import tensorcode as tc
from tensorcode.errors import ArtifactError
from tensorcode.models import gpt2
from tensorcode.nn.transformer import GptConfig

CONFIG = GptConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=4)
OPTIONS = {"backend": "reference", "strategy": "whole"}


@pytest.fixture(scope="module")
def model():
    return gpt2.GptModel(CONFIG, batch=2, seed=4, **OPTIONS)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, model):
    return gpt2.save(model, tmp_path_factory.mktemp("gpt2") / "model")


def _with_config(saved, tmp_path, **changes):
    directory = tmp_path / "changed"
    directory.mkdir()
    os.link(saved / "model.safetensors", directory / "model.safetensors")
    config = json.loads((saved / "config.json").read_text()) | changes
    (directory / "config.json").write_text(json.dumps(config))
    return directory


@pytest.mark.parametrize("field, value", [
    ("vocab_size", 4_000_000_000), ("n_embd", 2_000_000_000), ("n_layer", 1_000_000),
    ("n_positions", 2 ** 40), ("vocab_size", 12)])
def test_a_config_asking_for_more_than_the_file_holds_is_refused_before_building(
        saved, tmp_path, field, value):
    if field == "n_embd":  # (keep n_head dividing it, so the header check is what refuses)
        value = value - value % CONFIG.n_head
    directory = _with_config(saved, tmp_path, **{field: value})
    with pytest.raises(ArtifactError, match=f"{field}.*the tensor file holds"):
        gpt2.load(directory, **OPTIONS)


def test_blocks_must_be_numbered_without_a_gap(saved, tmp_path):
    tensors, metadata = tc.files.load_tensors(saved / "model.safetensors")
    renamed = {name.replace("h.1.", "h.900000000."): value for name, value in tensors.items()}
    directory = tmp_path / "gap"
    directory.mkdir()
    tc.files.save_tensors(directory / "model.safetensors", renamed, metadata)
    (directory / "config.json").write_text((saved / "config.json").read_text())
    with pytest.raises(ArtifactError, match=r"skip h\.1"):
        gpt2.load(directory, **OPTIONS)


def test_the_copying_load_is_the_default_for_a_writable_file(saved, model):
    copied = gpt2.load(saved, **OPTIONS)
    assert copied.parameters.buffers()["float32"].flags.owndata
    assert copied.parameters.equals(model.parameters)


def test_a_mapped_model_refuses_its_file_once_rewritten_in_place(saved, tmp_path, model):
    directory = tmp_path / "mapped"
    directory.mkdir()
    (directory / "config.json").write_text((saved / "config.json").read_text())
    weights = directory / "model.safetensors"
    weights.write_bytes((saved / "model.safetensors").read_bytes())
    weights.chmod(stat.S_IRUSR | stat.S_IRGRP)  # read-only: mapped by default
    mapped = gpt2.load(directory, **OPTIONS)
    assert not mapped.parameters.buffers()["float32"].flags.owndata
    ids = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(mapped.logits(ids), model.logits(ids))
    weights.chmod(stat.S_IRUSR | stat.S_IWUSR)
    raw = bytearray(weights.read_bytes())
    raw[-4:] = np.float32(np.nan).tobytes()
    with open(weights, "r+b") as handle:  # in place: the map would now read NaN
        handle.write(raw)
    os.utime(weights, ns=(0, 0))
    with pytest.raises(ArtifactError, match="changed since it was loaded"):
        mapped.logits(ids)
    with pytest.raises(ArtifactError, match="changed since it was loaded"):
        gpt2.generate(mapped, ids, 2)
    with open(weights, "r+b") as handle:  # truncated: refused before any page is read
        handle.truncate(100)
    with pytest.raises(ArtifactError, match="mapped=False"):
        mapped.decoder().step(np.array([1, 2]))


def _read_only_copy(saved, directory):
    directory.mkdir()
    (directory / "config.json").write_text((saved / "config.json").read_text())
    weights = directory / "model.safetensors"
    weights.write_bytes((saved / "model.safetensors").read_bytes())
    weights.chmod(stat.S_IRUSR | stat.S_IRGRP)
    return weights


def test_a_file_truncated_in_place_before_a_mapped_load_is_refused(saved, tmp_path):
    weights = _read_only_copy(saved, tmp_path / "short")
    size = weights.stat().st_size
    weights.chmod(stat.S_IRUSR | stat.S_IWUSR)
    os.truncate(weights, size - 4)
    with pytest.raises(ArtifactError, match="truncated or padded"):
        gpt2.load(weights.parent, mapped=True, **OPTIONS)


def test_a_file_truncated_between_its_header_and_its_map_is_refused(saved, tmp_path,
                                                                     monkeypatch):
    """The map is made of the file whose header was checked, unchanged: a truncation
    after the header was read (here, just before the map) is an ``ArtifactError``
    naming the file, never a map past its end that a first read turns into SIGBUS."""
    weights = _read_only_copy(saved, tmp_path / "raced")
    weights.chmod(stat.S_IRUSR | stat.S_IWUSR)
    size = weights.stat().st_size
    real = tc.files.TensorFile.map_run

    def truncating(self, names):
        os.truncate(weights, size - 64)
        return real(self, names)
    monkeypatch.setattr(tc.files.TensorFile, "map_run", truncating)
    with pytest.raises(ArtifactError, match="changed since its header was read") as caught:
        gpt2.load(weights.parent, mapped=True, **OPTIONS)
    assert str(caught.value.path) == str(weights)


def _alone(model, prompt, new, **options):
    return np.stack([gpt2.generate(model, row, new, **options) for row in prompt])


@pytest.mark.parametrize("rows", [1, 3, 5])
def test_generation_takes_any_batch_size_and_each_row_is_its_own(model, rows):
    prompt = np.random.default_rng(rows).integers(0, CONFIG.vocab_size, (rows, 3))
    out = gpt2.generate(model, prompt, 4)
    assert out.shape == (rows, 7) and (out[:, :3] == prompt).all()
    np.testing.assert_array_equal(out, _alone(model, prompt, 4))
    for k in range(3, 7):  # each new token is the argmax of the full-context logits
        np.testing.assert_array_equal(out[:, k], model.logits(out[:, :k])[:, -1].argmax(-1))


def test_batch_sizes_share_the_weights_and_one_model_per_padded_size(model):
    prompt = np.random.default_rng(0).integers(0, CONFIG.vocab_size, (7, 2))
    first = gpt2.generate(model, prompt[:3], 2)
    variant = model.for_batch(3)
    assert variant.batch == 4 and model.for_batch(4) is variant and model.for_batch(2) is model
    sizes = dict(model._batches)
    gpt2.generate(model, prompt[:4], 2)
    assert model._batches == sizes  # 3 and 4 rows: one recorded model, one compile
    assert variant.plan("decode") is variant.plan("decode")
    assert np.shares_memory(variant.parameters.buffers()["float32"],
                            model.parameters.buffers()["float32"])
    np.testing.assert_array_equal(gpt2.generate(model, prompt[:3], 2), first)
    sampled = gpt2.generate(model, prompt, 3, generator=tc.random.Generator(2))
    again = gpt2.generate(model, prompt, 3, generator=tc.random.Generator(2))
    np.testing.assert_array_equal(sampled, again)
    assert sampled.shape == (7, 5) and 8 in model._batches


def test_the_layered_strategy_decodes_any_batch_size_alike(model):
    layered = gpt2.GptModel(CONFIG, batch=2, seed=4, backend="reference", strategy="layered")
    prompt = np.random.default_rng(9).integers(0, CONFIG.vocab_size, (5, 3))
    out = gpt2.generate(layered, prompt, 4)
    np.testing.assert_array_equal(out, gpt2.generate(model, prompt, 4))
    assert layered.for_batch(5).strategy == "layered" and layered.for_batch(5).batch == 8

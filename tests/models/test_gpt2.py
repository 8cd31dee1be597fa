"""GPT-2 against an independent implementation: a PyTorch forward written here from
GPT-2's equations, fed the same released-layout file the loader reads."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import tensorcode as tc
from tensorcode.errors import ArtifactError, DTypeError, FeedError, RandomError, ShapeError
from tensorcode.files.tensorfile import save_tensors
from tensorcode.models import gpt2
from tensorcode.nn.transformer import GptConfig

CONFIG = GptConfig(vocab_size=31, block_size=12, n_layer=2, n_head=2, n_embd=8)


def released_tensors(config: GptConfig, seed: int = 3) -> dict[str, np.ndarray]:
    """Random weights under GPT-2's released names (Conv1D ``[in, out]`` layout)."""
    rng = np.random.default_rng(seed)
    c = config.n_embd

    def draw(*shape, scale=0.3, mean=0.0):
        return (mean + scale * rng.standard_normal(shape)).astype(np.float32)

    tensors = {"wte.weight": draw(config.vocab_size, c), "wpe.weight": draw(config.block_size, c)}
    for k in range(config.n_layer):
        p = f"h.{k}."
        tensors |= {
            p + "ln_1.weight": draw(c, mean=1.0, scale=0.1), p + "ln_1.bias": draw(c, scale=0.1),
            p + "attn.c_attn.weight": draw(c, 3 * c), p + "attn.c_attn.bias": draw(3 * c),
            p + "attn.c_proj.weight": draw(c, c), p + "attn.c_proj.bias": draw(c),
            p + "ln_2.weight": draw(c, mean=1.0, scale=0.1), p + "ln_2.bias": draw(c, scale=0.1),
            p + "mlp.c_fc.weight": draw(c, 4 * c), p + "mlp.c_fc.bias": draw(4 * c),
            p + "mlp.c_proj.weight": draw(4 * c, c), p + "mlp.c_proj.bias": draw(c)}
    tensors |= {"ln_f.weight": draw(c, mean=1.0, scale=0.1), "ln_f.bias": draw(c, scale=0.1)}
    return tensors


def torch_logits(tensors: dict[str, np.ndarray], config: GptConfig, ids: np.ndarray
                 ) -> np.ndarray:
    """GPT-2's forward in PyTorch, written from the paper's equations."""
    w = {k: torch.from_numpy(v) for k, v in tensors.items()}
    return torch_forward(w, config, torch.from_numpy(ids.astype(np.int64))).numpy()


def torch_forward(w: dict[str, torch.Tensor], config: GptConfig, ids_t: torch.Tensor
                  ) -> torch.Tensor:
    """The logits of ``ids_t`` under the tensors ``w`` (GPT-2's paths), differentiable."""
    import torch.nn.functional as F

    b, t = ids_t.shape
    h, c = config.n_head, config.n_embd
    d = c // h
    eps = config.layer_norm_epsilon
    x = w["wte.weight"][ids_t] + w["wpe.weight"][:t]
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
    for k in range(config.n_layer):
        p = f"h.{k}."
        a = F.layer_norm(x, (c,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, key, v = (z.view(b, t, h, d).transpose(1, 2) for z in qkv.split(c, dim=2))
        scores = (q @ key.transpose(-2, -1)) / math.sqrt(d)
        scores = scores.masked_fill(~mask, float("-inf"))
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = F.layer_norm(x, (c,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = F.gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (c,), w["ln_f.weight"], w["ln_f.bias"], eps)
    return x @ w["wte.weight"].T


def write_released(directory, tensors, config, prefix="transformer.", buffers=True):
    """A directory in GPT-2's released layout: prefixed names, the causal-mask buffers
    and a tied ``lm_head.weight`` beside the parameters."""
    named = {prefix + k: v for k, v in tensors.items()}
    if buffers:
        t = config.block_size
        for k in range(config.n_layer):
            named[f"{prefix}h.{k}.attn.bias"] = np.tril(np.ones((1, 1, t, t), np.float32))
        named["lm_head.weight"] = tensors["wte.weight"]
    save_tensors(directory / "model.safetensors", named, {"format": "pt"})
    (directory / "config.json").write_text(json.dumps({
        "model_type": "gpt2", "vocab_size": config.vocab_size, "n_positions": config.block_size,
        "n_embd": config.n_embd, "n_layer": config.n_layer, "n_head": config.n_head,
        "layer_norm_epsilon": 1e-5, "n_ctx": config.block_size}))
    return directory


@pytest.fixture(scope="module")
def tensors():
    return released_tensors(CONFIG)


@pytest.fixture(scope="module")
def released(tmp_path_factory, tensors):
    return write_released(tmp_path_factory.mktemp("gpt2"), tensors, CONFIG)


@pytest.fixture(scope="module")
def ids():
    return np.random.default_rng(5).integers(0, CONFIG.vocab_size, (2, CONFIG.block_size))


@pytest.fixture(scope="module")
def expected(tensors, ids):
    return torch_logits(tensors, CONFIG, ids)


@pytest.fixture(scope="module")
def reference_model(released):
    return gpt2.load(released, batch=2, backend="reference", strategy="whole")


@pytest.fixture(scope="module")
def compiled_model(released):
    return gpt2.load(released, batch=2, cache_length=CONFIG.block_size)


def test_the_model_announces_gpt2s_paths_in_gpt2s_order(reference_model):
    paths = [p for p, _ in reference_model.named_parameters()]
    assert paths[:2] == ["wte.weight", "wpe.weight"]
    assert paths[2:14] == [f"h.0.{n}" for n in (
        "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
        "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")]
    assert paths[-2:] == ["ln_f.weight", "ln_f.bias"]
    assert len(paths) == 4 + 12 * CONFIG.n_layer
    shapes = {p: s.shape for p, s in reference_model.named_parameters()}
    assert shapes["h.1.attn.c_attn.weight"] == (8, 24)  # [in, out], as released


def test_loaded_logits_match_pytorch(reference_model, ids, expected):
    logits = reference_model.logits(ids)
    assert logits.dtype == np.float32 and logits.shape == (2, CONFIG.block_size, 31)
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=1e-4)
    # a shorter prompt, and a single row, read the same positions (right padding is
    # invisible to a causal model)
    np.testing.assert_allclose(reference_model.logits(ids[1:, :5]), expected[1:, :5],
                               atol=1e-4, rtol=1e-4)


def test_compiled_logits_whose_products_run_as_tiles_match_pytorch(tmp_path):
    # wide enough that the blocks' products and the tied head are register tiles
    # (the tiny CONFIG's products are loops): full-context logits within 1e-4 of
    # PyTorch's, the same bits on both compiled backends
    config = GptConfig(vocab_size=97, block_size=32, n_layer=2, n_head=2, n_embd=64)
    tensors = released_tensors(config)
    directory = write_released(tmp_path, tensors, config)
    tokens = np.random.default_rng(6).integers(0, config.vocab_size, (1, config.block_size))
    logits = [gpt2.load(directory, backend=backend).logits(tokens)
              for backend in ("llvm", "numba")]
    np.testing.assert_allclose(logits[0], torch_logits(tensors, config, tokens), atol=1e-4,
                               rtol=1e-4)
    assert np.array_equal(logits[0], logits[1])


def test_the_decode_twin_gives_the_full_context_logits_at_every_position(
        reference_model, ids, expected):
    decoder = reference_model.decoder()
    for position in range(CONFIG.block_size):
        step = decoder.step(ids[:, position])
        np.testing.assert_allclose(step, expected[:, position], atol=1e-4, rtol=1e-4)
    with pytest.raises(FeedError, match="cache"):
        decoder.step(ids[:, 0])


def test_compiled_layered_decode_matches_pytorch_at_every_position(compiled_model, ids,
                                                                   expected):
    decoder = compiled_model.decoder()
    for position in range(CONFIG.block_size):
        np.testing.assert_allclose(decoder.step(ids[:, position]), expected[:, position],
                                   atol=1e-4, rtol=1e-4)


def test_greedy_generation_follows_the_argmax_of_pytorchs_logits(compiled_model, tensors,
                                                                 ids):
    out = gpt2.generate(compiled_model, ids[:, :3], 5)
    assert out.shape == (2, 8) and (out[:, :3] == ids[:, :3]).all()
    for k in range(3, 8):  # each new token is the argmax given everything before it
        np.testing.assert_array_equal(
            out[:, k], torch_logits(tensors, CONFIG, out[:, :k])[:, -1].argmax(-1))
    with pytest.raises(FeedError, match=r"tc\.random\.Generator"):
        gpt2.generate(compiled_model, ids[:, :3], 2, generator=object())
    with pytest.raises(RandomError, match="temperature"):
        gpt2.generate(compiled_model, ids[:, :3], 2, generator=tc.random.Generator(0),
                      temperature=0.0)


def test_sampled_generation_replays_from_the_generator_state(compiled_model, ids):
    first = gpt2.generate(compiled_model, ids[:, :3], 4, generator=tc.random.Generator(5),
                          temperature=0.8)
    again = gpt2.generate(compiled_model, ids[:, :3], 4, generator=tc.random.Generator(5),
                          temperature=0.8)
    np.testing.assert_array_equal(first, again)
    assert first.shape == (2, 7) and (first[:, :3] == ids[:, :3]).all()
    greedy = gpt2.generate(compiled_model, ids[:, :3], 4)
    top_one = gpt2.generate(compiled_model, ids[:, :3], 4, generator=tc.random.Generator(9),
                            top_k=1)  # one candidate left: the argmax
    np.testing.assert_array_equal(top_one, greedy)
    with pytest.raises(FeedError, match="exceed"):
        gpt2.generate(compiled_model, ids[:, :3], CONFIG.block_size)


def test_a_prefix_and_no_buffers_load_alike(tmp_path, tensors, reference_model, ids,
                                            expected):
    plain = gpt2.load(write_released(tmp_path, tensors, CONFIG, prefix="", buffers=False),
                      batch=2, backend="reference", strategy="whole")
    np.testing.assert_array_equal(plain.parameters.buffers()["float32"],
                                  reference_model.parameters.buffers()["float32"])


@pytest.mark.parametrize("change, error, named", [
    (lambda t: t.pop("h.1.mlp.c_fc.bias"), ArtifactError, "h.1.mlp.c_fc.bias"),
    (lambda t: t.update({"h.0.attn.extra": np.zeros(3, np.float32)}), ArtifactError,
     "h.0.attn.extra"),
    (lambda t: t.update({"h.0.attn.c_proj.weight": np.zeros((8, 9), np.float32)}), ShapeError,
     "h.0.attn.c_proj.weight"),
    (lambda t: t.update({"ln_f.bias": np.zeros(8, np.float64)}), DTypeError, "ln_f.bias"),
])
def test_a_wrong_tensor_is_refused_by_name_and_nothing_changes(reference_model, tensors,
                                                               change, error, named):
    before = reference_model.parameters
    snapshot = dict(tensors)
    change(snapshot)
    with pytest.raises(error, match=named.replace(".", r"\.")):
        reference_model.restore(snapshot)
    assert reference_model.parameters is before


def _block(k: int) -> dict[str, np.ndarray]:
    return {path.replace("h.0.", f"h.{k}.", 1): value
            for path, value in released_tensors(CONFIG).items() if path.startswith("h.0.")}


@pytest.mark.parametrize("change, error, named", [
    (lambda t: t.pop("h.1.mlp.c_fc.bias"), ArtifactError, r"field 'h\.1\.mlp\.c_fc\.bias'"
     r".*missing"),
    (lambda t: t.pop("wpe.weight"), ArtifactError, r"wpe\.weight.*missing"),
    (lambda t: t.update({"h.0.attn.extra": np.zeros(3, np.float32)}), ArtifactError,
     r"field 'transformer\.h\.0\.attn\.extra'.*not a tensor"),
    (lambda t: t.update(_block(2)), ArtifactError,
     r"field 'transformer\.h\.2\.[a-z_.0-9]+'.*n_layer is 2"),
    (lambda t: t.update({"h.1.mlp.c_fc.bias": np.zeros(33, np.float32)}), ShapeError,
     r"h\.1\.mlp\.c_fc\.bias: has shape \[33\].*expects \[32\]"),
])
def test_the_loader_names_a_missing_unexpected_or_misshaped_tensor(tmp_path, tensors, change,
                                                                    error, named):
    """A released file with a tensor missing, an extra one or an extra ``h.N`` block is
    refused naming that tensor, before the parameter count (which would only say the
    totals differ)."""
    snapshot = dict(tensors)
    change(snapshot)
    directory = write_released(tmp_path, snapshot, CONFIG)
    with pytest.raises(error, match=named):
        gpt2.load(directory, backend="reference")


def test_the_loader_refuses_an_untied_head_and_a_bad_config(tmp_path, tensors):
    directory = write_released(tmp_path, tensors, CONFIG)
    named = dict(tensors)
    named["lm_head.weight"] = tensors["wte.weight"] + 1
    save_tensors(directory / "model.safetensors", named)
    with pytest.raises(ArtifactError, match=r"lm_head\.weight"):
        gpt2.load(directory, backend="reference")
    (directory / "config.json").write_text(json.dumps({"vocab_size": 31, "n_positions": 12,
                                                       "n_embd": 8, "n_layer": "2",
                                                       "n_head": 2}))
    with pytest.raises(ArtifactError, match="n_layer"):
        gpt2.load(directory, backend="reference")
    (directory / "config.json").write_text(json.dumps({"vocab_size": 31, "n_positions": 12,
                                                       "n_embd": 8, "n_layer": 2,
                                                       "n_head": 3}))
    with pytest.raises(ArtifactError, match="divisible"):
        gpt2.load(directory, backend="reference")


def test_save_writes_the_released_layout(tmp_path, reference_model, ids, expected):
    gpt2.save(reference_model, tmp_path / "copy")
    again = gpt2.load(tmp_path / "copy", batch=2, backend="reference", strategy="whole")
    np.testing.assert_allclose(again.logits(ids), expected, atol=1e-4, rtol=1e-4)


def test_a_saved_model_loads_as_a_map_of_its_file_and_a_released_one_by_copy(
        tmp_path, released, reference_model):
    gpt2.save(reference_model, tmp_path / "copy")
    mapped = gpt2.load(tmp_path / "copy", batch=2, backend="reference", strategy="whole",
                       mapped=True)
    copied = gpt2.load(tmp_path / "copy", batch=2, backend="reference", strategy="whole",
                       mapped=False)
    assert not mapped.parameters.buffers()["float32"].flags.owndata  # save wrote table order
    assert copied.parameters.buffers()["float32"].flags.owndata
    assert mapped.parameters.equals(reference_model.parameters)
    assert copied.parameters.equals(reference_model.parameters)
    # the released file's order (GPT-2's, with a prefix and buffers) is read into place
    assert reference_model.parameters.buffers()["float32"].flags.owndata


def test_long_generation_shows_progress_on_a_terminal(compiled_model, ids, monkeypatch):
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(gpt2, "PROGRESS_TOKENS", 3)  # "long" for this tiny model
    shown = gpt2.generate(compiled_model, ids[:, :3], 4)
    assert "generate" in terminal.getvalue() and "4/4" in terminal.getvalue()
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    np.testing.assert_array_equal(gpt2.generate(compiled_model, ids[:, :3], 4,
                                                progress=False), shown)
    gpt2.generate(compiled_model, ids[:, :3], 2)  # shorter than PROGRESS_TOKENS: no bar
    assert quiet.getvalue() == ""

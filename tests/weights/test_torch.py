"""PyTorch state dictionaries in, PyTorch tensors out (same dtype, device and
requires_grad), hashed exactly like the NumPy arrays they hold."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

from tensorcode.errors import PatchError
from tensorcode.weights import LowRank, Patch, build, render, tensor_sha256


def _state() -> OrderedDict[str, object]:
    generator = torch.Generator().manual_seed(0)
    return OrderedDict([
        ("linear.weight", torch.randn(4, 3, generator=generator)),
        ("linear.bias", torch.randn(4, generator=generator, dtype=torch.float64)),
        ("steps", torch.tensor([5], dtype=torch.int64)),
    ])


def test_patch_made_on_numpy_applies_to_a_state_dict():
    state = _state()
    arrays = {name: tensor.numpy() for name, tensor in state.items()}
    patch = Patch.from_edits(arrays, "linear.weight[0, 1] = 2.5\nsteps[0] += 1\n")
    result = patch.apply(state)
    assert isinstance(result, OrderedDict) and list(result) == list(state)
    assert isinstance(result["linear.weight"], torch.Tensor)
    assert result["linear.weight"].dtype == torch.float32
    assert result["linear.weight"][0, 1].item() == 2.5
    assert result["steps"].tolist() == [6]
    assert result["linear.bias"] is state["linear.bias"]
    assert state["linear.weight"][0, 1].item() != 2.5  # input untouched


def test_state_dict_as_base_and_requires_grad_kept():
    state = _state()
    state["linear.weight"].requires_grad_(True)
    a = np.ones((4, 1))
    b = np.full((1, 3), 0.5)
    patch = build(state, {"linear.weight": LowRank(a, b)})
    result = patch.apply(state)["linear.weight"]
    assert result.requires_grad
    expected = (state["linear.weight"].detach().double() + 0.5).float()
    assert torch.equal(result.detach(), expected)
    assert tensor_sha256(result.detach().numpy()) == patch.changes["linear.weight"].edited_sha256


def test_torch_hash_refusal_and_render():
    state = _state()
    shown = render(state, digits=3)
    patch = Patch.from_edits(shown.rounded, "linear.weight[1] += 1\n", scales=shown.scales)
    with pytest.raises(PatchError, match="not the tensor this patch was made from"):
        patch.apply(state)  # the unrounded weights are not the base
    rounded_state = OrderedDict((name, torch.from_numpy(array))
                                for name, array in shown.rounded.items())
    assert patch.apply(rounded_state)["linear.weight"].dtype == torch.float32


def test_bfloat16_is_refused_with_advice():
    state = {"w": torch.zeros(2, dtype=torch.bfloat16)}
    with pytest.raises(PatchError, match="convert it to float32"):
        render(state)


def test_bfloat16_tensors_the_patch_does_not_touch_pass_through():
    state = _state()
    state["embed.weight"] = torch.ones(3, 2, dtype=torch.bfloat16)
    patch = Patch.from_edits(state, "linear.weight[0, 0] = 1\n")
    result = patch.apply(state)
    assert result["embed.weight"] is state["embed.weight"]
    assert result["linear.weight"][0, 0].item() == 1.0
    assert patch.fraction_changed(state) == pytest.approx(1 / (12 + 4 + 1 + 6))

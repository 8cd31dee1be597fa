"""Live parity with torch.optim and state dicts moving both ways (the test extra installs torch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorcode as tc
from tensorcode.compiler.plans.tables import Gradients
from tensorcode.integrations import torch as interop

CONFIGS = [
    ("SGD", tc.optim.Sgd, {"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
    ("SGD", tc.optim.Sgd, {"momentum": 0.8, "nesterov": True, "maximize": True}),
    ("Adam", tc.optim.Adam, {"amsgrad": True, "weight_decay": 0.02}),
    ("Adam", tc.optim.Adam, {"betas": (0.8, 0.99), "eps": 1e-6}),
    ("AdamW", tc.optim.AdamW, {"weight_decay": 0.1}),
    ("AdamW", tc.optim.AdamW, {"amsgrad": True, "maximize": True}),
]
IDS = ["sgd-momentum", "sgd-nesterov", "adam-amsgrad", "adam-betas", "adamw", "adamw-ams"]


def network(dtype):
    rng = np.random.default_rng(0)
    tape = tc.Tape()
    for k, shape in enumerate([(3, 4), (6,), (2, 1)]):
        tape.parameter(rng.standard_normal(shape).astype(dtype), name=f"p{k}")
    return tape.into_network()


def gradient_stream(parameters, steps, seed=1):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(p.shape).astype(p.dtype) for p in parameters.payloads()]
            for _ in range(steps)]


def run_ours(optimizer, parameters, grads, lrs):
    for g, lr in zip(grads, lrs):
        parameters = optimizer.step(parameters, Gradients.from_payloads(parameters.layout, g),
                                    lr)
    return parameters


def run_torch(optimizer, tensors, grads, lrs):
    for g, lr in zip(grads, lrs):
        for group in optimizer.param_groups:
            group["lr"] = lr
        for tensor, value in zip(tensors, g):
            tensor.grad = torch.from_numpy(value.copy())
        optimizer.step()


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-10), ("float32", 2e-5)])
@pytest.mark.parametrize("torch_name,cls,kwargs", CONFIGS, ids=IDS)
def test_live_trajectory_matches_torch(torch_name, cls, kwargs, dtype, rtol):
    net = network(dtype)
    parameters = net.parameters()
    tensors = interop.parameters_to_torch(parameters)
    grads = gradient_stream(parameters, 50)
    lrs = [0.01 * (1 + 0.5 * np.cos(t)) for t in range(50)]
    ours = run_ours(cls(**kwargs), parameters, grads, lrs)
    run_torch(getattr(torch.optim, torch_name)(tensors, lr=lrs[0], **kwargs), tensors, grads,
              lrs)
    for a, t in zip(ours.payloads(), tensors):
        np.testing.assert_allclose(a, t.detach().numpy(), rtol=rtol, atol=rtol * 1e-2)


@pytest.mark.parametrize("torch_name,cls,kwargs", CONFIGS, ids=IDS)
def test_state_saved_here_continues_in_torch_and_back(torch_name, cls, kwargs):
    net = network("float64")
    grads = gradient_stream(net.parameters(), 30)
    lrs = [0.02] * 30
    # the reference: 30 uninterrupted steps in torch
    ref_tensors = interop.parameters_to_torch(net.parameters())
    run_torch(getattr(torch.optim, torch_name)(ref_tensors, lr=0.02, **kwargs), ref_tensors,
              grads, lrs)
    # 10 steps here, 10 in torch from our state dict, 10 here again from torch's
    ours = cls(**kwargs)
    parameters = run_ours(ours, net.parameters(), grads[:10], lrs[:10])
    tensors = interop.parameters_to_torch(parameters)
    handed = interop.torch_optimizer(ours, tensors)
    assert type(handed).__name__ == torch_name
    run_torch(handed, tensors, grads[10:20], lrs[10:20])
    back = cls()
    back.load_state_dict(interop.state_dict_from_torch(handed.state_dict()),
                         net.parameters())
    assert back.group() == ours.group()
    parameters = interop.parameters_from_torch(tensors, like=net.parameters())
    parameters = run_ours(back, parameters, grads[20:], lrs[20:])
    for a, t in zip(parameters.payloads(), ref_tensors):
        np.testing.assert_allclose(a, t.detach().numpy(), rtol=1e-10, atol=1e-14)


def test_torch_state_dict_loads_with_exactly_matching_keys():
    net = network("float32")
    tensors = interop.parameters_to_torch(net.parameters())
    optimizer = torch.optim.Adam(tensors, lr=0.1, amsgrad=True)
    run_torch(optimizer, tensors, gradient_stream(net.parameters(), 3), [0.1] * 3)
    converted = interop.state_dict_from_torch(optimizer.state_dict())
    ours = tc.optim.Adam(amsgrad=True)
    ours.load_state_dict(converted, net.parameters())
    mine = ours.state_dict()
    assert mine["param_groups"] == optimizer.state_dict()["param_groups"]
    for index, entry in converted["state"].items():
        assert list(mine["state"][index]) == list(entry)
        for key in entry:
            assert mine["state"][index][key].dtype == entry[key].dtype
            np.testing.assert_array_equal(mine["state"][index][key], entry[key])


def test_the_former_module_name_warns_and_gives_the_same_functions():
    import subprocess
    import sys

    code = ("import warnings\n"
            "warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n"
            "    import tensorcode.interop.torch\n"
            "except DeprecationWarning as warning:\n"
            "    print('warned:', warning)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "warned: tensorcode.interop.torch is deprecated" in out
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from tensorcode.interop import torch as former
    assert former.__all__ == interop.__all__
    for name in interop.__all__:
        assert getattr(former, name) is getattr(interop, name)

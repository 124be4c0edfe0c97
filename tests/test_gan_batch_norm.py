"""The 3DGAN's batch norm (evogan.gan3d.model.blocks.BatchNorm3d): its tensor-arithmetic training
pass, used on GPUs, computes what ``nn.BatchNorm3d`` computes, running averages included."""

from __future__ import annotations

import torch
from torch import nn

from evogan.gan3d.model.blocks import BatchNorm3d


def _pair(dtype: torch.dtype = torch.float64) -> tuple[nn.BatchNorm3d, BatchNorm3d]:
    library = nn.BatchNorm3d(6, eps=1e-6, momentum=0.01)
    ours = BatchNorm3d(6, eps=1e-6, momentum=0.01)
    ours.devices = ("cpu",)  # take the GPU path here
    with torch.no_grad():
        library.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(0))
        library.bias.uniform_(-1.0, 1.0, generator=torch.Generator().manual_seed(1))
    ours.load_state_dict(library.state_dict())
    return library.to(dtype), ours.to(dtype)


def _batch(seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(4, 6, 10, 9, 8, generator=gen, dtype=dtype) * 3.0 + 1.0).requires_grad_()


def test_training_pass_matches_the_library_with_gradients_and_running_averages() -> None:
    library, ours = _pair()
    for seed in range(3):
        x = _batch(seed)
        expected, got = library(x), ours(x)
        assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12)
        upstream = torch.randn(expected.shape, dtype=torch.float64)
        want = torch.autograd.grad(expected, (x, library.weight, library.bias), upstream)
        have = torch.autograd.grad(got, (x, ours.weight, ours.bias), upstream)
        for a, b in zip(have, want, strict=True):
            assert torch.allclose(a, b, rtol=1e-10, atol=1e-10)
    for name, buffer in library.named_buffers():
        assert torch.allclose(dict(ours.named_buffers())[name], buffer, rtol=1e-12, atol=0), name
    library.eval(), ours.eval()  # the running averages, through the library's kernel
    x = _batch(9)
    assert torch.allclose(ours(x), library(x), rtol=1e-12, atol=1e-12)


def test_bf16_input_gets_float32_statistics_and_comes_back_in_bf16() -> None:
    library, ours = _pair(torch.float32)
    x = _batch(4, torch.float32).detach().bfloat16()
    got = ours(x).detach()
    assert got.dtype == torch.bfloat16
    expected = library(x.float()).detach()
    assert float((got.float() - expected).abs().max()) < 2e-2 * float(expected.abs().max())
    assert torch.allclose(ours.running_var, library.running_var, rtol=1e-5)


def test_cpus_keep_the_library_kernel() -> None:
    library, ours = _pair(torch.float32)
    ours.devices = BatchNorm3d.devices
    x = _batch(5, torch.float32)
    assert torch.equal(ours(x), library(x))

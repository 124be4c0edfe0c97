"""The phase and FFT forms of a 3DGAN block's convolution against the layers they replace
(evogan.gan3d.kernels.convolution): same values and gradients, same parameter names, and a training
step with ``convolution: fft`` that agrees with the direct one to float32 rounding."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from mpi4py import MPI
from torch import nn

from evogan.config import load_config
from evogan.config.base import validate
from evogan.errors import ConfigError
from evogan.gan3d.kernels import convolution
from evogan.gan3d.kernels.convolution import (
    ConvBlock,
    fft_conv3d,
    fft_correlate,
    fft_correlate_backward,
    fft_size,
    phase_pays,
    upsampled_conv3d,
)
from evogan.gan3d.model.blocks import conv_block
from evogan.gan3d.model.networks import build_models
from evogan.gan3d.model.precision import ForwardOptions
from evogan.gan3d.model.spec import GanSpec, GeneratorBlock
from evogan.gan3d.training.setup import forward_options
from evogan.gan3d.training.step import GanStep
from tests.gan_fixtures import TINY, tiny_spec, toy_showers

# (factors, kernel, input cells, (before, after) pads): the shipped specs' upsampling blocks,
# then odd ones (padding not a multiple of the factor, kernel shorter than the factor)
PHASE_CASES = [
    ((6, 6, 6), (6, 6, 8), (3, 3, 2), ((0, 0), (0, 0), (0, 0))),
    ((2, 2, 2), (6, 5, 8), (3, 3, 4), ((2, 2), (2, 2), (0, 0))),
    ((2, 2, 3), (3, 3, 8), (3, 4, 3), ((1, 1), (0, 0), (3, 3))),
    ((3, 3, 1), (3, 3, 1), (4, 4, 3), ((1, 1), (1, 1), (0, 0))),
    ((3, 2, 4), (2, 5, 3), (2, 3, 2), ((4, 1), (0, 3), (5, 2))),
    ((4, 1, 2), (7, 3, 1), (3, 5, 4), ((0, 6), (2, 0), (1, 1))),
]


def layers_reference(x, weight, bias, factors, pads):
    """The block's layers as the spec writes them: upsample, zero padding, convolution."""
    up = nn.Upsample(scale_factor=tuple(float(f) for f in factors), mode="nearest")(x)
    (xa, xb), (ya, yb), (za, zb) = pads
    return F.conv3d(F.pad(up, (za, zb, ya, yb, xa, xb)), weight, bias)


@pytest.mark.parametrize(("factors", "kernel", "cells", "pads"), PHASE_CASES)
def test_phase_form_equals_upsample_pad_convolution(factors, kernel, cells, pads) -> None:
    gen = torch.Generator().manual_seed(sum(kernel))
    x = torch.randn(2, 3, *cells, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(4, 3, *kernel, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(4, generator=gen, dtype=torch.float64, requires_grad=True)
    expected = layers_reference(x, weight, bias, factors, pads)
    got = upsampled_conv3d(x, weight, bias, factors, pads)
    assert got.shape == expected.shape
    scale = float(expected.detach().abs().max())
    assert torch.allclose(got, expected, rtol=0, atol=1e-12 * scale)
    upstream = torch.randn(expected.shape, generator=gen, dtype=torch.float64)
    want = torch.autograd.grad(expected, (x, weight, bias), upstream)
    have = torch.autograd.grad(got, (x, weight, bias), upstream)
    for a, b in zip(have, want, strict=True):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-10)


def test_phase_form_is_used_only_where_it_needs_fewer_taps() -> None:
    assert phase_pays((6, 6, 6), (6, 6, 8))  # 2 x 2 x 3 taps instead of 288
    assert phase_pays((3, 3, 1), (3, 3, 1))  # 2 x 2 x 1 instead of 9
    assert not phase_pays((3, 3, 5), (1, 1, 1))  # a 1x1x1 kernel reads one cell anyway
    assert not phase_pays((1, 1, 1), (3, 3, 3))


def _shipped_first_block() -> GeneratorBlock:
    return GeneratorBlock(
        upsample=(6, 6, 6), filters=8, kernel=(6, 6, 8), activation="relu", batch_norm=True
    )


def test_conv_block_keeps_the_layer_names_and_computes_what_its_layers_do() -> None:
    options = {"slope": 0.3, "bn_eps": 1e-6, "bn_momentum": 0.01}
    spec_block = GeneratorBlock(
        upsample=(3, 3, 2), zero_pad=(1, 0, 1), filters=4, kernel=(4, 5, 3), batch_norm=True
    )
    block = conv_block(spec_block, 3, rng=torch.Generator().manual_seed(0), **options)
    assert isinstance(block, ConvBlock) and block.phase
    layers = nn.Sequential(*block)
    assert list(block.state_dict()) == list(layers.state_dict())
    block.double()
    x = torch.randn(4, 3, 5, 4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got, expected = block(x), layers(x)  # training mode: batch statistics, same for both
    assert got.shape == (4, 4, 14, 8, 12)
    assert torch.allclose(got, expected, rtol=1e-9, atol=1e-9)


def test_phase_form_under_bf16_autocast_and_channels_last_stays_within_bf16_rounding() -> None:
    options = {"slope": 0.3, "bn_eps": 1e-6, "bn_momentum": 0.01}
    block = conv_block(_shipped_first_block(), 8, rng=torch.Generator().manual_seed(0), **options)
    layers = nn.Sequential(*block)
    x = torch.randn(2, 8, 9, 9, 8, generator=torch.Generator().manual_seed(1))
    expected = layers(x)
    block.to(memory_format=torch.channels_last_3d)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = block(x.contiguous(memory_format=torch.channels_last_3d))
    assert got.dtype == torch.bfloat16
    error = float(((got.float() - expected).norm() / expected.norm()).detach())
    assert 1e-4 < error < 2e-2, error  # above 1e-4: bf16 really ran


def _smooth(n: int, primes: tuple[int, ...]) -> bool:
    """Whether every prime factor of ``n`` is in ``primes``."""
    for p in primes:
        while n % p == 0:
            n //= p
    return n == 1


def test_fft_size_has_no_prime_factor_above_seven() -> None:
    assert [fft_size(n) for n in (25, 27, 41, 43, 47, 51, 53)] == [25, 27, 42, 45, 48, 54, 54]
    for n in range(1, 200):
        size = fft_size(n)
        assert size >= n
        assert _smooth(size, (2, 3, 5, 7))


def test_fft_size_is_the_smallest_length_of_the_primes_given() -> None:
    assert [fft_size(n, (2, 3)) for n in (41, 55, 51)] == [48, 64, 54]
    assert [fft_size(n, (2, 3, 5)) for n in (41, 55, 43)] == [45, 60, 45]
    for primes in ((2,), (2, 3), (2, 3, 5)):
        for n in range(1, 120):
            size = fft_size(n, primes)
            assert _smooth(size, primes)
            assert not any(_smooth(m, primes) for m in range(n, size))


@pytest.mark.parametrize(
    ("channels", "cells", "kernel", "pads"),
    [
        ((4, 3), (51, 51, 27), (5, 6, 6), ((0, 0), (0, 0), (0, 0))),
        ((1, 4), (12, 11, 9), (5, 4, 4), ((2, 2), (1, 2), (0, 3))),
        ((3, 2), (7, 6, 5), (7, 1, 2), ((3, 3), (0, 0), (1, 0))),
    ],
)
@pytest.mark.slow
def test_fft_form_equals_the_direct_convolution_to_float32_rounding(channels, cells, kernel, pads):
    gen = torch.Generator().manual_seed(math.prod(cells))
    x = torch.randn(2, channels[0], *cells, generator=gen, requires_grad=True)
    weight = torch.randn(channels[1], channels[0], *kernel, generator=gen, requires_grad=True)
    bias = torch.randn(channels[1], generator=gen, requires_grad=True)
    (xa, xb), (ya, yb), (za, zb) = pads
    padded = F.pad(x.double(), (za, zb, ya, yb, xa, xb))
    exact = F.conv3d(padded, weight.double(), bias.double())
    got = fft_conv3d(x, weight, bias, pads)
    assert got.dtype == torch.float32 and got.shape == exact.shape
    assert float(((got.double() - exact).norm() / exact.norm()).detach()) < 1e-6
    upstream = torch.randn(exact.shape, generator=gen)
    have = torch.autograd.grad(got, (x, weight, bias), upstream)
    want = torch.autograd.grad(exact, (x, weight, bias), upstream.double())
    for a, b in zip(have, want, strict=True):
        assert float((a.double() - b).norm() / b.norm()) < 1e-5
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_autocast = fft_conv3d(x, weight, bias, pads)
    assert under_autocast.dtype == torch.float32
    assert torch.equal(under_autocast, got)


def test_kept_input_spectra_save_a_transform_and_give_the_same_gradients(monkeypatch) -> None:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 9, 8, 7, generator=gen, requires_grad=True)
    weight = torch.randn(4, 3, 3, 2, 4, generator=gen, requires_grad=True)
    upstream = torch.randn(2, 4, 8, 9, 5, generator=gen)
    pads = ((1, 0), (0, 2), (0, 1))
    transform, transforms = convolution._spectrum, []
    monkeypatch.setattr(
        convolution, "_spectrum", lambda *a: transforms.append(a[0].shape) or transform(*a)
    )
    grads, counts = {}, {}
    for keep in (True, False):
        monkeypatch.setattr(convolution, "keep_spectra", keep)
        transforms.clear()
        out = fft_conv3d(x, weight, None, pads)
        grads[keep] = torch.autograd.grad(out, (x, weight), upstream)
        counts[keep] = transforms.count(x.shape)
    assert counts == {True: 1, False: 2}  # the input's transform: forward only, or again
    assert all(torch.equal(a, b) for a, b in zip(grads[True], grads[False], strict=True))


def test_spectra_are_kept_only_where_a_weight_gradient_will_need_them(monkeypatch) -> None:
    operator, asked = convolution.fft_correlate, []
    monkeypatch.setattr(
        convolution, "fft_correlate", lambda *a: asked.append(a[-1]) or operator(*a)
    )
    x = torch.randn(1, 2, 6, 5, 4)
    weight = torch.randn(3, 2, 2, 2, 2, requires_grad=True)
    fft_conv3d(x, weight, None)
    with torch.no_grad():
        fft_conv3d(x, weight, None)
    fft_conv3d(x, weight.detach(), None)  # a frozen network, as D in the generator's update
    assert asked == [True, False, False]


@pytest.mark.slow
def test_fft_operators_are_whole_to_torch_compile() -> None:
    """Schema, shapes without data, autograd and AOT tracing of the two custom operators:
    what torch.compile relies on to keep them in one graph."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 9, 8, 7, generator=gen, requires_grad=True)
    weight = torch.randn(4, 3, 3, 2, 4, generator=gen, requires_grad=True)
    bias = torch.randn(4, generator=gen, requires_grad=True)
    pads = [1, 0, 0, 2, 1, 1]
    results = [
        torch.library.opcheck(fft_correlate, (x, weight, None, [0] * 6, False)),
        torch.library.opcheck(fft_correlate, (x, weight, bias, pads, False)),
        torch.library.opcheck(fft_correlate, (x, weight, bias, pads, True)),
    ]
    grad = torch.randn(2, 4, 8, 9, 6, generator=gen)
    pairs = fft_correlate(x.detach(), weight.detach(), None, pads, True)[1]
    for wanted in ((True, True), (True, False), (False, True)):
        for kept in (None, pairs):
            args = (grad, x.detach(), weight.detach(), kept, pads, *wanted)
            results.append(torch.library.opcheck(fft_correlate_backward, args))
    assert all(set(r.values()) == {"SUCCESS"} for r in results), results


def _large_kernel_spec() -> GanSpec:
    """The tiny spec with 4x4x4 kernels (64 taps: the FFT form's threshold) on both sides."""
    raw = tiny_spec().model_dump()
    raw["generator"][0].update(kernel=(4, 4, 4))
    raw["discriminator"][0].update(kernel=(4, 4, 4), padding="same")
    return validate(GanSpec, raw)


def _one_step(convolution: str) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """Losses and gradients of both networks at initial weights whose convolution biases are
    0.01: with zero biases, the cells an empty window reaches sit exactly on the activation's
    kink in the direct form and within rounding of it in the FFT form, which changes the
    slope taken there and so the first bias gradients (both are valid subgradients)."""
    spec = _large_kernel_spec()
    generator, discriminator = build_models(spec, torch.Generator().manual_seed(0))
    with torch.no_grad():
        for conv in (m for n in (generator, discriminator) for m in n.modules()):
            if isinstance(conv, nn.Conv3d) and conv.bias is not None:
                conv.bias.fill_(0.01)
    options = ForwardOptions(convolution=convolution)
    step = GanStep(
        spec, generator, discriminator, torch.Generator().manual_seed(1), forward=options
    )
    ecal, energy, theta = (torch.from_numpy(a) for a in toy_showers(8, 0))
    losses = step.discriminator_grads(ecal, energy, theta)
    losses.update(step.generator_grads(8, energy, theta))
    grads = {
        name: torch.cat([p.grad.reshape(-1) for p in net.parameters()])
        for name, net in (("G", generator), ("D", discriminator))
    }
    return losses, grads


@pytest.mark.slow
def test_training_step_with_fft_convolutions_agrees_with_direct_ones() -> None:
    ref_losses, ref_grads = _one_step("direct")
    losses, grads = _one_step("fft")
    for key, value in ref_losses.items():
        assert abs(losses[key] - value) <= 1e-4 * max(abs(value), 1e-3), key
    # bound: only reordering float32 sums (channels-last) moves D's gradients by 8.8e-4 here
    for net, ref in ref_grads.items():
        difference = float((grads[net] - ref).norm() / ref.norm())
        assert 0 < difference < 1e-3, (net, difference)  # above 0: the FFT form really ran


def test_fft_on_a_cpu_runs_and_says_in_one_line_that_it_is_slower_there() -> None:
    settings = load_config(TINY, ["trainer.convolution=fft"]).trainer
    options, hints = forward_options(settings, "cpu", MPI.COMM_SELF)
    assert options == ForwardOptions(convolution="fft")
    (line,) = [text for text in hints if text.startswith("trainer.convolution = 'fft'")]
    assert "slower" in line and "\n" not in line


def test_unknown_convolution_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(TINY, ["trainer.convolution=winograd"])
    message = str(info.value)
    assert "trainer.convolution" in message and "fft" in message and "\n" not in message

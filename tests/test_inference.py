"""The generator's inference form (evogan.gan3d.model.inference) against the module it is built
from: every shipped spec's eval-mode output to float32 rounding, on the C kernel; bf16 on the
kernel as close to float32 as autocast; blocks set to the FFT form on the module's own layers;
the kernel's bits independent of the batch and the thread count; the form built once and
passed in makes what each call builds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from evogan.gan3d.kernels import set_convolution
from evogan.gan3d.kernels.small_conv import (
    Epilogue,
    bf16_runs,
    kernel,
    pack_weight,
    small_conv3d,
)
from evogan.gan3d.model.blocks import NoiseInjection
from evogan.gan3d.model.generate import generate_events, generate_numbered
from evogan.gan3d.model.inference import KernelBlock, inference_generator
from evogan.gan3d.model.networks import Generator, sample_events
from evogan.gan3d.model.spec import load_spec
from tests.gan_fixtures import REPO, one_thread

SPECS = sorted(p.name for p in (REPO / "configs").glob("gan3d*.yaml"))
# Largest |form - module| over the largest |module| cell: measured up to 2e-6 (51x51x25 spec)
TOLERANCE = 1e-5


def _trained_like(spec_file: str, seed: int = 0) -> tuple:
    """A generator of the spec whose batch norms and noise scales are not at their
    initial values (a trained generator's are not), in eval mode."""
    spec = load_spec(REPO / "configs" / spec_file)
    rng = torch.Generator().manual_seed(seed)
    generator = Generator(spec, rng)
    with torch.no_grad():
        for module in generator.modules():
            if isinstance(module, torch.nn.BatchNorm3d):
                module.running_mean.uniform_(-0.2, 0.2, generator=rng)
                module.running_var.uniform_(0.3, 3.0, generator=rng)
                module.weight.uniform_(0.5, 1.5, generator=rng)
                module.bias.uniform_(-0.2, 0.2, generator=rng)
            elif isinstance(module, NoiseInjection):
                module.scale.uniform_(0.1, 0.5, generator=rng)
    return spec, generator.eval()


def _outputs(spec, network, events: int = 2) -> torch.Tensor:
    """``network``'s output for numbered events (the same latent and per-cell noise for any
    network of the spec)."""
    energy = torch.linspace(20.0, 180.0, events)
    theta = torch.full((events,), 1.4) if spec.conditioning.angle else None
    with torch.inference_mode():
        return sample_events(spec, network, energy, theta, 5, torch.arange(events))


@pytest.mark.parametrize("spec_file", SPECS)
def test_the_form_equals_the_eval_module_on_every_shipped_spec(spec_file: str) -> None:
    spec, generator = _trained_like(spec_file)
    form = inference_generator(spec, generator)
    assert kernel() is not None and form.kernel_blocks == len(spec.generator)
    expected, got = _outputs(spec, generator), _outputs(spec, form)
    assert got.shape == expected.shape == (2, 1, *spec.output_shape)
    scale = expected.abs().max()
    assert scale > 0 and (got - expected).abs().max() <= TOLERANCE * scale
    assert not generator.training and all(p.requires_grad for p in generator.parameters())


@pytest.mark.skipif(not bf16_runs(), reason="this CPU or compiler has no AVX512-BF16")
@pytest.mark.parametrize("spec_file", SPECS)
def test_bf16_on_the_kernel_is_as_close_to_float32_as_autocast(spec_file: str) -> None:
    """bfloat16 inputs and weights with float32 sums: within 2% of the largest cell of the
    float32 module (measured up to 1.2%), and within 1.5x of autocast's own distance."""
    spec, generator = _trained_like(spec_file)
    form = inference_generator(spec, generator, "bf16")
    assert form.kernel_blocks == len(spec.generator)
    expected = _outputs(spec, generator)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, autocast = _outputs(spec, form), _outputs(spec, generator).float()
    scale = expected.abs().max()
    distance = (got - expected).abs().max()
    assert 0 < distance <= 2e-2 * scale
    assert distance <= 1.5 * (autocast - expected).abs().max()


def test_fft_blocks_run_the_modules_own_layers() -> None:
    spec, generator = _trained_like("gan3d_small.yaml")
    set_convolution(generator, "fft")  # the small spec's 27-tap kernels run as FFTs
    form = inference_generator(spec, generator)
    assert form.kernel_blocks == 1  # the 3x3x1 phase block stays on the kernel
    first = form.blocks[0]
    assert not isinstance(first, KernelBlock) and first.convolution == "fft"
    assert torch.equal(
        first(torch.ones(1, 4, 17, 17, 25)), generator.blocks[0](torch.ones(1, 4, 17, 17, 25))
    )


def test_a_cells_bits_do_not_depend_on_the_batch_its_row_or_the_threads() -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, 6, 9, 11, 13, generator=gen)
    weight = torch.randn(10, 6, 3, 4, 5, generator=gen)  # two groups of output channels
    bias = torch.randn(10, generator=gen)
    scale, shift = torch.rand(10, generator=gen) + 0.5, torch.randn(10, generator=gen)
    epilogue = Epilogue("leaky_relu", 0.3, scale, shift)
    pads = ((1, 2), (0, 1), (2, 2))

    def conv(batch: torch.Tensor) -> torch.Tensor:
        return small_conv3d(batch, pads, pack_weight(weight), (3, 4, 5), 10, bias, epilogue)

    with one_thread():
        whole = conv(x)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert torch.equal(conv(x), whole)
        assert torch.equal(conv(x[1:2])[0], whole[1])
        assert torch.equal(conv(x.flip(0))[2], whole[0])
    finally:
        torch.set_num_threads(threads)
    padded = F.pad(x, (2, 2, 0, 1, 1, 2))
    expected = F.leaky_relu(F.conv3d(padded, weight, bias), 0.3) * scale.view(1, -1, 1, 1, 1)
    expected = expected + shift.view(1, -1, 1, 1, 1)
    assert (whole - expected).abs().max() <= TOLERANCE * expected.abs().max()


def test_a_form_passed_in_makes_what_each_call_builds() -> None:
    spec, generator = _trained_like("gan3d_cc2_small.yaml")  # circular padding, noise block
    energy = np.linspace(10.0, 900.0, 5).astype(np.float32)
    form = inference_generator(spec, generator)
    assert inference_generator(spec, form) is form
    with one_thread():
        built = generate_numbered(spec, generator, energy, None, 4, batch_size=2)
        passed = generate_numbered(spec, form, energy, None, 4, batch_size=2)
        events = generate_events(spec, form, energy[:2], None, 4, np.arange(2))
    np.testing.assert_array_equal(built, passed)
    np.testing.assert_array_equal(events, built[:2])
    with pytest.raises(ValueError, match="built for float32 was asked to run in bf16"):
        generate_events(spec, form, energy, None, 4, np.arange(5), "bf16")


def test_a_batch_run_in_pieces_has_the_bits_of_the_whole_batch() -> None:
    """The form runs a large batch through its blocks a few showers at a time (a piece per
    thread here): no bit of the output changes, per-cell noise included."""
    spec, generator = _trained_like("gan3d_cc2_small.yaml")  # a noise block
    form = inference_generator(spec, generator)
    with one_thread():
        whole = _outputs(spec, form, events=5)
        form.shower_bytes = 1 << 40  # one shower per piece
        pieces = _outputs(spec, form, events=5)
    assert torch.equal(pieces, whole)
    assert all(m.events is None for m in form.modules() if isinstance(m, NoiseInjection))

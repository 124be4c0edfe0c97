"""The generator as generation runs it: an eval-mode copy in the fastest exact form.

A generator is trained once and run many times. Training needs it as a module of layers
(gradients, batch statistics, checkpoints); generation needs only its eval-mode function.
:func:`inference_generator` builds that function from a generator, leaving the generator as it
is:

- on a CPU, where the C kernel can be had (:mod:`evogan.gan3d.kernels.small_conv`), each block
  runs as one kernel call: its convolution (in the phase form where the block upsamples and
  that needs fewer taps: the upsampling fused into the convolution, the depth-to-space shuffle
  done by the stores), its activation and its eval-mode batch norm (a scale and shift per
  channel) applied as outputs are stored. In float32 equal to the module's eval forward to
  float32 rounding (``tests/test_inference.py``); in bf16 (CPUs with AVX512-BF16) with
  bfloat16 inputs and weights and float32 sums, where autocast rounds each layer's output to
  bfloat16 too. Each shower's convolution bits do not depend on the batch, its place in it or
  the thread count;
- otherwise (GPUs, bf16 without AVX512-BF16, blocks set to ``convolution: fft``, no C
  compiler) the blocks' own layers, bit for bit the module's eval forward.

The form is a copy (the generator's later training or mode changes do not reach it, and
a changed generator needs a new form); its per-cell noise layers are its own, found by
:func:`~evogan.gan3d.model.networks.sample` and
:func:`~evogan.gan3d.model.networks.sample_events` as in the generator.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from evogan.gan3d.kernels.convolution import ConvBlock, phase_plan, phase_weights
from evogan.gan3d.kernels.small_conv import (
    Epilogue,
    bf16_runs,
    kernel,
    pack_weight,
    small_conv3d,
)
from evogan.gan3d.model.blocks import NoiseInjection, SeededDropout
from evogan.gan3d.model.networks import Generator
from evogan.gan3d.model.spec import GanSpec, generator_layers

PIECE_BYTES = 32 << 20
"""Activation bytes (a block's input and output) of the showers a piece runs at once."""


def batch_norm_affine(norm: nn.BatchNorm3d) -> tuple[torch.Tensor, torch.Tensor]:
    """An eval-mode batch norm as ``x * scale + shift`` per channel (float32)."""
    scale = torch.rsqrt(norm.running_var.float() + norm.eps)
    shift = -norm.running_mean.float() * scale
    if norm.affine:
        scale = scale * norm.weight.float()
        shift = shift * norm.weight.float() + norm.bias.float()
    return scale.contiguous(), shift.contiguous()


def _epilogue(tail: list[nn.Module], phases: int) -> Epilogue | None:
    """The tail (activation, batch norm, dropout) as a kernel epilogue over ``phases`` copies
    of each channel, or None where a layer must run in torch (per-cell noise)."""
    activation, slope, scale, shift = None, 0.0, None, None
    for layer in tail:
        if isinstance(layer, nn.ReLU):
            activation = "relu"
        elif isinstance(layer, nn.LeakyReLU):
            activation, slope = "leaky_relu", float(layer.negative_slope)
        elif isinstance(layer, nn.BatchNorm3d):
            scale, shift = (t.repeat_interleave(phases) for t in batch_norm_affine(layer))
        elif not isinstance(layer, nn.Identity | SeededDropout):  # dropout: none in eval mode
            return None
    return Epilogue(activation, slope, scale, shift)


class KernelBlock(nn.Module):
    """A spec block on the C kernel: [upsample, circular padding] in torch, then the zero
    padding, convolution (phase form where the block's own form uses it), activation and
    batch norm in one call; blocks with per-cell noise run their tail in torch."""

    def __init__(self, block: ConvBlock, bf16: bool = False) -> None:
        super().__init__()
        self.bf16 = bf16
        conv: nn.Conv3d = block[block.head - 1]
        self.factors = block.factors if block.phase else (1, 1, 1)
        self.phases = math.prod(self.factors)
        self.kernel_size = tuple(conv.kernel_size)
        self.out_channels = conv.out_channels
        self.pads = block.pads
        self.prefix = nn.ModuleList(
            m
            for m in list(block)[: block.head - 1]
            if not isinstance(m, nn.ConstantPad3d)
            and not (block.phase and isinstance(m, nn.Upsample))
        )
        with torch.no_grad():
            weight = conv.weight.float()
            if block.phase:
                weight = phase_weights(weight, self.factors)
            self.taps = tuple(weight.shape[2:])
            self.packed = pack_weight(weight, bf16)
            bias = None if conv.bias is None else conv.bias.float()
            self.bias = None if bias is None else bias.repeat_interleave(self.phases).contiguous()
            epilogue = _epilogue(block.tail, self.phases)
        self.epilogue = epilogue or Epilogue()
        self.rest = nn.ModuleList([] if epilogue is not None else block.tail)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.prefix:
            x = layer(x)
        channels = self.out_channels * self.phases
        pads, phase = self.pads, None
        if self.phases > 1:
            grid = tuple(x.shape[2:])
            pads, offsets, lengths = phase_plan(grid, self.factors, self.kernel_size, self.pads)
            phase = (self.factors, offsets, lengths)
        x = small_conv3d(
            x, pads, self.packed, self.taps, channels, self.bias, self.epilogue, phase, self.bf16
        )
        for layer in self.rest:
            x = layer(x)
        return x


class InferenceGenerator(nn.Module):
    """An eval-mode copy of a :class:`Generator` whose blocks run in the fastest exact form for
    ``precision`` on its device (module docstring); ``forward`` as the generator's.

    Where every block runs on the kernel, a large batch runs through the blocks in pieces of
    about :data:`PIECE_BYTES` of activations (at least a shower per thread): whole batches of
    51x51x25 showers per layer took 1.5x the CPU time per shower at 128 showers as at 8
    (docs/history/benchmarks.md, "Generation near the CPU's limit"). The kernel's cells do not
    depend on the batch and numbered events draw their per-cell noise each for itself, so the
    pieces change no bit of the output; noise drawn from a stream keeps the batch whole."""

    def __init__(self, spec: GanSpec, generator: Generator, precision: str = "float32") -> None:
        super().__init__()
        source = copy.deepcopy(generator).eval().requires_grad_(False)
        self.precision = precision
        self.seed_shape = source.seed_shape
        self.dense = source.dense
        device = next(source.parameters()).device
        bf16 = precision == "bf16"
        native = device.type == "cpu" and kernel() is not None and (not bf16 or bf16_runs())
        self.blocks = nn.Sequential(
            *(KernelBlock(b, bf16) if native and _kernel_runs(b) else b for b in source.blocks)
        )
        layers = generator_layers(spec)[1:]
        self.shower_bytes = 4 * max(math.prod(a.in_shape) + math.prod(a.out_shape) for a in layers)
        self.eval()

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        x = self.dense(latent).view(-1, *self.seed_shape)
        piece = max(torch.get_num_threads(), PIECE_BYTES // self.shower_bytes)
        noise = [m for m in self.modules() if isinstance(m, NoiseInjection)]
        drawn = any(m.events is None for m in noise)  # from a stream, for the whole batch
        if len(x) <= piece or self.kernel_blocks < len(self.blocks) or drawn:
            return self.blocks(x)
        numbered = [m.events for m in noise]
        pieces = []
        try:
            for lo in range(0, len(x), piece):
                for layer, (keys, events) in zip(noise, numbered, strict=True):
                    layer.events = (keys, events[lo : lo + piece])
                pieces.append(self.blocks(x[lo : lo + piece]))
        finally:
            for layer, events in zip(noise, numbered, strict=True):
                layer.events = events
        return torch.cat(pieces)

    @property
    def kernel_blocks(self) -> int:
        """How many blocks run on the C kernel."""
        return sum(isinstance(b, KernelBlock) for b in self.blocks)


def _kernel_runs(block: ConvBlock) -> bool:
    """Whether the C kernel runs ``block``: not where it is set to the FFT form (a GPU setting
    that ``evogan generate --convolution fft`` may ask for on a CPU too)."""
    conv: nn.Conv3d = block[block.head - 1]
    return not (block.convolution == "fft" and math.prod(conv.kernel_size) >= block.fft_min_taps)


def inference_generator(
    spec: GanSpec, generator: Generator | InferenceGenerator, precision: str = "float32"
) -> InferenceGenerator:
    """``generator``'s inference form for ``precision`` (``generator`` itself where it is one
    already, for that precision)."""
    if isinstance(generator, InferenceGenerator):
        if generator.precision != precision:
            raise ValueError(
                f"an inference form built for {generator.precision} was asked to run in "
                f"{precision}; build one for {precision} with inference_generator()"
            )
        return generator
    if tuple(generator.seed_shape) != tuple(spec.dense_seed):
        raise ValueError(
            f"the generator's seed shape {tuple(generator.seed_shape)} is not spec "
            f"{spec.name!r}'s {tuple(spec.dense_seed)}; load the generator with its own spec"
        )
    return InferenceGenerator(spec, generator, precision)

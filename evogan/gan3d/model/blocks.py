"""Building blocks of the spec-built 3DGAN: Keras-exact padding, seeded dropout and noise,
initialisers.

Everything here is channels-first ``(N, C, X, Y, Z)``. Keras ``same`` padding with an even
kernel puts the extra cell after the data; that and ZeroPadding3D are folded into one explicit
``ConstantPad3d`` so PyTorch never decides where padding goes; a circular axis (a cylinder's
angle) is padded by a ``CircularPad3d`` instead, with wrapped cells. Dropout and noise draw from the
training step's stream; compiled, they hash a seed drawn from it instead (:class:`CountedDraws`),
so that each network stays one graph.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from evogan.gan3d.kernels import ConvBlock, keep_mask
from evogan.gan3d.model.spec import same_padding
from evogan.seeding import derive_seed

MASK32 = 0xFFFFFFFF


def _times(h: torch.Tensor, multiplier: int) -> torch.Tensor:
    """``h * multiplier`` mod 2**32 for int64 ``h`` below 2**32, in two 16-bit halves of the
    multiplier so that no product leaves int64 (whose overflow torch leaves undefined)."""
    low = h * (multiplier & 0xFFFF)
    high = ((h * (multiplier >> 16)) & 0xFFFF) << 16
    return (low + high) & MASK32


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """A bijective 32-bit integer hash (xor-shift-multiply with lowbias32's constants)."""
    h = _times(h ^ (h >> 16), 0x7FEB352D)
    h = _times(h ^ (h >> 15), 0x846CA68B)
    return h ^ (h >> 16)


def _mix_pair(key: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """A 32-bit hash of ``key`` and ``index`` (int64, below 2**32; they broadcast)."""
    return _mix32((_mix32(index) + key) & MASK32)


def _uniform(key: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Uniform floats in [0, 1) hashed from ``key`` and ``index``."""
    return (_mix_pair(key, index) >> 8).to(torch.float32) * 2.0**-24


def counter_uniform(key: torch.Tensor, shape: torch.Size, device: torch.device) -> torch.Tensor:
    """Uniform floats in [0, 1) of ``shape``, a pure function of ``key`` (a 32-bit int64
    scalar) and each element's index: integer arithmetic that torch.compile fuses into the
    kernel consuming it, where a draw from a ``torch.Generator`` breaks the compiled graph."""
    return _uniform(key, torch.arange(shape.numel(), device=device, dtype=torch.int64).view(shape))


def counter_normal(
    key: torch.Tensor, shape: torch.Size, device: torch.device, first_row: int = 0
) -> torch.Tensor:
    """Standard normal floats of ``shape`` (Box-Muller), a pure function of ``key``, each
    element's row (``first_row`` + its index along dim 0) and its index within the row: rows
    ``first_row..`` of one draw for a larger batch, as a data-parallel rank keeps its block."""
    rows = torch.arange(shape[0], device=device, dtype=torch.int64) + first_row
    row_keys = _mix_pair(key, rows).view(-1, *(1,) * (len(shape) - 1))
    cells = torch.arange(shape[1:].numel(), device=device, dtype=torch.int64).view(1, *shape[1:])
    radius = torch.sqrt(-2.0 * torch.log1p(-_uniform(row_keys, 2 * cells)))
    return radius * torch.cos(2.0 * math.pi * _uniform(row_keys, 2 * cells + 1))


def event_keys(seed: int, *purpose: int | str) -> tuple[int, int]:
    """Two 32-bit keys for the draws of numbered events under ``seed`` (:func:`event_uniform`),
    one pair per ``purpose`` (conditions, latent noise, each noise layer)."""
    derived = derive_seed(seed, "events", *purpose)
    return derived & MASK32, derived >> 32


def _event_key(key: int, events: torch.Tensor) -> torch.Tensor:
    """A 32-bit key per event number (int64 of any size): its two halves hashed in turn."""
    return _mix_pair(_mix_pair(key, events >> 32), events & MASK32)


def event_uniform(
    keys: tuple[int, int], events: torch.Tensor, columns: int, start: int = 0
) -> torch.Tensor:
    """Uniform floats in [0, 1) of shape (len(events), columns), columns ``start..`` of a row
    that is a pure function of ``keys`` and ``events[r]`` (int64 event numbers): an event's
    draws do not depend on the batch, rank or chunk it is made in. Two hash chains give each
    event 64 bits of key, so that no two events of a file share their draws (one 32-bit key
    would repeat within 10^5 events)."""
    first = _event_key(keys[0], events).view(-1, 1)
    second = _event_key(keys[1], events).view(-1, 1)
    column = torch.arange(start, start + columns, device=events.device, dtype=torch.int64)
    column = column.view(1, -1)
    return (_mix_pair(second, _mix_pair(first, column)) >> 8).to(torch.float32) * 2.0**-24


def event_normal(
    keys: tuple[int, int], events: torch.Tensor, shape: tuple[int, ...]
) -> torch.Tensor:
    """Standard normal floats (len(events), *shape) by Box-Muller from :func:`event_uniform`:
    row r a pure function of ``keys`` and ``events[r]``."""
    cells = math.prod(shape)
    radius = torch.sqrt(-2.0 * torch.log1p(-event_uniform(keys, events, cells)))
    angle = event_uniform(keys, events, cells, start=cells)
    return (radius * torch.cos(2.0 * math.pi * angle)).view(len(events), *shape)


def draw_key(generator: torch.Generator | None, device: torch.device | str = "cpu") -> torch.Tensor:
    """A 32-bit key (int64 tensor of one element) from ``generator`` (None: torch's stream)."""
    return torch.randint(0, MASK32 + 1, (1,), generator=generator, device=device)


class CountedDraws(nn.Module):
    """A module whose random draws can run compiled: each call takes a key hashed from a seed
    that :meth:`reseed` draws outside the graph and from the number of calls since.
    ``compiled`` (set by :func:`mark_compiled`) tells the owner of the stream to reseed."""

    compiled = False

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("counter", torch.zeros(2, dtype=torch.int64), persistent=False)

    def reseed(self, generator: torch.Generator | None) -> None:
        """Draw the seed from ``generator`` (None: torch's default stream); restart the count."""
        device = generator.device if generator is not None else self.counter.device
        key = draw_key(generator, device)
        self.counter = torch.cat([key.to(self.counter), self.counter.new_zeros(1)])

    def next_key(self) -> torch.Tensor:
        """This call's key; the count moves on."""
        seed, calls = self.counter
        # a new tensor, not an in-place count: a pending backward may hold the old one
        self.counter = torch.stack([seed, calls + 1])
        return _mix_pair(seed, calls)


def mark_compiled(module: nn.Module) -> None:
    """``module`` will run compiled: its :class:`CountedDraws` need a seed before each pass."""
    for draws in module.modules():
        if isinstance(draws, CountedDraws):
            draws.compiled = True


class SeededDropout(CountedDraws):
    """Dropout whose mask comes from a given ``torch.Generator`` (reproducible per rank).

    ``generator`` is set by whoever owns the random stream (the training step); without one
    the default torch stream is used, like ``nn.Dropout``. Compiled, the mask is
    :func:`counter_uniform` of :meth:`next_key`, seeded from ``generator`` by the step, so the
    forward stays one graph (other masks than eager's, from the same stream). Eager on the CPU
    it is the same hash of one key drawn from the stream per call, on all of torch's threads
    (:func:`evogan.gan3d.kernels.keep_mask`; a CPU generator draws on one thread); on a GPU
    the mask is drawn from the stream itself.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p
        self.generator: torch.Generator | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        gen = self.generator
        if gen is not None and torch.compiler.is_compiling():
            keep = counter_uniform(self.next_key(), x.shape, x.device) >= self.p
        else:
            device = gen.device if gen is not None else x.device
            if device.type == "cpu" and x.device.type == "cpu":
                keep = keep_mask(int(draw_key(gen)), x.shape, self.p)
            else:
                keep = torch.rand(x.shape, generator=gen, device=device) >= self.p
        return x * keep.to(x.device, x.dtype) / (1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class BatchNorm3d(nn.BatchNorm3d):
    """``nn.BatchNorm3d`` whose training-mode pass on a GPU is plain tensor arithmetic.

    With 1-16 channels of 10^5 cells each, cuDNN's batch norm kernels reduce each channel
    with a few thread blocks and took 44% of a 3DGAN step on an H100 (docs/history/benchmarks.md,
    "The 3DGAN's convolutions as phases and FFTs"); ``var_mean`` and elementwise kernels spread over
    the whole GPU. Same statistics, same running averages (biased variance to normalise, unbiased
    into ``running_var``), at least float32 statistics under bf16 autocast. Other devices
    (``devices``) and eval mode keep the library's kernels.
    """

    devices: tuple[str, ...] = ("cuda",)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and self.momentum is not None and x.device.type in self.devices):
            return super().forward(x)
        cells = x.to(torch.promote_types(x.dtype, torch.float32))
        var, mean = torch.var_mean(cells, dim=(0, 2, 3, 4), correction=0, keepdim=True)
        if self.track_running_stats:
            count = x.numel() // x.shape[1]
            with torch.no_grad():
                self.running_mean.lerp_(mean.flatten().to(self.running_mean), self.momentum)
                unbiased = var.flatten() * count / max(count - 1, 1)
                self.running_var.lerp_(unbiased.to(self.running_var), self.momentum)
                self.num_batches_tracked.add_(1)
        shape = (1, -1, 1, 1, 1)
        scale = torch.rsqrt(var + self.eps)
        if self.affine:
            scale = scale * self.weight.view(shape)
        y = (cells - mean) * scale
        return (y + self.bias.view(shape) if self.affine else y).to(x.dtype)


class NoiseInjection(CountedDraws):
    """Adds per-cell Gaussian noise times a learned per-channel scale (StyleGAN's noise inputs).

    A generator that maps one latent vector through convolutions makes smooth cell patterns;
    the scattered low-energy cells of a real shower's halo are random from cell to cell. The
    noise (one draw per cell, shared by the channels) gives the network that randomness, and
    the scale, which starts at 0, decides how much of it each channel uses. It is drawn in
    train and eval mode alike, from ``source``: (torch.Generator or None for torch's default
    stream, (index, count)), where a data-parallel rank ``index`` of ``count`` draws for the
    global batch and keeps its block, as :func:`evogan.gan3d.model.networks.make_latent` does.
    Compiled, the noise is :func:`counter_normal` of :meth:`next_key`, seeded from that stream
    by :func:`evogan.gan3d.model.networks.noise_source`. With ``events`` set (keys and the
    batch's int64 event numbers, :func:`evogan.gan3d.model.networks.sample_events`), each
    shower's noise is :func:`event_normal` of its event number instead.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.zeros(channels))
        self.source: tuple[torch.Generator | None, tuple[int, int]] = (None, (0, 1))
        self.events: tuple[tuple[int, int], torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, (index, count) = x.shape[0], self.source[1]
        shape = torch.Size((n, 1, *x.shape[2:]))
        if self.events is not None:
            keys, events = self.events
            noise = event_normal(keys, events.to(x.device), tuple(shape[1:])).to(x.dtype)
        elif torch.compiler.is_compiling():
            noise = counter_normal(self.next_key(), shape, x.device, index * n).to(x.dtype)
        else:
            gen = self.source[0]
            device = gen.device if gen is not None else x.device
            noise = torch.randn((n * count, *shape[1:]), generator=gen, device=device)
            noise = noise[index * n : (index + 1) * n].to(x.device, x.dtype)
        return x + self.scale.view(1, -1, 1, 1, 1) * noise


def activation(name: str, slope: float) -> nn.Module:
    """The activation a spec names (``leaky_relu`` uses the spec's slope, Keras default 0.3)."""
    if name == "relu":
        return nn.ReLU()
    if name == "leaky_relu":
        return nn.LeakyReLU(slope)
    return nn.Identity()


def conv_block(
    block,
    in_channels: int,
    *,
    slope: float,
    bn_eps: float,
    bn_momentum: float,
    rng: torch.Generator | None,
    circular: int | None = None,
) -> ConvBlock:
    """One spec block: [upsample] -> pad -> Conv3d -> [noise] -> activation -> [BN] -> [dropout];
    the padding of grid axis ``circular`` (if any) wraps around."""
    layers: list[nn.Module] = []
    upsample = tuple(getattr(block, "upsample", (1, 1, 1)))
    if upsample != (1, 1, 1):
        layers.append(nn.Upsample(scale_factor=tuple(float(u) for u in upsample), mode="nearest"))
    zeros, wraps = [], []  # F.pad order: last axis first -> (z_lo, z_hi, y_lo, y_hi, x_lo, x_hi)
    for axis in reversed(range(3)):
        lo, hi = same_padding(block.kernel[axis]) if block.padding == "same" else (0, 0)
        pad = [block.zero_pad[axis] + lo, block.zero_pad[axis] + hi]
        zeros += [0, 0] if axis == circular else pad
        wraps += pad if axis == circular else [0, 0]
    if any(wraps):
        layers.append(nn.CircularPad3d(tuple(wraps)))
    if any(zeros):
        layers.append(nn.ConstantPad3d(tuple(zeros), 0.0))
    conv = nn.Conv3d(in_channels, block.filters, tuple(block.kernel), bias=block.bias)
    initialise(conv, block.init, rng)
    layers.append(conv)
    if getattr(block, "noise", False):
        layers.append(NoiseInjection(block.filters))
    layers.append(activation(block.activation, slope))
    if block.batch_norm:
        layers.append(BatchNorm3d(block.filters, eps=bn_eps, momentum=bn_momentum))
    if getattr(block, "dropout", 0.0) > 0:
        layers.append(SeededDropout(block.dropout))
    return ConvBlock(*layers)


def initialise(layer: nn.Conv3d | nn.Linear, init: str, rng: torch.Generator | None) -> None:
    """Keras initialisers (weights) and zero biases, drawn from ``rng``."""
    weight = layer.weight
    with torch.no_grad():
        if init == "he_uniform":
            nn.init.kaiming_uniform_(weight, nonlinearity="relu", generator=rng)
        elif init == "glorot_normal":
            fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(weight)
            # Keras draws a normal truncated at 2 sigma and rescales its stddev accordingly.
            std = (2.0 / (fan_in + fan_out)) ** 0.5 / 0.87962566103423978
            nn.init.trunc_normal_(weight, 0.0, std, -2 * std, 2 * std, generator=rng)
        else:
            nn.init.xavier_uniform_(weight, generator=rng)
        if layer.bias is not None:
            layer.bias.zero_()

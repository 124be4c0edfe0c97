"""3DGAN generator and discriminator built from a :class:`~evogan.gan3d.model.spec.GanSpec`.

Layout is PyTorch channels-first: the generator returns ``(N, 1, X, Y, Z)`` in *network units*
(``(cell_scale * GeV) ** cell_power``) and the discriminator reads the same. The discriminator
returns a dict of heads: ``real_fake`` (a logit; the sigmoid lives in the loss for numerical
stability), ``energy`` (E / energy_scale regression), and the fixed, parameter-free
``ecal_sum`` and ``angle`` computed from the image after undoing the power transform, as in the
Keras originals (docs/explanation/physics.md section 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from evogan.errors import EvoganError
from evogan.gan3d.model.blocks import (
    NoiseInjection,
    SeededDropout,
    conv_block,
    event_keys,
    event_normal,
    initialise,
)
from evogan.gan3d.model.spec import GanSpec, flatten_features

# Measured angle given to showers without any energy (the original's sentinel value).
EMPTY_ANGLE = 100.0


class Generator(nn.Module):
    """Dense seed -> reshape (C, X, Y, Z) -> spec blocks -> one-channel shower."""

    def __init__(self, spec: GanSpec, rng: torch.Generator | None = None) -> None:
        super().__init__()
        self.seed_shape = tuple(spec.dense_seed)
        self.dense = nn.Linear(spec.latent_size, math.prod(self.seed_shape))
        initialise(self.dense, "glorot_uniform", rng)
        blocks, channels = [], self.seed_shape[0]
        for block in spec.generator:
            blocks.append(conv_block(block, channels, **_block_options(spec, rng)))
            channels = block.filters
        self.blocks = nn.Sequential(*blocks)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        x = self.dense(latent).view(-1, *self.seed_shape)
        return self.blocks(x)


@contextmanager
def noise_source(
    generator: nn.Module, rng: torch.Generator | None, shard: tuple[int, int] = (0, 1)
) -> Iterator[None]:
    """Within the block, the generator's per-cell noise (blocks with ``noise: true``) is drawn
    from ``rng``, sharded as :func:`make_latent` shards the latent noise (compiled: from a seed
    drawn here); restored after."""
    layers = [m for m in generator.modules() if isinstance(m, NoiseInjection)]
    before = [m.source for m in layers]
    for m in layers:
        m.source = (rng, shard)
        if m.compiled:
            m.reseed(rng)
    try:
        yield
    finally:
        for m, source in zip(layers, before, strict=True):
            m.source = source


class Discriminator(nn.Module):
    """Spec blocks -> pooling -> flatten -> real/fake and energy heads, plus fixed heads."""

    def __init__(self, spec: GanSpec, rng: torch.Generator | None = None) -> None:
        super().__init__()
        blocks, channels = [], 1
        for block in spec.discriminator:
            blocks.append(conv_block(block, channels, **_block_options(spec, rng)))
            channels = block.filters
        pool = nn.AvgPool3d if spec.pooling.kind == "avg" else nn.MaxPool3d
        self.features = nn.Sequential(*blocks, pool(tuple(spec.pooling.size)), nn.Flatten())
        features = flatten_features(spec)
        self.real_fake = nn.Linear(features, 1)
        initialise(self.real_fake, "glorot_uniform", rng)
        self.projection = nn.Linear(features, 2, bias=False) if spec.heads.conditional else None
        if self.projection is not None:
            initialise(self.projection, "glorot_uniform", rng)
        self.energy = nn.Linear(features, 1) if spec.heads.energy else None
        if self.energy is not None:
            initialise(self.energy, "glorot_uniform", rng)
        self.with_ecal_sum = spec.heads.ecal_sum
        self.with_angle = spec.heads.angle
        self.cell_power = spec.cell_power

    def forward(
        self, image: torch.Tensor, energy: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Head outputs of ``image``; ``energy`` (E/energy_scale, one per shower) is needed by a
        conditional real/fake head and ignored otherwise."""
        h = self.features(image)
        out = {"real_fake": self.real_fake(h).squeeze(1)}
        if self.projection is not None:
            if energy is None:
                raise ValueError("a conditional discriminator needs the energy of each shower")
            basis = torch.stack([energy, energy.clamp_min(1e-6).log()], dim=1)
            out["real_fake"] = out["real_fake"] + (basis * self.projection(h)).sum(dim=1)
        if self.energy is not None:
            out["energy"] = self.energy(h).squeeze(1)
        if self.with_ecal_sum or self.with_angle:
            cells = image[:, 0].clamp_min(0.0)
            if self.cell_power is not None:
                cells = cells ** (1.0 / self.cell_power)
            if self.with_ecal_sum:
                out["ecal_sum"] = cells.sum(dim=(1, 2, 3))
            if self.with_angle:
                out["angle"] = measured_angle(cells)
        return out

    def set_dropout_generator(self, rng: torch.Generator | None) -> None:
        """Draw every dropout mask from ``rng`` (the training step's stream)."""
        for module in self.modules():
            if isinstance(module, SeededDropout):
                module.generator = rng

    def reseed_dropout(self) -> None:
        """Start compiled dropout masks of a new pass from the step's stream (eager masks are
        drawn from it directly: nothing to do)."""
        for module in self.modules():
            seeded = isinstance(module, SeededDropout) and module.generator is not None
            if seeded and module.compiled:
                module.reseed(module.generator)


def to_network(spec: GanSpec, ecal_gev: torch.Tensor) -> torch.Tensor:
    """Cells in GeV ``(N, X, Y, Z)`` -> network input ``(N, 1, X, Y, Z)``."""
    cells = ecal_gev.clamp_min(0.0) * spec.cell_scale
    if spec.cell_power is not None:
        cells = cells**spec.cell_power
    return cells.unsqueeze(1)


def to_gev(spec: GanSpec, image: torch.Tensor) -> torch.Tensor:
    """Network output ``(N, 1, X, Y, Z)`` -> cells in GeV ``(N, X, Y, Z)``."""
    cells = image[:, 0].clamp_min(0.0)
    if spec.cell_power is not None:
        cells = cells ** (1.0 / spec.cell_power)
    return cells / spec.cell_scale


def make_latent(
    spec: GanSpec,
    energy: torch.Tensor,
    theta: torch.Tensor | None,
    rng: torch.Generator,
    shard: tuple[int, int] = (0, 1),
) -> torch.Tensor:
    """Latent vectors for primary energies (GeV) and angles (rad), noise drawn from ``rng``.

    ``shard = (index, count)``: noise is drawn for ``count`` times the batch and block ``index``
    is used (data-parallel ranks sharing one seed draw one global batch between them).
    """
    n = energy.shape[0]
    noise = torch.randn(n * shard[1], spec.noise_size, generator=rng, device=rng.device)
    noise = noise[shard[0] * n : (shard[0] + 1) * n].to(energy.device)
    return latent_vector(spec, noise, energy, theta)


def latent_vector(
    spec: GanSpec, noise: torch.Tensor, energy: torch.Tensor, theta: torch.Tensor | None
) -> torch.Tensor:
    """The generator's input from normal draws ``noise`` (N, noise_size), primary energies
    (GeV) and angles (rad): the one place the spec's conditioning is applied (training,
    generation and exported graphs alike)."""
    n = noise.shape[0]
    scaled = (energy / spec.conditioning.energy_scale).reshape(n, 1).to(noise.dtype)
    if spec.conditioning.mode == "multiply":
        return noise * scaled
    slots = [scaled, scaled.log()] if spec.conditioning.log_energy else [scaled]
    if spec.conditioning.angle:
        if theta is None:
            raise missing_theta(spec)
        slots.append(theta.reshape(n, 1).to(noise.dtype))
    return torch.cat([*slots, noise], dim=1)


def sample(
    spec: GanSpec,
    generator: nn.Module,
    energy: torch.Tensor,
    theta: torch.Tensor | None,
    rng: torch.Generator,
    shard: tuple[int, int] = (0, 1),
) -> torch.Tensor:
    """The generator's output (network units) for primaries (GeV) and angles (rad): the latent
    noise, then any per-cell noise, both drawn from ``rng`` and sharded as :func:`make_latent`
    shards."""
    latent = make_latent(spec, energy, theta, rng, shard)
    with noise_source(generator, rng, shard):
        return generator(latent)


def sample_events(
    spec: GanSpec,
    generator: nn.Module,
    energy: torch.Tensor,
    theta: torch.Tensor | None,
    seed: int,
    events: torch.Tensor,
) -> torch.Tensor:
    """The generator's output (network units) for the events numbered ``events`` (int64, on
    the CPU): each one's latent and per-cell noise a pure function of ``seed`` and its number
    (:func:`~evogan.gan3d.model.blocks.event_normal`), so an event draws the same noise alone
    or in any batch, on any rank. The latent noise is drawn on the CPU (the same on every
    device), the per-cell noise where the network runs."""
    noise = event_normal(event_keys(seed, "latent"), events, (spec.noise_size,))
    latent = latent_vector(spec, noise.to(energy.device), energy, theta)
    layers = [m for m in generator.modules() if isinstance(m, NoiseInjection)]
    for number, layer in enumerate(layers):
        layer.events = (event_keys(seed, "noise", number), events)
    try:
        return generator(latent)
    finally:
        for layer in layers:
            layer.events = None


def missing_theta(spec: GanSpec) -> EvoganError:
    """The error for angle-conditioned specs given showers without an angle."""
    return EvoganError(
        f"spec {spec.name!r} is conditioned on the angle but no theta was given; use "
        "angle-carrying files (layouts b/c) or a spec with conditioning.angle: false"
    )


def build_models(
    spec: GanSpec, rng: torch.Generator | None = None
) -> tuple[Generator, Discriminator]:
    """Both networks, initialised from ``rng`` (generator first, then discriminator)."""
    return Generator(spec, rng), Discriminator(spec, rng)


def parameter_count(module: nn.Module, trainable_only: bool = True) -> int:
    """Parameters (trainable only by default; BN running statistics are buffers, not counted)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def keras_parameter_count(module: nn.Module) -> int:
    """Parameters as Keras ``summary()`` counts them: BN moving mean and variance included."""
    extra = sum(
        m.running_mean.numel() + m.running_var.numel()
        for m in module.modules()
        if isinstance(m, nn.BatchNorm3d)
    )
    return parameter_count(module, trainable_only=False) + extra


def measured_angle(cells: torch.Tensor) -> torch.Tensor:
    """Polar angle (rad) of each shower's axis in the y-z plane, from layer barycentres.

    For every depth layer with energy, the slope of (y_mid - y_ref) against the distance from
    the overall barycentre in the x-z plane gives an angle pi/2 - atan(slope); layers are
    averaged with weights z (deeper layers are better measured). Empty showers get
    :data:`EMPTY_ANGLE`. Differentiable, so it serves as the discriminator's fixed angle head.
    """
    _, nx, ny, nz = cells.shape
    dtype, device = cells.dtype, cells.device
    xs = torch.arange(nx, dtype=dtype, device=device) + 0.5
    ys = torch.arange(ny, dtype=dtype, device=device) + 0.5
    zs = torch.arange(nz, dtype=dtype, device=device) + 0.5
    xz = cells.sum(dim=2)  # (N, X, Z): the two projections hold every sum needed
    yz = cells.sum(dim=1)  # (N, Y, Z)
    layer = xz.sum(dim=1)  # (N, Z)
    total = layer.sum(dim=1)
    empty = total == 0
    safe_total = torch.where(empty, torch.ones_like(total), total)
    x_ref = (xz.sum(dim=2) * xs).sum(1) / safe_total
    y_ref = (yz.sum(dim=2) * ys).sum(1) / safe_total
    z_ref = (layer * zs).sum(1) / safe_total
    has = layer != 0
    safe_layer = torch.where(has, layer, torch.ones_like(layer))
    x_mid = torch.where(has, (xz * xs[:, None]).sum(1) / safe_layer, 0.0)
    y_mid = torch.where(has, (yz * ys[:, None]).sum(1) / safe_layer, 0.0)
    dz = zs[None, :] - z_ref[:, None]
    zproj = torch.sqrt(torch.clamp((x_mid - x_ref[:, None]) ** 2 + dz**2, min=1e-7))
    slope = (y_mid - y_ref[:, None]) / zproj
    slope = torch.where(dz < 0, -slope, slope)
    angle = (math.pi / 2.0) - torch.atan(slope)
    weights = zs[None, :] * has.to(dtype)
    denominator = weights.sum(1)
    safe_den = torch.where(denominator > 0, denominator, torch.ones_like(denominator))
    mean = (angle * weights).sum(1) / safe_den
    return torch.where(empty | (denominator == 0), torch.full_like(mean, EMPTY_ANGLE), mean)


def _block_options(spec: GanSpec, rng: torch.Generator | None) -> dict:
    return {
        "slope": spec.leaky_slope,
        "bn_eps": spec.batch_norm_eps,
        "bn_momentum": spec.batch_norm_momentum,
        "rng": rng,
        "circular": spec.circular_axis,
    }

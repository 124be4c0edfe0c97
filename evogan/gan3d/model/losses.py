"""3DGAN losses as in the Keras originals: BCE with label flips, MAPE, MAE, weighted sum.

MAPE is in percent (Keras ``mean_absolute_percentage_error``) because the published loss
weights [3, 0.1, 25, 0.1] were tuned against that scale.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from evogan.gan3d.model.spec import LossWeights
from evogan.physics.features import HIT_THRESHOLD, VOXEL_HIT_THRESHOLD

_EPS = 1e-7  # Keras K.epsilon(): floor of |target| in MAPE
HIT_SOFTNESS = 0.5  # ln units: a cell a factor e below / above the threshold counts 0.12 / 0.88


def flipped_labels(
    value: float,
    n: int,
    flip: float,
    rng: torch.Generator,
    device: torch.device | str,
    shard: tuple[int, int] = (0, 1),
) -> torch.Tensor:
    """``n`` labels equal to ``value`` with each flipped (1 - value) with probability ``flip``.

    ``shard = (index, count)``: draw for ``count * n`` samples and keep block ``index``, so the
    data-parallel ranks together draw exactly what one process with the whole batch draws.
    """
    labels = torch.full((n,), float(value))
    if flip > 0:
        draws = torch.rand(n * shard[1], generator=rng, device=rng.device)
        flips = draws[shard[0] * n : (shard[0] + 1) * n].cpu() < flip
        labels = torch.where(flips, 1.0 - labels, labels)
    return labels.to(device)


def bce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of a sigmoid output, computed from its logit."""
    return F.binary_cross_entropy_with_logits(logits, labels)


def mape(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean absolute percentage error, in percent."""
    return 100.0 * ((prediction - target).abs() / target.abs().clamp_min(_EPS)).mean()


def mae(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean absolute error."""
    return (prediction - target).abs().mean()


def transverse_width(cells: torch.Tensor, cylindrical: bool = False) -> torch.Tensor:
    """Per shower, the mean of the x and y energy-weighted standard deviations, in cells.

    ``cells`` are non-negative energies ``(N, X, Y, Z)``; differentiable, and the same
    quantity as the validation's ``width_x_mm``/``width_y_mm`` (:mod:`evogan.physics.features`)
    divided by the cell size. A cylindrical grid ``(N, radial, angular, Z)`` places its cells
    at x = r cos(alpha), y = r sin(alpha), r in radial bins (equal bins, as in CaloChallenge
    datasets 2 and 3), as the validation's per-layer widths do. An empty shower has width 0.
    """
    total = cells.sum(dim=(1, 2, 3)).clamp_min(1e-12)
    if cylindrical:
        plane = cells.sum(dim=3)  # (N, radial, angular)
        radial, angular = cells.shape[1:3]
        r = torch.arange(radial, dtype=cells.dtype, device=cells.device)[:, None] + 0.5
        step = 2 * math.pi / angular
        alpha = torch.arange(angular, dtype=cells.dtype, device=cells.device) * step
        alpha = alpha[None, :] + (0.5 * step - math.pi)
        profiles = [(plane, r * torch.cos(alpha), (1, 2)), (plane, r * torch.sin(alpha), (1, 2))]
    else:
        profiles = []
        for axis, summed in ((1, (2, 3)), (2, (1, 3))):
            size = cells.shape[axis]
            position = torch.arange(size, dtype=cells.dtype, device=cells.device)
            profiles.append((cells.sum(dim=summed), position - 0.5 * (size - 1), 1))
    widths = []
    for profile, position, dims in profiles:
        mean = (profile * position).sum(dim=dims) / total
        second = (profile * position**2).sum(dim=dims) / total
        widths.append((second - mean**2).clamp_min(1e-12).sqrt())
    return 0.5 * (widths[0] + widths[1])


def soft_hit_count(cells: torch.Tensor, threshold: float = HIT_THRESHOLD) -> torch.Tensor:
    """Per shower, a differentiable count of cells above ``threshold`` (GeV), the validation's
    hit threshold of the detector.

    Each cell counts ``sigmoid(ln(E / threshold) / HIT_SOFTNESS)``: a cell just below the
    threshold has a gradient towards it, which the hard count does not. Empty cells count 0
    and pass no gradient. ``cells`` are non-negative energies in GeV ``(N, X, Y, Z)``.
    """
    log_ratio = cells.clamp_min(1e-12).log() - math.log(threshold)
    return torch.sigmoid(log_ratio / HIT_SOFTNESS).sum(dim=(1, 2, 3))


BATCH_TERMS = ("width", "hits", "sampling_fraction")


def batch_features(
    cells: torch.Tensor, energy: torch.Tensor, names: tuple[str, ...], cylindrical: bool = False
) -> dict[str, torch.Tensor]:
    """Per shower, the quantities named (of :data:`BATCH_TERMS`) that the generator's batch
    terms match: transverse width in cells, soft hit count, ECAL sum / primary energy.
    ``cells`` are non-negative energies in GeV ``(N, X, Y, Z)`` (``cylindrical``: radial,
    angular, layer), ``energy`` in GeV ``(N,)``. Hits count above the threshold the features
    count a cylinder's voxels or a Cartesian grid's cells at."""
    threshold = VOXEL_HIT_THRESHOLD if cylindrical else HIT_THRESHOLD
    measures = {
        "width": lambda: transverse_width(cells, cylindrical),
        "hits": lambda: soft_hit_count(cells, threshold),
        "sampling_fraction": lambda: cells.sum(dim=(1, 2, 3)) / energy,
    }
    return {name: measures[name]() for name in names}


def batch_mean_gap(fake: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Percentage difference of the batch means of a per-shower quantity of generated showers
    and of the real showers they are paired with (same energies).

    A per-shower target (as the ECAL-sum head's MAPE) compares each generated shower with an
    independent real one: when the offset is smaller than the shower-to-shower spread, about
    as many showers are pushed up as down and the net pull is weak, and what pull there is
    shrinks the spread. A batch mean is off only by the batch's noise, so this pulls at full
    strength and leaves the spread free."""
    return 100.0 * (fake.mean() - real.mean()).abs() / real.mean().clamp_min(_EPS)


def gan_loss(
    outputs: dict[str, torch.Tensor],
    labels: torch.Tensor,
    targets: dict[str, torch.Tensor],
    weights: LossWeights,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Weighted sum over the heads the discriminator has; also returns each term unweighted.

    Outputs are cast to float32 first: under bf16 autocast the heads come out in bf16, and the
    loss terms (a MAPE in percent, a BCE near its minimum) need float32's resolution."""
    outputs = {name: value.float() for name, value in outputs.items()}
    parts = {"real_fake": bce(outputs["real_fake"], labels)}
    if "energy" in outputs:
        parts["energy"] = mape(outputs["energy"], targets["energy"])
    if "ecal_sum" in outputs:
        parts["ecal_sum"] = mape(outputs["ecal_sum"], targets["ecal_sum"])
    if "angle" in outputs:
        parts["angle"] = mae(outputs["angle"], targets["angle"])
    total = sum(getattr(weights, name) * value for name, value in parts.items())
    return total, parts

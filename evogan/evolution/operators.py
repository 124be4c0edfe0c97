"""Mutation operators on weight genomes (rows of one float tensor), vectorised over children.

Exactly ``max(1, round(rate * size))`` weights of every child change, so a low rate late in a
run still moves every child (a Bernoulli mask would leave many children identical to the
parent and waste their evaluations).
"""

from __future__ import annotations

import torch
from torch import Tensor


def mutated_count(size: int, rate: float) -> int:
    """How many of ``size`` weights a child changes at mutation rate ``rate``."""
    if not 0 < rate <= 1:
        raise ValueError(f"mutation rate must be in (0, 1], got {rate}")
    return min(size, max(1, round(rate * size)))


def mutation_mask(
    count: int,
    size: int,
    rate: float,
    generator: torch.Generator,
    device: torch.device | None = None,
) -> Tensor:
    """Boolean (count, size) mask, :func:`mutated_count` True entries per row, uniformly placed."""
    chosen = (
        torch.rand(count, size, generator=generator, device=device)
        .topk(mutated_count(size, rate), dim=1)
        .indices
    )
    mask = torch.zeros(count, size, dtype=torch.bool, device=device)
    return mask.scatter_(1, chosen, True)


def point_mutation(
    parent: Tensor, count: int, rate: float, power: float, generator: torch.Generator
) -> Tensor:
    """Children of ``parent``: the chosen weights get ``power * U(-1, 1)`` added."""
    mask = mutation_mask(count, parent.numel(), rate, generator, parent.device)
    noise = torch.rand(count, parent.numel(), generator=generator, device=parent.device)
    delta = noise.mul_(2).sub_(1).mul_(power)
    return parent.reshape(1, -1) + delta.mul_(mask)


def replace_mutation(
    parent: Tensor, count: int, rate: float, sigma: float, generator: torch.Generator
) -> Tensor:
    """Children of ``parent``: the chosen weights are redrawn from N(0, sigma^2) (original code)."""
    mask = mutation_mask(count, parent.numel(), rate, generator, parent.device)
    fresh = torch.randn(count, parent.numel(), generator=generator, device=parent.device) * sigma
    return torch.where(mask, fresh, parent.reshape(1, -1).expand(count, -1))

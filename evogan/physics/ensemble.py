"""Ensembles of 3DGAN generators: mean prediction and uncertainty (SAGIPS, equations 7-8).

For K generators G_k fed the *same* noise and conditions, the ensemble prediction of an
observable O is its mean over members and the uncertainty its standard deviation over
members::

    O_mean = 1/K sum_k O(G_k(z))                                   (7)
    O_std  = sqrt(1/K sum_k (O(G_k(z)) - O_mean)^2)                (8)

Observables here are the validation observables of :mod:`evogan.physics.validation`
(already averaged over the batch of noise vectors, as SAGIPS reports them). The ensemble score
is the mean and spread of the members' validation scores, plus the score of the ensemble-mean
observables.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from evogan.config.gan import GanSpec
from evogan.errors import EvoganError
from evogan.models.gan3d import Generator
from evogan.physics.validation import ShowerStats, generate_showers, shower_stats, validation_score


def ensemble_moments(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Equations 7-8 over the first axis (members): mean and population standard deviation.

    NaN entries (an observable undefined for one member, e.g. moments of empty showers) are
    left out of that entry's mean and spread.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim < 1 or values.shape[0] < 1:
        raise ValueError(f"values need a leading member axis of length >= 1, got {values.shape}")
    with warnings.catch_warnings():  # an all-NaN entry stays NaN without a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=0)
        std = np.sqrt(np.nanmean((values - mean) ** 2, axis=0))
    return mean, std


@dataclass(frozen=True)
class EnsembleResult:
    """Per-member statistics and scores, the ensemble mean/std of every observable."""

    members: list[ShowerStats]
    scores: list[dict[str, float]]
    mean: ShowerStats
    std: dict[str, np.ndarray]
    mean_score: dict[str, float]  # score of the ensemble-mean observables

    @property
    def score_mean(self) -> float:
        return float(np.mean([s["score"] for s in self.scores]))

    @property
    def score_std(self) -> float:
        return float(np.std([s["score"] for s in self.scores]))

    def to_json(self) -> dict:
        return {
            "members": len(self.members),
            "member_scores": self.scores,
            "score_mean": self.score_mean,
            "score_std": self.score_std,
            "ensemble_mean_score": self.mean_score,
            "observables_mean": self.mean.to_json(),
            "observables_std": {name: value.tolist() for name, value in self.std.items()},
        }


def combine(members: Sequence[ShowerStats], reference: ShowerStats) -> EnsembleResult:
    """Ensemble statistics of members' observables (same energy bins) and their scores."""
    if not members:
        raise ValueError("an ensemble needs at least one member")
    names = list(members[0].values)
    mean_values, std_values = {}, {}
    for name in names:
        mean_values[name], std_values[name] = ensemble_moments(
            np.stack([m.values[name] for m in members])
        )
    first = members[0]
    mean = ShowerStats(first.energy_edges, mean_values, first.counts, first.events)
    scores = [validation_score(reference, m) for m in members]
    mean_score = validation_score(reference, mean)
    return EnsembleResult(list(members), scores, mean, std_values, mean_score)


def ensemble_validation(
    models: Sequence[tuple[GanSpec, Generator]],
    reference: ShowerStats,
    energy: np.ndarray,
    theta: np.ndarray | None,
    seed: int,
    batch_size: int = 128,
) -> EnsembleResult:
    """Run every generator on the same noise (a fresh stream from ``seed`` per member) and
    conditions, and combine their observables against ``reference``."""
    check_compatible([spec for spec, _ in models])
    stats = []
    for spec, generator in models:
        rng = torch.Generator().manual_seed(seed)
        showers = generate_showers(spec, generator, energy, theta, rng, batch_size)
        stats.append(shower_stats(showers, energy, reference.energy_edges))
    return combine(stats, reference)


def check_compatible(specs: Sequence[GanSpec]) -> None:
    """Members must read the same latent (size, conditioning) and make the same shape."""
    first = specs[0]
    key = (first.latent_size, first.conditioning, tuple(first.output_shape))
    for index, spec in enumerate(specs[1:], start=2):
        other = (spec.latent_size, spec.conditioning, tuple(spec.output_shape))
        if other != key:
            raise EvoganError(
                f"ensemble member {index} ({spec.name}) must share latent size, conditioning and "
                f"output shape with member 1 ({first.name}) to see the same noise; got "
                f"{other[0]}/{other[2]} vs {key[0]}/{key[2]}"
            )

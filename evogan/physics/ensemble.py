"""Ensembles of scored shower sets: selection score, mean prediction and uncertainty.

The selection quantity of an ensemble of K members is the mean of the members' selection
scores plus ``beta`` times their spread (population std), never the score of the averaged
observables: averaging would let a member with too little energy and one with too much cancel
into a perfect-looking mean. A member whose showers are all empty scores
:data:`evogan.physics.WORST_SCORE`, like any other worst-class set (so does a generator that
fails to run: :func:`evogan.gan3d.model.generate.score_generator`).

For the figures and JSON, the ensemble prediction of an observable O and its uncertainty follow
SAGIPS equations 7-8, over members fed the *same* noise and conditions::

    O_mean = 1/K sum_k O(G_k(z))                                   (7)
    O_std  = sqrt(1/K sum_k (O(G_k(z)) - O_mean)^2)                (8)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evogan.physics.features import PROFILES, FeatureTable
from evogan.physics.score import Validation, energy_bin

BETA = 1.0
"""Default weight of the members' spread: an ensemble is ranked by a one-sigma upper score."""
OBSERVABLES = ("energy_ratio", "centre_z_x0", "width_z_x0", "width_x_mm", "hits")


def ensemble_moments(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Equations 7-8 over the first axis (members): mean and population standard deviation.

    NaN entries (an observable undefined for one member) are left out of that entry's mean
    and spread."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim < 1 or values.shape[0] < 1:
        raise ValueError(f"values need a leading member axis of length >= 1, got {values.shape}")
    with warnings.catch_warnings():  # an all-NaN entry stays NaN without a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=0)
        std = np.sqrt(np.nanmean((values - mean) ** 2, axis=0))
    return mean, std


def observables(table: FeatureTable | None, edges: np.ndarray) -> dict[str, np.ndarray]:
    """Per-set observables drawn for an ensemble, each with its standard error (``_error``):
    unit-area mean profiles and the mean of some scalars per energy bin (NaN where the set
    has no good showers to average)."""
    bins = edges.size - 1
    good = None if table is None else table.subset(~table.bad)
    out: dict[str, np.ndarray] = {}
    for axis in PROFILES if table is None else table.profiles:
        key = f"profile_{axis}"
        size = 1 if table is None else table.profiles[axis].shape[1]
        out[key] = out[f"{key}_error"] = np.full(size, np.nan)
        if good is not None and len(good) > 1:
            rows = good.profiles[axis]
            area = rows.mean(axis=0).sum()
            out[key] = rows.mean(axis=0) / area
            out[f"{key}_error"] = rows.std(axis=0, ddof=1) / np.sqrt(len(rows)) / area
    for name in OBSERVABLES:
        mean, error = np.full(bins, np.nan), np.full(bins, np.nan)
        if good is not None and name in good.scalars:
            index = energy_bin(good.energy, edges)
            for b in range(bins):
                values = good.scalars[name][index == b]
                if len(values) > 1:
                    mean[b], error[b] = values.mean(), values.std(ddof=1) / np.sqrt(len(values))
        out[name], out[f"{name}_error"] = mean, error
    return out


@dataclass(frozen=True)
class EnsembleResult:
    """Every member's validation, the selection quantity and the SAGIPS observables."""

    members: list[Validation]
    beta: float
    mean: dict[str, np.ndarray]
    std: dict[str, np.ndarray]

    @property
    def scores(self) -> np.ndarray:
        return np.array([m.score for m in self.members])

    @property
    def score(self) -> float:
        """mean(member scores) + beta x std(member scores): the ensemble's selection quantity."""
        return float(self.scores.mean() + self.beta * self.scores.std())

    def to_json(self) -> dict:
        return {
            "members": len(self.members),
            "member_scores": self.scores.tolist(),
            "score_mean": float(self.scores.mean()),
            "score_std": float(self.scores.std()),
            "beta": self.beta,
            "score": self.score,
            "observables_mean": {k: v.tolist() for k, v in self.mean.items()},
            "observables_std": {k: v.tolist() for k, v in self.std.items()},
        }


def combine(members: Sequence[Validation], edges: np.ndarray, beta: float = BETA) -> EnsembleResult:
    """Ensemble of scored members (same energy bins): selection quantity and eqs. 7-8."""
    if not members:
        raise ValueError("an ensemble needs at least one member")
    per_member = [observables(m.table, edges) for m in members]
    mean, std = {}, {}
    names = dict.fromkeys(name for p in per_member for name in p)  # a failed member: CLIC's
    for name in names:
        width = max(len(p.get(name, ())) for p in per_member)
        stacked = np.full((len(per_member), width), np.nan)
        for k, p in enumerate(per_member):
            stacked[k, : len(p.get(name, ()))] = p.get(name, ())
        mean[name], std[name] = ensemble_moments(stacked)
    return EnsembleResult(list(members), beta, mean, std)

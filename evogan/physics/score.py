"""The selection score: the one number model selection and architecture search minimise.

Defined once, here (rationale in docs/validation.md). For generated showers G against the
reference R, with the good events of G (neither empty nor non-finite) compared on the
high-level features of :mod:`evogan.physics.features`:

    base  = S_sep + S_auc + ln(1 + max(FPD, 0))
    score = min((1 - f_bad) * base + f_bad * WORST, WORST)

- S_sep: mean over feature groups (each scalar; the x, y and z profiles; the cell spectrum) of
  the triangular separation power averaged over energy bins, in [0, 1];
- S_auc = max(0, 2 AUC - 1) of the classifier two-sample test, in [0, 1];
- FPD on the standardised features: unbounded, so a too-high energy is penalised as steeply
  as a too-low one (no cap at "completely different" that a near-empty generator could hide
  under); ln(1 + FPD) keeps it on the scale of the two bounded terms;
- f_bad: the fraction of empty or non-finite showers, each scored ``WORST`` (also the score of
  a failed or all-empty generator), so the score is finite and worst-class for them.

Standardising with the reference and binning at the reference's quantiles make every term
independent of where the cell window starts. KPD and the historic SF term are reported, not
scored (KPD duplicates FPD's information with a heavier noise tail at small N).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from evogan.errors import DataError
from evogan.physics.classifier import classifier_auc
from evogan.physics.features import PROFILES, FeatureTable, shower_features
from evogan.physics.frechet import fpd
from evogan.physics.kernel import kpd
from evogan.physics.sampling import sf_error
from evogan.physics.separation import histogram_separation, reference_edges, separation_powers

WORST = 100.0
FLOOR_SPLITS = 6
FLOOR_MIN_EVENTS = 8
"""The floor compares two halves of the reference, each of at least 4 showers."""


def require_floor_events(events: int) -> None:
    """A reference of ``events`` showers has a floor; a DataError (before any scoring) if not."""
    if events < FLOOR_MIN_EVENTS:
        raise DataError(
            f"the floor compares two halves of the reference and needs at least "
            f"{FLOOR_MIN_EVENTS} events, got {events}; pass more reference events"
        )


def require_bin_events(events: int, bins: int) -> None:
    """A reference of ``events`` showers fills ``bins`` equal-count energy bins; a DataError
    (before any scoring) if not."""
    if events < max(bins, 2):
        raise DataError(
            f"the reference needs at least as many events as energy bins ({bins}), "
            f"got {events}; pass more events or fewer --bins"
        )


def equal_count_edges(energy: np.ndarray, bins: int) -> np.ndarray:
    """``bins`` equal-count energy bins spanning ``energy`` (duplicates merged)."""
    energy = np.asarray(energy, dtype=np.float64)
    edges = np.unique(np.quantile(energy, np.linspace(0.0, 1.0, bins + 1)))
    if edges.size < 2:
        edges = np.array([energy.min() - 0.5, energy.max() + 0.5])
    return edges


def energy_bin(energy: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Energy bin of every event; -1 outside the edges (right edge in the last bin)."""
    index = np.searchsorted(edges, energy, side="right") - 1
    index[energy == edges[-1]] = edges.size - 2
    index[(index < 0) | (index > edges.size - 2)] = -1
    return index


@dataclass
class Validation:
    """One set of generated showers scored against a reference."""

    score: float
    metrics: dict[str, dict[str, float]]
    events: int
    bad_events: int
    separation: dict[str, dict] = field(default_factory=dict)
    worst_features: list[tuple[str, float]] = field(default_factory=list)
    table: FeatureTable | None = field(default=None, repr=False)
    reason: str = ""  # why a set scored worst without comparison

    def to_json(self) -> dict:
        extra = {"reason": self.reason} if self.reason else {}
        return {
            **extra,
            "score": self.score,
            "metrics": self.metrics,
            "events": self.events,
            "bad_events": self.bad_events,
            "worst_features": [{"feature": n, "separation": v} for n, v in self.worst_features],
            "separation": self.separation,
        }


def _metric(value: float, error: float) -> dict[str, float]:
    return {"value": float(value), "error": float(error)}


def worst_validation(events: int, bad: int, reason: str) -> Validation:
    """The worst-class result: nothing comparable (every shower empty or non-finite, or a
    generator that failed)."""
    metrics = {"bad_fraction": _metric(bad / max(events, 1), 0.0)}
    return Validation(WORST, metrics, events, bad, reason=reason)


class Reference:
    """Reference showers condensed to features once; scores any number of generated sets."""

    def __init__(self, table: FeatureTable, bins: int = 5, seed: int = 0) -> None:
        require_bin_events(len(table), bins)
        if table.bad.any():
            raise DataError(
                f"the reference must not contain empty or non-finite showers, got "
                f"{int(table.bad.sum())} of {len(table)}; clean the reference file"
            )
        self.table, self.bins, self.seed = table, bins, seed
        self.edges = equal_count_edges(table.energy, bins)
        self.names = [n for n in table.scored_names() if np.ptp(table.scalars[n]) > 0]
        matrix = table.matrix(self.names)
        self.mean, self.std = matrix.mean(axis=0), matrix.std(axis=0)
        self.features = self.standardise(table)
        values = self._separation_values(table)
        self.feature_edges = {k: reference_edges(v) for k, v in values.items()}
        self.ref_bins = energy_bin(table.energy, self.edges)
        self._floor: dict | None = None

    @classmethod
    def from_showers(
        cls,
        ecal: np.ndarray,
        energy: np.ndarray,
        *,
        bins: int = 5,
        seed: int = 0,
        theta: np.ndarray | None = None,
    ) -> Reference:
        """Features of reference showers (n, X, Y, Z) GeV with primaries ``energy`` GeV."""
        return cls(shower_features(ecal, energy, theta), bins, seed)

    @property
    def has_angle(self) -> bool:
        return "angle_deg" in self.table.scalars

    def standardise(self, table: FeatureTable) -> np.ndarray:
        return (table.matrix(self.names) - self.mean) / self.std

    def _separation_values(self, table: FeatureTable) -> dict[str, np.ndarray]:
        values = {name: table.scalars[name] for name in self.names}
        for axis in PROFILES:
            for i in range(table.profiles[axis].shape[1]):
                values[f"{axis}[{i}]"] = table.profiles[axis][:, i]
        return values

    def score(
        self, ecal: np.ndarray, energy: np.ndarray, theta: np.ndarray | None = None
    ) -> Validation:
        """The selection score of generated showers (finite for any input)."""
        if np.asarray(ecal).shape[1:] != self.table.shape:
            raise DataError(
                f"generated showers have cells {np.asarray(ecal).shape[1:]}, the reference "
                f"{self.table.shape}; compare showers of the same cell window"
            )
        angle = theta if self.has_angle else None
        if self.has_angle and angle is None:
            angle = np.full(len(energy), np.pi / 2)
        return self.score_table(shower_features(ecal, energy, angle))

    def score_table(self, table: FeatureTable) -> Validation:
        """Score a feature table (the same work as :meth:`score` without the cells)."""
        bad = int(table.bad.sum())
        if len(table) - bad < 4:
            result = worst_validation(len(table), bad, "fewer than 4 non-empty, finite showers")
            result.table = table
            return result
        good = table.subset(~table.bad)
        result = self._compare(good)
        f_bad = bad / len(table)
        base = result.score
        result.score = float(min((1.0 - f_bad) * base + f_bad * WORST, WORST))
        result.events, result.bad_events = len(table), bad
        result.metrics["bad_fraction"] = _metric(f_bad, math.sqrt(f_bad * (1 - f_bad) / len(table)))
        result.table = table
        return result

    def _compare(self, table: FeatureTable) -> Validation:
        rng = np.random.default_rng(self.seed)
        gen = np.clip(self.standardise(table), -1e6, 1e6)
        gen_bins = energy_bin(table.energy, self.edges)
        nbins = self.edges.size - 1
        sep = separation_powers(
            self._separation_values(self.table),
            self._separation_values(table),
            self.ref_bins,
            gen_bins,
            nbins,
            rng,
            self.feature_edges,
        )
        groups = _groups(sep)
        spec = histogram_separation(
            self.table.spectrum, table.spectrum, self.ref_bins, gen_bins, nbins, rng
        )
        groups["spectrum"] = {
            "value": float(np.mean(spec[2])),
            "error": float(np.sqrt(np.mean(spec[3] ** 2))),
            "overall": spec[0],
            "per_energy_bin": spec[2].tolist(),
        }
        s_sep = float(np.mean([g["value"] for g in groups.values()]))
        s_sep_err = float(np.sqrt(np.sum([g["error"] ** 2 for g in groups.values()]))) / len(groups)
        area, area_err = classifier_auc(self.features, gen, rng)
        fd, fd_err = fpd(self.features, gen, rng)
        kd, kd_err = kpd(self.features, gen, rng)
        sf, sf_err = sf_error(
            self.table.scalars["energy_ratio"],
            table.scalars["energy_ratio"],
            self.ref_bins,
            gen_bins,
            nbins,
        )
        fd_term = math.log1p(max(fd, 0.0)) if math.isfinite(fd) else WORST
        base = s_sep + max(0.0, 2.0 * area - 1.0) + fd_term
        metrics = {
            "separation": _metric(s_sep, s_sep_err),
            "classifier_auc": _metric(area, area_err),
            "fpd": _metric(fd, fd_err),
            "kpd": _metric(kd, kd_err),
            "sf_error": _metric(sf, sf_err),
        }
        worst = sep.worst()
        return Validation(base, metrics, len(table), 0, groups, worst)

    def floor(self, on_split: Callable[[float], None] | None = None) -> dict:
        """The score of one half of the reference against the other, over ``FLOOR_SPLITS``
        random splits (what an independent sample of the truth scores): mean and spread.
        Computed once; ``on_split(score)`` is called after each split (progress displays)."""
        require_floor_events(len(self.table))
        half = len(self.table) // 2
        if self._floor is None:
            rng = np.random.default_rng(self.seed + 1)
            scores = []
            for _ in range(FLOOR_SPLITS):
                order = rng.permutation(len(self.table))
                reference = Reference(
                    self.table.subset(order[:half]), min(self.bins, half), self.seed
                )
                scores.append(reference.score_table(self.table.subset(order[half:])).score)
                if on_split is not None:
                    on_split(scores[-1])
            self._floor = {
                "score": float(np.mean(scores)),
                "spread": float(np.std(scores, ddof=1)),
                "splits": scores,
                "events": len(self.table) // 2,
            }
        return dict(self._floor)


def _groups(sep) -> dict[str, dict]:
    """Separation per feature group: each scalar alone, each profile averaged over slices."""
    groups: dict[str, list[str]] = {}
    for name in sep.overall:
        key = f"profile_{name[0]}" if "[" in name else name
        groups.setdefault(key, []).append(name)
    out = {}
    for key, names in groups.items():
        per_bin = np.mean([sep.per_bin[n] for n in names], axis=0)
        errors = np.mean([sep.per_bin_error[n] for n in names], axis=0)
        out[key] = {
            "value": float(np.mean(per_bin)),
            "error": float(np.sqrt(np.mean(errors**2))),
            "overall": float(np.mean([sep.overall[n] for n in names])),
            "per_energy_bin": per_bin.tolist(),
        }
    return out

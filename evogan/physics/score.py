"""The selection score: the one number model selection and architecture search minimise.

Defined once, here (rationale in docs/explanation/validation.md). For generated showers G against
the reference R, with the good events of G (neither empty nor non-finite) compared on the
high-level features of :mod:`evogan.physics.features`:

    base  = S_sep + S_auc + ln(1 + max(FPD, 0))
    score = min((1 - f_bad) * base + f_bad * WORST_SCORE, WORST_SCORE)

- S_sep: mean over feature groups (each scalar; each profile of the table; the cell spectrum)
  of the triangular separation power averaged over energy bins, in [0, 1]. The profiles follow
  the detector (:mod:`evogan.physics.features`): the x, y and z profiles of a Cartesian grid
  (the CLIC ECAL), and for a cylindrical detector the CaloChallenge set per layer (energy,
  centres and widths in x and y, sparsity), so its score is built from the challenge's
  high-level features, E_tot/E_inc and the voxel spectrum included;
- S_auc = max(0, 2 AUC - 1) of the classifier two-sample test, in [0, 1];
- FPD on the standardised features: unbounded, so a too-high energy is penalised as steeply
  as a too-low one (no cap at "completely different" that a near-empty generator could hide
  under); ln(1 + FPD) keeps it on the scale of the two bounded terms;
- f_bad: the fraction of empty or non-finite showers, each scored ``WORST_SCORE`` (also the
  score of a failed or all-empty generator), so the score is finite and worst-class for them.

Every set is scored with the cells the reference was read with: cells below the reference's
``cell_threshold`` count as zero in the reference and in every set it scores, whether the set
comes from a file (already thresholded as read) or straight from a generator, so a shower scores
the same whichever way it arrives. Standardising with the reference and binning at the
reference's quantiles make every term independent of where the cell window starts. KPD (in
jetnet's convention, :mod:`evogan.physics.kernel`) and the historic SF term are reported, not
scored (KPD duplicates FPD's information with a heavier noise tail at small N). The errors of
the separation power and FPD come from resampling events (:mod:`evogan.physics.resampling`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from evogan.detectors import Detector
from evogan.errors import DataError
from evogan.physics.classifier import classifier_auc
from evogan.physics.features import FeatureTable, shower_features
from evogan.physics.frechet import fpd
from evogan.physics.kernel import kpd
from evogan.physics.resampling import EventWeights, resampled_error
from evogan.physics.sampling import sf_error
from evogan.physics.separation import (
    Separation,
    histogram_separation,
    reference_edges,
    separation_powers,
)

WORST_SCORE = 100.0
"""The score of a set that cannot be scored (too few good showers, a generator that failed):
worse than any score a real set gets."""
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
    return Validation(WORST_SCORE, metrics, events, bad, reason=reason)


class Reference:
    """Reference showers condensed to features once; scores any number of generated sets, each
    with the reference table's cell threshold."""

    def __init__(self, table: FeatureTable, bins: int = 5, seed: int = 0) -> None:
        require_bin_events(len(table), bins)
        if table.bad.any():
            raise DataError(
                f"the reference must not contain empty or non-finite showers, got "
                f"{int(table.bad.sum())} of {len(table)}; clean the reference file"
            )
        self.table, self.bins, self.seed = table, bins, seed
        self.cell_threshold = table.cell_threshold
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
        cell_threshold: float,
        bins: int = 5,
        seed: int = 0,
        theta: np.ndarray | None = None,
        detector: Detector | None = None,
    ) -> Reference:
        """Features of reference showers (in ``detector``'s held form, GeV; the CLIC ECAL where
        none is given) with primaries ``energy`` GeV, cells below ``cell_threshold`` GeV
        zeroed: the ``data.cell_threshold`` the reference was read with, which every scored
        set then gets too."""
        table = shower_features(
            ecal, energy, theta, cell_threshold=cell_threshold, detector=detector
        )
        return cls(table, bins, seed)

    @property
    def detector(self) -> Detector | None:
        """The reference's detector (None: the CLIC ECAL); every scored set is read as its."""
        return self.table.detector

    @property
    def has_angle(self) -> bool:
        return "angle_deg" in self.table.scalars

    def standardise(self, table: FeatureTable) -> np.ndarray:
        return (table.matrix(self.names) - self.mean) / self.std

    def _separation_values(self, table: FeatureTable) -> dict[str, np.ndarray]:
        values = {name: table.scalars[name] for name in self.names}
        for key, profile in table.profiles.items():
            for i in range(profile.shape[1]):
                values[f"{key}[{i}]"] = profile[:, i]
        return values

    def score(
        self, ecal: np.ndarray, energy: np.ndarray, theta: np.ndarray | None = None
    ) -> Validation:
        """The selection score of generated showers (finite for any input), their cells below
        the reference's threshold counted as zero; ``ecal`` is not modified."""
        if np.asarray(ecal).shape[1:] != self.table.shape:
            raise DataError(
                f"generated showers have cells {np.asarray(ecal).shape[1:]}, the reference "
                f"{self.table.shape} ({_name(self.detector)}); compare showers of the same "
                "cell window"
            )
        angle = theta if self.has_angle else None
        if self.has_angle and angle is None:
            angle = np.full(len(energy), np.pi / 2)
        table = shower_features(
            ecal, energy, angle, cell_threshold=self.cell_threshold, detector=self.detector
        )
        return self.score_table(table)

    def score_table(self, table: FeatureTable) -> Validation:
        """Score a feature table (the same work as :meth:`score` without the cells); it must
        have been computed with the reference's cell threshold."""
        if table.cell_threshold != self.cell_threshold:
            raise ValueError(
                f"features computed with cell threshold {table.cell_threshold:g} GeV cannot be "
                f"scored against a reference of {self.cell_threshold:g} GeV; compute them with "
                "the reference's cell_threshold"
            )
        if _name(table.detector) != _name(self.detector):
            raise DataError(
                f"generated showers are of detector {_name(table.detector)}, the reference of "
                f"{_name(self.detector)}; compare showers of the same detector"
            )
        bad = int(table.bad.sum())
        if len(table) - bad < 4:
            result = worst_validation(len(table), bad, "fewer than 4 non-empty, finite showers")
            result.table = table
            return result
        good = table.subset(~table.bad)
        result = self._compare(good)
        f_bad = bad / len(table)
        base = result.score
        result.score = float(min((1.0 - f_bad) * base + f_bad * WORST_SCORE, WORST_SCORE))
        result.events, result.bad_events = len(table), bad
        result.metrics["bad_fraction"] = _metric(f_bad, math.sqrt(f_bad * (1 - f_bad) / len(table)))
        result.table = table
        return result

    def _compare(self, table: FeatureTable) -> Validation:
        rng = np.random.default_rng(self.seed)
        gen = np.clip(self.standardise(table), -1e6, 1e6)
        gen_bins = energy_bin(table.energy, self.edges)
        groups, separation, worst = self._separation(table, gen_bins, rng)
        area, area_err = classifier_auc(self.features, gen, rng)
        fd, fd_err = fpd(self.features, gen, rng)
        kd, kd_err = kpd(self.table.matrix(self.names), table.matrix(self.names), rng)
        sf, sf_err = sf_error(
            self.table.scalars["energy_ratio"],
            table.scalars["energy_ratio"],
            self.ref_bins,
            gen_bins,
            self.edges.size - 1,
        )
        fd_term = math.log1p(max(fd, 0.0)) if math.isfinite(fd) else WORST_SCORE
        base = separation["value"] + max(0.0, 2.0 * area - 1.0) + fd_term
        metrics = {
            "separation": separation,
            "classifier_auc": _metric(area, area_err),
            "fpd": _metric(fd, fd_err),
            "kpd": _metric(kd, kd_err),
            "sf_error": _metric(sf, sf_err),
        }
        return Validation(base, metrics, len(table), 0, groups, worst)

    def _separation(
        self, table: FeatureTable, gen_bins: np.ndarray, rng: np.random.Generator
    ) -> tuple[dict[str, dict], dict[str, float], list[tuple[str, float]]]:
        """Separation power per feature group (each scalar; the x, y and z profiles; the cell
        spectrum), their mean S_sep with its error, and the features that separate most. All
        come from one set of replicates, so a mean's error holds every correlation."""
        nbins = self.edges.size - 1
        weights = EventWeights.draw(self.ref_bins, gen_bins, rng)
        sep = separation_powers(
            self._separation_values(self.table),
            self._separation_values(table),
            self.ref_bins,
            gen_bins,
            nbins,
            weights,
            self.feature_edges,
        )
        groups = _groups(sep)
        spectrum = histogram_separation(
            self.table.spectrum, table.spectrum, self.ref_bins, gen_bins, nbins, weights
        )
        groups["spectrum"] = (spectrum[1], float(spectrum[0][0]))
        report = {key: _group_json(per_bin, overall) for key, (per_bin, overall) in groups.items()}
        s_sep = np.mean([per_bin.mean(axis=1) for per_bin, _ in groups.values()], axis=0)
        return report, _metric(s_sep[0], resampled_error(s_sep)), sep.worst()

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


def _name(detector: Detector | None) -> str:
    return "clic-ecal" if detector is None else detector.name


def _groups(sep: Separation) -> dict[str, tuple[np.ndarray, float]]:
    """Feature groups (each scalar alone, each profile's slices together): the group's
    separation per energy bin on every replicate (mean over its features; replicates, bins)
    and its overall value on the data."""
    members: dict[str, list[int]] = {}
    for index, name in enumerate(sep.names):
        key = f"profile_{name.split('[')[0]}" if "[" in name else name
        members.setdefault(key, []).append(index)
    return {
        key: (sep.per_bin[:, index].mean(axis=1), float(sep.overall[0, index].mean()))
        for key, index in members.items()
    }


def _group_json(per_bin: np.ndarray, overall: float) -> dict:
    """A group's report: the mean over energy bins with its error (the error of that mean,
    from the replicates), the overall value and the value per energy bin."""
    means = per_bin.mean(axis=1)
    return {
        "value": float(means[0]),
        "error": float(resampled_error(means)),
        "overall": overall,
        "per_energy_bin": per_bin[0].tolist(),
    }

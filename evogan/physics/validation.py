"""Physics validation of 3DGAN showers against reference showers, and the validation score.

:func:`shower_stats` condenses a set of showers into the observables the 3DGAN group compares
(REFERENCE.md section 4), all built on :mod:`evogan.physics.observables`:

- ``sampling_fraction``: mean ECAL sum / primary energy per energy bin;
- ``profile_x``, ``profile_y``, ``profile_z``: unit-area mean shower profiles along each axis;
- ``moments``: per energy bin, the mean over events of the first moment (energy-weighted mean
  position) and second moment (energy-weighted spread) along x, y and z, shape (bins, 3, 2);
- ``hits``: mean number of cells above 3e-4 GeV per energy bin;
- ``spectrum``: single-cell energy spectrum, cells above threshold per event in log10 bins.

:func:`validation_score` is the one definition of the score (see its docstring and
docs/validation.md). :func:`generate_showers` runs a generator for given conditions in GeV.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from evogan.config.gan import GanSpec
from evogan.models.gan3d import Generator, make_latent, to_gev
from evogan.physics.observables import binned_mean, hit_count, moments, profile, sampling_fraction

HIT_THRESHOLD = 3e-4  # GeV, the threshold of the group's hit-count plots
SPECTRUM_EDGES = np.linspace(-4.0, 2.0, 25)  # log10(cell energy / GeV)
AXES = ("x", "y", "z")


@dataclass(frozen=True)
class ShowerStats:
    """Observables of one set of showers, all on the same energy bins."""

    energy_edges: np.ndarray
    values: dict[str, np.ndarray]
    counts: np.ndarray  # events per energy bin
    events: int

    def to_json(self) -> dict:
        """Plain lists for score.json (NaN becomes null through evogan.store.to_json)."""
        return {
            "events": self.events,
            "energy_edges": self.energy_edges.tolist(),
            "counts": self.counts.tolist(),
            **{name: value.tolist() for name, value in self.values.items()},
        }


def equal_count_edges(energy: np.ndarray, bins: int) -> np.ndarray:
    """``bins`` equal-count energy bins spanning ``energy`` (duplicates merged)."""
    energy = np.asarray(energy, dtype=np.float64)
    edges = np.unique(np.quantile(energy, np.linspace(0.0, 1.0, bins + 1)))
    if edges.size < 2:
        edges = np.array([energy.min() - 0.5, energy.max() + 0.5])
    return edges


def shower_stats(
    ecal: np.ndarray, energy: np.ndarray, edges: np.ndarray, threshold: float = HIT_THRESHOLD
) -> ShowerStats:
    """The validation observables of showers ``ecal`` (n, X, Y, Z) GeV with primaries ``energy``."""
    ecal = np.asarray(ecal)
    energy = np.asarray(energy, dtype=np.float64).reshape(-1)
    edges = np.asarray(edges, dtype=np.float64)
    values: dict[str, np.ndarray] = {}
    sf = binned_mean(sampling_fraction(ecal, energy), energy, edges)
    values["sampling_fraction"] = sf.mean
    values["sampling_fraction_std"] = sf.std
    totals = ecal.reshape(len(ecal), -1).sum(axis=1, dtype=np.float64)
    for axis in AXES:
        mean_profile = profile(ecal, axis).mean(axis=0)
        area = mean_profile.sum()
        values[f"profile_{axis}"] = mean_profile / area if area > 0 else mean_profile
    filled = totals > 0
    table = np.full((edges.size - 1, len(AXES), 2), np.nan)
    if filled.any():
        for a, axis in enumerate(AXES):
            first, second = moments(ecal[filled], axis)
            table[:, a, 0] = binned_mean(first, energy[filled], edges).mean
            table[:, a, 1] = binned_mean(second, energy[filled], edges).mean
    values["moments"] = table
    values["hits"] = binned_mean(hit_count(ecal, threshold), energy, edges).mean
    cells = ecal[ecal > threshold].astype(np.float64)
    spectrum, _ = np.histogram(np.log10(cells), bins=SPECTRUM_EDGES)
    values["spectrum"] = spectrum / max(len(ecal), 1)
    return ShowerStats(edges, values, sf.count, len(ecal))


def validation_score(reference: ShowerStats, candidate: ShowerStats) -> dict[str, float]:
    """Distance of ``candidate`` showers from ``reference`` ones; 0 for identical sets.

    score = SF + P + M, each a mean relative error:

    - SF: mean over energy bins of |sf_c - sf_r| / sf_r, sf the mean sampling fraction;
    - P: mean over the x, y, z axes of 1/2 sum_i |p_c(i) - p_r(i)|, p the unit-area mean
      profile (the total-variation distance of the shapes, in [0, 1]);
    - M: mean over energy bins, axes and the first and second moments of |m_c - m_r| / |m_r|.

    Unlike the original metric, every energy bin is disjoint (no all-energies bin that counts
    each event again) and the energy scale enters only through SF (profiles are unit-area), so
    no deviation is counted twice. Bins empty in either set are skipped.
    """
    if not np.array_equal(reference.energy_edges, candidate.energy_edges):
        raise ValueError("reference and candidate statistics must use the same energy bins")
    ref, cand = reference.values, candidate.values
    sf = _mean_relative(cand["sampling_fraction"], ref["sampling_fraction"])
    shapes = float(
        np.mean([0.5 * np.abs(cand[f"profile_{a}"] - ref[f"profile_{a}"]).sum() for a in AXES])
    )
    mom = _mean_relative(cand["moments"], ref["moments"])
    return {
        "score": sf + shapes + mom,
        "sampling_fraction": sf,
        "profiles": shapes,
        "moments": mom,
    }


def _mean_relative(candidate: np.ndarray, reference: np.ndarray) -> float:
    candidate = np.asarray(candidate, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    ok = np.isfinite(candidate) & np.isfinite(reference) & (reference != 0)
    if not ok.any():
        return float("nan")
    return float(np.mean(np.abs(candidate[ok] - reference[ok]) / np.abs(reference[ok])))


def generate_showers(
    spec: GanSpec,
    generator: Generator,
    energy: np.ndarray,
    theta: np.ndarray | None,
    rng: torch.Generator,
    batch_size: int = 128,
) -> np.ndarray:
    """Showers in GeV (n, X, Y, Z) for primaries ``energy`` (GeV) and angles ``theta`` (rad).

    The generator runs in eval mode (batch-norm moving averages), batch by batch, with noise
    drawn from ``rng``; the spec's cell transform is undone, so the output compares with data.
    """
    device = next(generator.parameters()).device
    energy_t = torch.as_tensor(np.asarray(energy, dtype=np.float32)).reshape(-1)
    theta_t = None if theta is None else torch.as_tensor(np.asarray(theta, dtype=np.float32))
    out = np.empty((len(energy_t), *spec.output_shape), dtype=np.float32)
    was_training = generator.training
    generator.eval()
    try:
        with torch.no_grad():
            for lo in range(0, len(energy_t), batch_size):
                hi = min(lo + batch_size, len(energy_t))
                angle = None if theta_t is None else theta_t[lo:hi].to(device)
                latent = make_latent(spec, energy_t[lo:hi].to(device), angle, rng)
                out[lo:hi] = to_gev(spec, generator(latent)).cpu().numpy()
    finally:
        generator.train(was_training)
    return out

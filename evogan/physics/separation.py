"""Per-feature histogram separation power (triangular discrimination), as in the Fast
Calorimeter Simulation Challenge 2022: 0 for identical shapes, 1 for disjoint ones.

    S(p, q) = 1/2 sum_i (p_i - q_i)^2 / (p_i + q_i)      (p, q normalised histograms)

Bins are equal-count quantiles of the reference, with an underflow and an overflow bin, so a
generator that puts a feature outside the reference's range is counted, never dropped, and the
binning follows the reference whatever the units or the window origin. A feature that is
constant in the reference (a slice outside every shower) carries no information and is skipped.
Errors are the spread of a Poisson bootstrap over both sets' events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FEATURE_BINS = 20
BOOTSTRAP = 20


def triangular(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Triangular discrimination of histograms along the last axis (any normalisation)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    sp, sq = p.sum(axis=-1, keepdims=True), q.sum(axis=-1, keepdims=True)
    p = p / np.where(sp > 0, sp, 1.0)
    q = q / np.where(sq > 0, sq, 1.0)
    total = p + q
    terms = np.where(total > 0, (p - q) ** 2 / np.where(total > 0, total, 1.0), 0.0)
    return 0.5 * terms.sum(axis=-1)


def reference_edges(values: np.ndarray, bins: int = FEATURE_BINS) -> np.ndarray | None:
    """Bin edges at equal-count quantiles of the reference, from its minimum to just above its
    maximum (so values beyond either end fall in an under- or overflow bin of their own);
    None for a constant."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2 or np.ptp(values) == 0:
        return None
    edges = np.unique(np.quantile(values, np.linspace(0.0, 1.0, bins + 1)))
    edges[-1] = np.nextafter(edges[-1], np.inf)
    return edges


@dataclass(frozen=True)
class Separation:
    """Separation power per feature: overall and per energy bin, with bootstrap errors."""

    overall: dict[str, float]
    overall_error: dict[str, float]
    per_bin: dict[str, np.ndarray]  # (energy bins,) per feature
    per_bin_error: dict[str, np.ndarray]

    def worst(self, count: int = 5) -> list[tuple[str, float]]:
        """The features that tell the sets apart best (largest overall separation)."""
        ranked = sorted(self.overall.items(), key=lambda item: -item[1])
        return [(name, float(value)) for name, value in ranked[:count]]


def separation_powers(
    reference: dict[str, np.ndarray],
    generated: dict[str, np.ndarray],
    ref_bins: np.ndarray,
    gen_bins: np.ndarray,
    energy_bins: int,
    rng: np.random.Generator,
    edges: dict[str, np.ndarray] | None = None,
) -> Separation:
    """Separation of every feature (per-event values) in the reference's binning.

    ``ref_bins``/``gen_bins`` give each event's energy bin (-1: outside the reference range);
    ``edges`` are precomputed reference edges (computed here when None)."""
    edges = edges if edges is not None else {k: reference_edges(v) for k, v in reference.items()}
    n_ref, n_gen = len(ref_bins), len(gen_bins)
    w_ref = np.vstack([np.ones(n_ref), rng.poisson(1.0, (BOOTSTRAP, n_ref))])
    w_gen = np.vstack([np.ones(n_gen), rng.poisson(1.0, (BOOTSTRAP, n_gen))])
    result: tuple[dict, dict, dict, dict] = ({}, {}, {}, {})
    for name, ref_values in reference.items():
        if edges.get(name) is None:
            continue
        h_ref = _histograms(ref_values, ref_bins, edges[name], w_ref, energy_bins)
        h_gen = _histograms(generated[name], gen_bins, edges[name], w_gen, energy_bins)
        overall = triangular(h_ref.sum(axis=1), h_gen.sum(axis=1))
        per_bin = triangular(h_ref[:, :energy_bins], h_gen[:, :energy_bins])
        _store(result, name, overall, per_bin)
    return Separation(*result)


def histogram_separation(
    ref_counts: np.ndarray,
    gen_counts: np.ndarray,
    ref_bins: np.ndarray,
    gen_bins: np.ndarray,
    energy_bins: int,
    rng: np.random.Generator,
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Separation of a histogram each event contributes counts to (the cell spectrum):
    overall and per energy bin, with bootstrap errors."""
    w_ref = np.vstack([np.ones(len(ref_counts)), rng.poisson(1.0, (BOOTSTRAP, len(ref_counts)))])
    w_gen = np.vstack([np.ones(len(gen_counts)), rng.poisson(1.0, (BOOTSTRAP, len(gen_counts)))])
    h_ref = _summed(ref_counts, ref_bins, w_ref, energy_bins)
    h_gen = _summed(gen_counts, gen_bins, w_gen, energy_bins)
    overall = triangular(h_ref.sum(axis=1), h_gen.sum(axis=1))
    per_bin = triangular(h_ref[:, :energy_bins], h_gen[:, :energy_bins])
    return float(overall[0]), float(overall[1:].std()), per_bin[0], per_bin[1:].std(axis=0)


def _histograms(
    values: np.ndarray, ebins: np.ndarray, edges: np.ndarray, weights: np.ndarray, nbins: int
) -> np.ndarray:
    """Weighted histograms (replicates, energy bins + 1 for out-of-range, feature bins)."""
    fbin = np.searchsorted(edges, values, side="right")
    nf = edges.size + 1
    ebin = np.where(ebins < 0, nbins, ebins)
    flat = ebin * nf + fbin
    out = np.empty((len(weights), nbins + 1, nf))
    for r, w in enumerate(weights):
        out[r] = np.bincount(flat, weights=w, minlength=(nbins + 1) * nf).reshape(nbins + 1, nf)
    return out


def _summed(counts: np.ndarray, ebins: np.ndarray, weights: np.ndarray, nbins: int) -> np.ndarray:
    ebin = np.where(ebins < 0, nbins, ebins)
    onehot = np.zeros((len(ebin), nbins + 1))
    onehot[np.arange(len(ebin)), ebin] = 1.0
    return np.einsum("rn,ne,nk->rek", weights, onehot, counts)


def _store(result: tuple, name: str, overall: np.ndarray, per_bin: np.ndarray) -> None:
    result[0][name] = float(overall[0])
    result[1][name] = float(overall[1:].std())
    result[2][name] = per_bin[0]
    result[3][name] = per_bin[1:].std(axis=0)

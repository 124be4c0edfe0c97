"""Per-feature histogram separation power (triangular discrimination), as in the Fast
Calorimeter Simulation Challenge 2022: 0 for identical shapes, 1 for disjoint ones.

    S(p, q) = 1/2 sum_i (p_i - q_i)^2 / (p_i + q_i)      (p, q normalised histograms)

Bins are equal-count quantiles of the reference, with an underflow and an overflow bin, so a
generator that puts a feature outside the reference's range is counted, never dropped, and the
binning follows the reference whatever the units or the window origin. A feature that is
constant in the reference (a slice outside every shower) carries no information and is skipped.
Every separation is also computed on the replicates of :mod:`evogan.physics.resampling` (one
set of event weights for all features), from which the error of any mean over features and
energy bins follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evogan.physics.resampling import EventWeights

FEATURE_BINS = 20


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
    """Separation power per feature on the data (row 0) and every replicate (the rows of
    :class:`~evogan.physics.resampling.EventWeights`): overall and per energy bin."""

    names: list[str]
    overall: np.ndarray  # (replicates, features)
    per_bin: np.ndarray  # (replicates, features, energy bins)

    def worst(self, count: int = 5) -> list[tuple[str, float]]:
        """The features that tell the sets apart best (largest overall separation)."""
        ranked = sorted(zip(self.names, self.overall[0], strict=True), key=lambda item: -item[1])
        return [(name, float(value)) for name, value in ranked[:count]]


def separation_powers(
    reference: dict[str, np.ndarray],
    generated: dict[str, np.ndarray],
    ref_bins: np.ndarray,
    gen_bins: np.ndarray,
    energy_bins: int,
    weights: EventWeights,
    edges: dict[str, np.ndarray] | None = None,
) -> Separation:
    """Separation of every feature (per-event values) in the reference's binning, on the data
    and every replicate of ``weights``.

    ``ref_bins``/``gen_bins`` give each event's energy bin (-1: outside the reference range);
    ``edges`` are precomputed reference edges (computed here when None)."""
    edges = edges if edges is not None else {k: reference_edges(v) for k, v in reference.items()}
    names, overall, per_bin = [], [], []
    for name, ref_values in reference.items():
        if edges.get(name) is None:
            continue
        fbin = [
            np.searchsorted(edges[name], v, side="right") for v in (ref_values, generated[name])
        ]
        h_ref, h_gen = _replicated(
            fbin, (ref_bins, gen_bins), edges[name].size + 1, weights, energy_bins
        )
        names.append(name)
        overall.append(triangular(h_ref.sum(axis=1), h_gen.sum(axis=1)))
        per_bin.append(triangular(h_ref[:, :energy_bins], h_gen[:, :energy_bins]))
    rows = len(weights.ref) + len(weights.null)
    if not names:
        return Separation([], np.empty((rows, 0)), np.empty((rows, 0, energy_bins)))
    return Separation(names, np.stack(overall, axis=1), np.stack(per_bin, axis=1))


def histogram_separation(
    ref_counts: np.ndarray,
    gen_counts: np.ndarray,
    ref_bins: np.ndarray,
    gen_bins: np.ndarray,
    energy_bins: int,
    weights: EventWeights,
) -> tuple[np.ndarray, np.ndarray]:
    """Separation of a histogram each event contributes counts to (the cell spectrum), on the
    data and every replicate: overall (replicates,) and per energy bin (replicates, bins)."""
    onehot = [_onehot(b, energy_bins) for b in (ref_bins, gen_bins)]
    ref = np.einsum("rn,ne,nk->rek", weights.ref, onehot[0], ref_counts)
    gen = np.einsum("rn,ne,nk->rek", weights.gen, onehot[1], gen_counts)
    pooled = np.einsum("ne,nk->nek", np.vstack(onehot), np.vstack([ref_counts, gen_counts]))
    dealt = np.einsum("rn,nek->rek", weights.null, pooled)
    h_ref = np.concatenate([ref, dealt])
    h_gen = np.concatenate([gen, pooled.sum(axis=0) - dealt])
    overall = triangular(h_ref.sum(axis=1), h_gen.sum(axis=1))
    return overall, triangular(h_ref[:, :energy_bins], h_gen[:, :energy_bins])


def _replicated(
    fbins: list[np.ndarray],
    ebins: tuple[np.ndarray, np.ndarray],
    feature_bins: int,
    weights: EventWeights,
    nbins: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Histograms (replicates, energy bins + 1 for out-of-range, feature bins) of both sides:
    the data and bootstrap rows from each set's own events, the permutation rows from the
    pooled events dealt to each side."""
    flat = [np.where(e < 0, nbins, e) * feature_bins + f for e, f in zip(ebins, fbins, strict=True)]
    size = (nbins + 1) * feature_bins
    ref = _weighted_counts(flat[0], weights.ref, size)
    gen = _weighted_counts(flat[1], weights.gen, size)
    pooled = np.concatenate(flat)
    dealt = _weighted_counts(pooled, weights.null, size)
    everything = np.bincount(pooled, minlength=size).astype(np.float64)
    shape = (-1, nbins + 1, feature_bins)
    h_ref = np.concatenate([ref, dealt]).reshape(shape)
    h_gen = np.concatenate([gen, everything - dealt]).reshape(shape)
    return h_ref, h_gen


def _weighted_counts(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """One weighted bincount per row of ``weights``, in a single call: (rows, size)."""
    rows = len(weights)
    shifted = (index[None, :] + size * np.arange(rows)[:, None]).ravel()
    return np.bincount(shifted, weights=weights.ravel(), minlength=rows * size).reshape(rows, size)


def _onehot(ebins: np.ndarray, nbins: int) -> np.ndarray:
    ebin = np.where(ebins < 0, nbins, ebins)
    onehot = np.zeros((len(ebin), nbins + 1))
    onehot[np.arange(len(ebin)), ebin] = 1.0
    return onehot

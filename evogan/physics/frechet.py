"""Frechet Physics Distance (Kansal et al., Phys. Rev. D 107, 076017): the Frechet distance
between Gaussians fitted to the standardised high-level features of two sets,

    FPD = |mu_1 - mu_2|^2 + Tr(C_1 + C_2 - 2 (C_1 C_2)^(1/2)),

extrapolated to infinite sample size as in the paper and jetnet (the finite-N estimate is biased
upwards by about a/N): FD is measured on random subsets (without replacement) of ``POINTS``
sizes N from a third of the smaller set to all of it, ``BATCHES`` per size (the first N events
of ``BATCHES`` random orders), averaged per size and fitted linearly in 1/N; the intercept is
the value (it may be below 0: the fit is not bounded, where jetnet's is).

The error comes from resampling events (:mod:`evogan.physics.resampling`): the whole procedure
is repeated on bootstrap and permutation replicates of the two sets; the distances of all
subsets of all replicates come from one batched eigendecomposition.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from evogan.physics.resampling import BOOTSTRAP, PERMUTATIONS, dealt, resampled_error

POINTS = 5
BATCHES = 4


def frechet_distance(mu1: np.ndarray, cov1: np.ndarray, mu2: np.ndarray, cov2: np.ndarray) -> float:
    """Frechet (2-Wasserstein) distance squared between two Gaussians."""
    mu1, mu2 = np.atleast_1d(mu1), np.atleast_1d(mu2)
    cov1, cov2 = np.atleast_2d(cov1), np.atleast_2d(cov2)
    return float(frechet_distances(mu1[None], cov1[None], mu2[None], cov2[None])[0])


def frechet_distances(
    mu1: np.ndarray, cov1: np.ndarray, mu2: np.ndarray, cov2: np.ndarray
) -> np.ndarray:
    """Frechet distances of stacks of Gaussians (leading axis). Tr (C_1 C_2)^(1/2) is the sum of
    the square roots of the eigenvalues of C_1^(1/2) C_2 C_1^(1/2) (similar to C_1 C_2, and
    symmetric), so no general matrix square root is needed."""
    lam, vec = np.linalg.eigh(cov1)
    root = (vec * np.sqrt(np.clip(lam, 0.0, None))[..., None, :]) @ np.swapaxes(vec, -1, -2)
    inner = np.linalg.eigvalsh(root @ cov2 @ root)
    cross = np.sqrt(np.clip(inner, 0.0, None)).sum(axis=-1)
    diff = mu1 - mu2
    traces = np.trace(cov1, axis1=-2, axis2=-1) + np.trace(cov2, axis1=-2, axis2=-1)
    return np.einsum("...i,...i->...", diff, diff) + traces - 2.0 * cross


def fpd(real: np.ndarray, gen: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """FPD of feature matrices (events, features) extrapolated to N -> infinity, and its error
    from resampling events."""
    n1, n2 = len(real), len(gen)
    n, d = min(n1, n2), real.shape[1]
    if n < d + 3:  # too few events for a covariance: the plain estimate, no error
        if n < 2:
            return float("nan"), float("nan")
        fd = frechet_distance(
            real.mean(axis=0),
            np.cov(real, rowvar=False),
            gen.mean(axis=0),
            np.cov(gen, rowvar=False),
        )
        return fd, float("nan")
    sizes = np.unique(np.linspace(max(d + 2, n // 3), n, POINTS).astype(int))
    resampled = [np.vstack([np.arange(k), rng.integers(0, k, (BOOTSTRAP, k))]) for k in (n1, n2)]
    to_ref = dealt(np.zeros(n1, int), np.zeros(n2, int), PERMUTATIONS, rng).astype(bool)
    order = np.argsort(~to_ref, axis=1, kind="stable")  # the events dealt to ref come first
    pooled = np.vstack([real, gen])
    pairs = (  # each replicate's events of either side: the data and bootstrap, then the deals
        ((real, resampled[0]), (gen, resampled[1])),
        ((pooled, order[:, :n1]), (pooled, order[:, n1:])),
    )
    values = []
    for (x, x_events), (y, y_events) in pairs:
        first, second = _moments(x, x_events, sizes, rng), _moments(y, y_events, sizes, rng)
        distances = frechet_distances(*first, *second).mean(axis=-1)  # (replicates, sizes)
        values.append(_intercepts(distances, sizes))
    replicates = np.concatenate(values)
    return float(replicates[0]), float(resampled_error(replicates))


def _moments(
    x: np.ndarray, members: np.ndarray, sizes: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Means (replicates, sizes, batches, d) and covariances (..., d, d) of random subsets of
    each size of each replicate's ``members`` (event indices into ``x``, repeats allowed): the
    first N of ``BATCHES`` random orders of them, so one pass over each order gives the sums of
    every size (the pieces between sizes, added up)."""
    reps, m = members.shape
    d = x.shape[1]
    centre = x.mean(axis=0)
    xc = x - centre
    orders = rng.permuted(np.tile(np.arange(m), (reps * BATCHES, 1)), axis=1)
    orders = orders[:, : sizes[-1]].reshape(reps, BATCHES, -1)
    bounds = np.concatenate([[0], sizes])
    sums = np.empty((reps, len(sizes), BATCHES, d))
    scatter = np.empty((reps, len(sizes), BATCHES, d, d))
    for rep in range(reps):
        ordered = xc[members[rep][orders[rep]]]  # (batches, largest size, d)
        for k, (low, high) in enumerate(pairwise(bounds)):
            piece = ordered[:, low:high]
            sums[rep, k] = piece.sum(axis=1)
            scatter[rep, k] = np.swapaxes(piece, 1, 2) @ piece
    sums, scatter = np.cumsum(sums, axis=1), np.cumsum(scatter, axis=1)
    total = sizes.astype(np.float64)[None, :, None]
    mean = sums / total[..., None]
    outer = mean[..., :, None] * mean[..., None, :]
    cov = (scatter / total[..., None, None] - outer) * (total / (total - 1.0))[..., None, None]
    return mean + centre, cov


def _intercepts(distances: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Intercepts of straight-line fits of each row of ``distances`` against 1 / sizes."""
    design = np.column_stack([np.ones(len(sizes)), 1.0 / sizes])
    coef, *_ = np.linalg.lstsq(design, distances.T, rcond=None)
    return coef[0]


def fpd_fit(real: np.ndarray, gen: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """FPD extrapolated as :func:`fpd` does, with jetnet's error instead of the resampling one:
    the standard error of the straight-line fit's intercept. One pass over the events, where
    :func:`fpd`'s replicates cost forty: the choice for hundreds of features (the CaloChallenge
    set), whose covariances make every replicate slow."""
    n, d = min(len(real), len(gen)), real.shape[1]
    if n < d + 3:
        return fpd(real, gen, rng)
    sizes = np.unique(np.linspace(max(d + 2, n // 3), n, POINTS).astype(int))
    first = _moments(real, np.arange(len(real))[None], sizes, rng)
    second = _moments(gen, np.arange(len(gen))[None], sizes, rng)
    distances = frechet_distances(*first, *second).mean(axis=-1)[0]  # (sizes,)
    design = np.column_stack([np.ones(len(sizes)), 1.0 / sizes])
    coef, *_ = np.linalg.lstsq(design, distances, rcond=None)
    if len(sizes) < 3:
        return float(coef[0]), float("nan")
    residual = distances - design @ coef
    variance = residual @ residual / (len(sizes) - 2) * np.linalg.inv(design.T @ design)[0, 0]
    return float(coef[0]), float(np.sqrt(variance))

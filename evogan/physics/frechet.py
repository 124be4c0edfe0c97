"""Frechet Physics Distance (Kansal et al., Phys. Rev. D 107, 076017): the Frechet distance
between Gaussians fitted to the standardised high-level features of two sets,

    FPD = |mu_1 - mu_2|^2 + Tr(C_1 + C_2 - 2 (C_1 C_2)^(1/2)),

extrapolated to infinite sample size as in the paper (the finite-N estimate is biased upwards
by about a/N): FD is measured on random subsets of several sizes N, fitted linearly in 1/N,
and the intercept is the value, its fit standard error the uncertainty.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

POINTS = 5
BATCHES = 4


def frechet_distance(mu1: np.ndarray, cov1: np.ndarray, mu2: np.ndarray, cov2: np.ndarray) -> float:
    """Frechet (2-Wasserstein) distance squared between two Gaussians."""
    mu1, mu2 = np.atleast_1d(mu1), np.atleast_1d(mu2)
    cov1, cov2 = np.atleast_2d(cov1), np.atleast_2d(cov2)
    root = linalg.sqrtm(cov1 @ cov2)
    if not np.isfinite(root).all():  # singular product: regularise as the FID reference does
        eps = 1e-6 * np.eye(len(cov1))
        root = linalg.sqrtm((cov1 + eps) @ (cov2 + eps))
    root = np.real(root)
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(cov1) + np.trace(cov2) - 2.0 * np.trace(root))


def _fd(x: np.ndarray, y: np.ndarray) -> float:
    return frechet_distance(
        x.mean(axis=0), np.cov(x, rowvar=False), y.mean(axis=0), np.cov(y, rowvar=False)
    )


def fpd(real: np.ndarray, gen: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """FPD of feature matrices (events, features) extrapolated to N -> infinity, and its error."""
    n = min(len(real), len(gen))
    d = real.shape[1]
    if n < d + 3:  # too few events for a covariance: the plain estimate, no error
        return (_fd(real, gen), float("nan")) if n > 1 else (float("nan"), float("nan"))
    sizes = np.unique(np.linspace(max(d + 2, n // 3), n, POINTS).astype(int))
    values = []
    for size in sizes:
        draws = [
            _fd(
                real[rng.choice(len(real), size, replace=False)],
                gen[rng.choice(len(gen), size, replace=False)],
            )
            for _ in range(BATCHES)
        ]
        values.append(np.mean(draws))
    if len(sizes) < 3:
        return float(values[-1]), float("nan")
    coef, cov = np.polyfit(1.0 / sizes, np.asarray(values), 1, cov=True)
    return float(coef[1]), float(np.sqrt(max(cov[1, 1], 0.0)))

"""Kernel Physics Distance (Kansal et al., Phys. Rev. D 107, 076017): the unbiased estimator
of the squared maximum mean discrepancy with the cubic polynomial kernel

    k(x, y) = (x . y / d + 1)^3          (d features, standardised)

measured on random batches of both sets; the value is the median over batches and the
uncertainty half the 16-84 percentile range (the paper's and jetnet's convention). Unbiased:
two samples of one distribution give 0 on average, so a value within its error of 0 means
indistinguishable.
"""

from __future__ import annotations

import numpy as np

BATCHES = 10


def _kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a @ b.T / a.shape[1] + 1.0) ** 3


def mmd_poly(x: np.ndarray, y: np.ndarray) -> float:
    """Unbiased MMD^2 of samples ``x`` (m, d) and ``y`` (n, d) with the cubic kernel."""
    m, n = len(x), len(y)
    if m < 2 or n < 2:
        raise ValueError(f"the unbiased MMD needs at least 2 events per set, got {m} and {n}")
    kxx, kyy, kxy = _kernel(x, x), _kernel(y, y), _kernel(x, y)
    xx = (kxx.sum() - np.trace(kxx)) / (m * (m - 1))
    yy = (kyy.sum() - np.trace(kyy)) / (n * (n - 1))
    return float(xx + yy - 2.0 * kxy.mean())


def kpd(real: np.ndarray, gen: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """KPD of feature matrices (events, features): median and half 68% range over batches."""
    size = min(len(real), len(gen)) // 2
    if size < 2:
        return (
            (mmd_poly(real, gen), float("nan"))
            if min(len(real), len(gen)) >= 2
            else (float("nan"), float("nan"))
        )
    values = [
        mmd_poly(
            real[rng.choice(len(real), size, replace=False)],
            gen[rng.choice(len(gen), size, replace=False)],
        )
        for _ in range(BATCHES)
    ]
    low, high = np.percentile(values, [16.0, 84.0])
    return float(np.median(values)), float(0.5 * (high - low))

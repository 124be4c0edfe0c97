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
ROWS = 128  # kernel rows per block: a block stays in cache, and no (m, n) matrix is held


def _kernel_sum(a: np.ndarray, b: np.ndarray) -> float:
    """Sum of k(a_i, b_j) over all pairs, block by block (about 7x the speed of one (m, n)
    matrix raised to the third power, at 2,500 events)."""
    scaled = a / a.shape[1]
    total = 0.0
    for start in range(0, len(a), ROWS):
        block = scaled[start : start + ROWS] @ b.T
        block += 1.0
        cube = block * block
        cube *= block
        total += float(cube.sum())
    return total


def _kernel_diagonal_sum(a: np.ndarray) -> float:
    """Sum of k(a_i, a_i)."""
    inner = np.einsum("ij,ij->i", a, a) / a.shape[1] + 1.0
    return float((inner * inner * inner).sum())


def mmd_poly(x: np.ndarray, y: np.ndarray) -> float:
    """Unbiased MMD^2 of samples ``x`` (m, d) and ``y`` (n, d) with the cubic kernel."""
    m, n = len(x), len(y)
    if m < 2 or n < 2:
        raise ValueError(f"the unbiased MMD needs at least 2 events per set, got {m} and {n}")
    xx = (_kernel_sum(x, x) - _kernel_diagonal_sum(x)) / (m * (m - 1))
    yy = (_kernel_sum(y, y) - _kernel_diagonal_sum(y)) / (n * (n - 1))
    return xx + yy - 2.0 * _kernel_sum(x, y) / (m * n)


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

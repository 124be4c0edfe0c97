"""Kernel Physics Distance (Kansal et al., Phys. Rev. D 107, 076017) in jetnet's convention
(``jetnet.evaluation.kpd`` of jetnet 0.2.5, which the CaloChallenge evaluation calls): the
unbiased estimator of the squared maximum mean discrepancy with the quartic polynomial kernel

    k(x, y) = (x . y / d + 1)^4          (d features)

on features divided by the reference's largest absolute value of each (jetnet's
``normalise``: a feature that is 0 throughout is left as it is), measured on ``BATCHES``
random batches of both sets; the value is the median over batches and the error half the
16.275-83.725 percentile range (jetnet's). jetnet draws its batches of 5,000 with replacement
from at least 50,000 events; at the few thousand events scored here repeats would bias the
estimator upwards (each repeated pair adds k(x, x) - k(x, y)), so a batch is half of each set,
drawn without replacement. Unbiased: two samples of one distribution give 0 on average.
"""

from __future__ import annotations

import numpy as np

BATCHES = 10
DEGREE = 4
PERCENTILES = (16.275, 83.725)
ROWS = 128  # kernel rows per block: a block stays in cache, and no (m, n) matrix is held


def jetnet_scale(real: np.ndarray, gen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both feature matrices divided by the reference's largest |value| per feature (1 where
    that is 0), as jetnet's ``_normalise_features``."""
    largest = np.abs(real).max(axis=0)
    largest = np.where(largest == 0, 1.0, largest)
    return real / largest, gen / largest


def _kernel_sum(a: np.ndarray, b: np.ndarray) -> float:
    """Sum of k(a_i, b_j) over all pairs, block by block (3.4x the speed of one (m, n) matrix
    raised to the fourth power, at 2,500 events and 9 features)."""
    scaled = a / a.shape[1]
    total = 0.0
    for start in range(0, len(a), ROWS):
        block = scaled[start : start + ROWS] @ b.T
        block += 1.0
        block *= block
        block *= block
        total += float(block.sum())
    return total


def _kernel_diagonal_sum(a: np.ndarray) -> float:
    """Sum of k(a_i, a_i)."""
    inner = np.einsum("ij,ij->i", a, a) / a.shape[1] + 1.0
    return float((inner**DEGREE).sum())


def mmd_poly(x: np.ndarray, y: np.ndarray) -> float:
    """Unbiased MMD^2 of samples ``x`` (m, d) and ``y`` (n, d) with the quartic kernel."""
    m, n = len(x), len(y)
    if m < 2 or n < 2:
        raise ValueError(f"the unbiased MMD needs at least 2 events per set, got {m} and {n}")
    xx = (_kernel_sum(x, x) - _kernel_diagonal_sum(x)) / (m * (m - 1))
    yy = (_kernel_sum(y, y) - _kernel_diagonal_sum(y)) / (n * (n - 1))
    return xx + yy - 2.0 * _kernel_sum(x, y) / (m * n)


def kpd(real: np.ndarray, gen: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """KPD of raw feature matrices (events, features), scaled here as jetnet scales them:
    median and half the 16.275-83.725 percentile range over batches."""
    real, gen = jetnet_scale(real, gen)
    gen = np.clip(gen, -1e6, 1e6)  # as the standardised features: finite for absurd sets
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
    low, high = np.percentile(values, PERCENTILES)
    return float(np.median(values)), float(0.5 * (high - low))

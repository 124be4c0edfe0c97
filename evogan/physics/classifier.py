"""Classifier two-sample test: how well a small classifier tells generated from reference
showers, as the area under the ROC curve on held-out events (0.5: indistinguishable, 1: every
shower recognised).

The classifier is a logistic regression on the standardised features and all their pairwise
products (a quadratic decision surface sees wrong means, widths and correlations, e.g. showers
without fluctuations), fitted with L-BFGS and an L2 penalty: a second on two cores for a few
thousand events. It is trained on one half of each set and evaluated on the other; the error is
the Hanley-McNeil standard error of the AUC.

It needs no ``scipy.stats``: importing it costs about 0.5 s, paid by every process that scores.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, special

L2 = 1e-2


def quadratic_features(x: np.ndarray) -> np.ndarray:
    """``x`` (n, d) and its pairwise products x_i x_j (i <= j): (n, d + d (d + 1) / 2)."""
    rows, cols = np.triu_indices(x.shape[1])
    return np.hstack([x, x[:, rows] * x[:, cols]])


def _fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Weights (bias last) of an L2-penalised logistic regression."""
    design = np.hstack([x, np.ones((len(x), 1))])

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = design @ w
        value = np.logaddexp(0.0, z).sum() - y @ z + 0.5 * L2 * (w[:-1] @ w[:-1])
        grad = design.T @ (special.expit(z) - y)
        grad[:-1] += L2 * w[:-1]
        return float(value) / len(y), grad / len(y)

    start = np.zeros(design.shape[1])
    options = {"ftol": 1e-12, "gtol": 1e-8, "maxiter": 500}
    return optimize.minimize(loss, start, jac=True, method="L-BFGS-B", options=options).x


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``values``, ties sharing their mean rank (``scipy.stats.rankdata``'s
    default); all NaN if any value is NaN."""
    values = np.asarray(values, dtype=np.float64)
    if np.isnan(values).any():
        return np.full(values.shape, np.nan)
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values))
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def auc(score_pos: np.ndarray, score_neg: np.ndarray) -> tuple[float, float]:
    """ROC AUC (Mann-Whitney, ties counted half) and its Hanley-McNeil standard error."""
    m, n = len(score_pos), len(score_neg)
    ranks = average_ranks(np.concatenate([score_pos, score_neg]))
    area = (ranks[:m].sum() - m * (m + 1) / 2) / (m * n)
    q1, q2 = area / (2 - area), 2 * area**2 / (1 + area)
    var = (area * (1 - area) + (m - 1) * (q1 - area**2) + (n - 1) * (q2 - area**2)) / (m * n)
    return float(area), float(np.sqrt(max(var, 0.0)))


def classifier_auc(
    real: np.ndarray, gen: np.ndarray, rng: np.random.Generator
) -> tuple[float, float]:
    """Held-out AUC of generated (positive) vs reference (negative) feature rows, with error.

    Sets are trimmed to the same size so the classifier cannot win on class frequencies."""
    n = min(len(real), len(gen))
    if n < 4:
        return 0.5, 0.5
    real = real[rng.permutation(len(real))[:n]]
    gen = gen[rng.permutation(len(gen))[:n]]
    half = n // 2
    x_train = quadratic_features(np.vstack([real[:half], gen[:half]]))
    scale = x_train.std(axis=0)
    scale[scale == 0] = 1.0
    centre = x_train.mean(axis=0)
    y_train = np.concatenate([np.zeros(half), np.ones(half)])
    w = _fit((x_train - centre) / scale, y_train)

    def predict(x: np.ndarray) -> np.ndarray:
        return ((quadratic_features(x) - centre) / scale) @ w[:-1] + w[-1]

    return auc(predict(gen[half:]), predict(real[half:]))

"""The one-sided Mann-Whitney U test: do a candidate's re-trained scores lie below the
baseline's?

A campaign's final step compares a handful of scores per architecture (one per fresh seed).
Their distribution is unknown and failed trainings score a fixed worst value, so a rank test
fits: it assumes no normality and a worst-class score only counts as "worse than everything
else". Implemented here with numpy (scipy is not a dependency): the exact null distribution of
U for small samples without ties, the normal approximation with tie correction and continuity
correction otherwise (the conventions of ``scipy.stats.mannwhitneyu``, against which the tests
check it when scipy is installed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

ALPHA = 0.05  # a candidate "beats the baseline" below this p-value
EXACT_MAX = 50  # n1 + n2 up to which the exact distribution is used (counts stay in int64)

Method = Literal["auto", "exact", "asymptotic"]


@dataclass(frozen=True)
class MannWhitney:
    """``u``: pairs (x_i, y_j) with x_i > y_j, ties counting one half (scipy's U1);
    ``p``: one-sided p-value that ``x`` tends to be lower than ``y``."""

    u: float
    p: float
    method: str


def midranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks from 1 with tied values sharing their mean rank, and the size of each tie group."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    edges = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True])
    sizes = np.diff(edges)
    mean_rank = (edges[:-1] + edges[1:] + 1) / 2.0  # mean of ranks edges[i]+1 .. edges[i+1]
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, sizes)
    return ranks, sizes


def u_distribution(n1: int, n2: int) -> np.ndarray:
    """Counts of each U = 0 .. n1 n2 over all C(n1 + n2, n1) orderings without ties: the
    coefficients of the Gaussian binomial [n1 + n2 choose n1]_q, built as the product of
    (1 - q^(n2+i)) / (1 - q^i) for i = 1..n1 (a polynomial after every factor)."""
    counts = np.zeros(n1 * n2 + 1, dtype=np.int64)
    counts[0] = 1
    for i in range(1, n1 + 1):
        shift = n2 + i
        counts[shift:] -= counts[:-shift].copy()  # times (1 - q^shift)
        for k in range(i, len(counts)):  # divided by (1 - q^i): a running sum with stride i
            counts[k] += counts[k - i]
    return counts


def mann_whitney_less(
    x: np.ndarray | list[float], y: np.ndarray | list[float], method: Method = "auto"
) -> MannWhitney:
    """One-sided test of H1 "x is stochastically smaller than y" (lower scores are better).

    ``auto`` uses the exact distribution when there are no ties and n1 + n2 <= EXACT_MAX,
    else the normal approximation. Infinite values are ordinary (largest) values."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if len(a) == 0 or len(b) == 0 or np.isnan(a).any() or np.isnan(b).any():
        raise ValueError(
            f"Mann-Whitney U needs two non-empty samples without NaN, got {a.tolist()} "
            f"and {b.tolist()}"
        )
    n1, n2 = len(a), len(b)
    ranks, ties = midranks(np.concatenate([a, b]))
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    tied = bool((ties > 1).any())
    if method == "auto":
        method = "exact" if not tied and n1 + n2 <= EXACT_MAX else "asymptotic"
    if method == "exact":
        if tied:
            raise ValueError("the exact Mann-Whitney distribution assumes no ties")
        counts = u_distribution(n1, n2)
        p = float(counts[: round(u1) + 1].sum() / counts.sum())
        return MannWhitney(u1, min(p, 1.0), "exact")
    return MannWhitney(u1, _normal_p(u1, n1, n2, ties), "asymptotic")


def _normal_p(u1: float, n1: int, n2: int, ties: np.ndarray) -> float:
    """P(U1 <= u1) by the normal approximation with tie and continuity correction."""
    n = n1 + n2
    tie_term = float((ties.astype(np.float64) ** 3 - ties).sum())
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:  # every value tied: no evidence either way
        return 1.0
    z = (u1 - n1 * n2 / 2.0 + 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def verdict(block: dict[str, Any]) -> str:
    """The report's words for a tested candidate (a ``final`` block with ``better`` and
    ``p_value``): "yes (p=0.004)" or "no (p=0.31)"."""
    return f"{'yes' if block['better'] else 'no'} (p={block['p_value']:.3g})"

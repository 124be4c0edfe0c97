"""The Mann-Whitney U test: do a candidate's re-trained scores lie below the baseline's
(one-sided), and can two searches' winners be told apart (two-sided)?

A campaign's final step compares a handful of scores per architecture (one per fresh seed).
Their distribution is unknown and failed trainings score a fixed worst value, so a rank test
fits: it assumes no normality and a worst-class score only counts as "worse than everything
else". The test itself is scipy's (``scipy.stats.mannwhitneyu``); this module fixes the method
per comparison, so that a report says which one gave its p-value: the exact distribution for
small samples without ties, the normal approximation with tie and continuity correction
otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

ALPHA = 0.05  # a candidate "beats the baseline" below this p-value
EXACT_MAX = 50  # n1 + n2 up to which the exact distribution is used

Method = Literal["auto", "exact", "asymptotic"]


@dataclass(frozen=True)
class MannWhitney:
    """``u``: pairs (x_i, y_j) with x_i > y_j, ties counting one half (scipy's U1);
    ``p``: one-sided p-value that ``x`` tends to be lower than ``y``."""

    u: float
    p: float
    method: str


def mann_whitney_less(
    x: np.ndarray | list[float], y: np.ndarray | list[float], method: Method = "auto"
) -> MannWhitney:
    """One-sided test of H1 "x is stochastically smaller than y" (lower scores are better).

    ``auto`` uses the exact distribution when there are no ties and n1 + n2 <= EXACT_MAX,
    else the normal approximation. Infinite values are ordinary (largest) values."""
    return _mann_whitney(x, y, "less", method)


def mann_whitney_differ(
    x: np.ndarray | list[float], y: np.ndarray | list[float], method: Method = "auto"
) -> MannWhitney:
    """Two-sided test of H1 "x and y differ in location": whether two searches' winners can
    be told apart on their fresh seeds, where neither is the reference. ``p`` is two-sided."""
    return _mann_whitney(x, y, "two-sided", method)


def _mann_whitney(
    x: np.ndarray | list[float],
    y: np.ndarray | list[float],
    alternative: Literal["less", "two-sided"],
    method: Method,
) -> MannWhitney:
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if len(a) == 0 or len(b) == 0 or np.isnan(a).any() or np.isnan(b).any():
        raise ValueError(
            f"Mann-Whitney U needs two non-empty samples without NaN, got {a.tolist()} "
            f"and {b.tolist()}"
        )
    pooled = np.concatenate([a, b])
    tied = len(np.unique(pooled)) < len(pooled)
    if method == "auto":
        method = "exact" if not tied and len(pooled) <= EXACT_MAX else "asymptotic"
    if method == "exact" and tied:
        raise ValueError("the exact Mann-Whitney distribution assumes no ties")
    from scipy import stats  # 0.5 s to import: paid only where a final step runs the test

    result = stats.mannwhitneyu(a, b, alternative=alternative, method=method)
    if (pooled == pooled[0]).all():  # every value tied: no evidence either way
        return MannWhitney(float(result.statistic), 1.0, method)
    return MannWhitney(float(result.statistic), min(float(result.pvalue), 1.0), method)


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given: several candidates (or several
    backends' winners) tested against one baseline each get a chance to win by luck, and a
    comparison counts as a win only when its adjusted p is below ALPHA. Holm controls the
    family-wise error as Bonferroni does and rejects at least as often."""
    order = np.argsort(p_values, kind="stable")
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * float(p_values[index])))
        adjusted[index] = running
    return adjusted


def verdict(block: dict[str, Any]) -> str:
    """The report's words for a tested candidate (a ``final`` block with ``better``,
    ``p_value`` and, where several were tested, ``p_holm``): "yes (p=0.004)" or
    "no (p=0.012, Holm 0.036)"."""
    text = f"{'yes' if block['better'] else 'no'} (p={block['p_value']:.3g}"
    if block.get("p_holm", block["p_value"]) != block["p_value"]:
        text += f", Holm {block['p_holm']:.3g}"
    return text + ")"

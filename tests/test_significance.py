"""The one-sided Mann-Whitney U test of evogan.search.significance: exact p-values against a
brute-force enumeration of every ordering, textbook values, and the normal approximation with
ties against its formula by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from evogan.search.significance import holm, mann_whitney_differ, mann_whitney_less


def _u1(x: list[float], y: list[float]) -> float:
    """U1 by its definition: pairs with x_i > y_j, ties one half."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)


def _split_u1s(x: list[float], y: list[float]) -> list[float]:
    """U1 of every split of the pooled values into groups of len(x): the exact null
    distribution by brute force."""
    pooled = [*x, *y]
    return [
        _u1([pooled[i] for i in chosen], [pooled[i] for i in range(len(pooled)) if i not in chosen])
        for chosen in itertools.combinations(range(len(pooled)), len(x))
    ]


def _permutation_p(x: list[float], y: list[float]) -> float:
    """P(U1 <= observed) under that null distribution."""
    splits, observed = _split_u1s(x, y), _u1(x, y)
    return sum(u <= observed + 1e-12 for u in splits) / len(splits)


def test_exact_p_matches_brute_force_enumeration() -> None:
    rng = np.random.default_rng(3)
    for n1, n2 in [(2, 2), (3, 4), (5, 5), (4, 6)]:
        for _ in range(5):
            x = rng.normal(0.0, 1.0, n1).round(6).tolist()
            y = rng.normal(0.7, 1.0, n2).round(6).tolist()
            result = mann_whitney_less(x, y)
            assert result.method == "exact"
            assert result.u == _u1(x, y)
            assert result.p == pytest.approx(_permutation_p(x, y), abs=1e-12)


def test_two_sided_p_is_the_share_of_splits_at_least_as_far_from_the_centre() -> None:
    rng = np.random.default_rng(4)
    for n1, n2 in [(3, 4), (5, 5), (8, 8)]:
        for _ in range(3):
            x = rng.normal(0.0, 1.0, n1).round(6).tolist()
            y = rng.normal(0.5, 1.0, n2).round(6).tolist()
            centre = n1 * n2 / 2
            distance = abs(_u1(x, y) - centre)
            splits = _split_u1s(x, y)
            far = sum(abs(u - centre) >= distance - 1e-12 for u in splits)
            result = mann_whitney_differ(x, y)
            assert result.method == "exact"
            assert result.p == pytest.approx(far / len(splits), abs=1e-12)
            assert mann_whitney_differ(y, x).p == pytest.approx(result.p, abs=1e-12)


def test_known_values() -> None:
    # Complete separation, 5 vs 5: p = 1 / C(10, 5) = 1/252; the reverse order gives 1.
    low, high = [1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]
    assert mann_whitney_less(low, high).p == pytest.approx(1 / 252)
    assert mann_whitney_less(high, low).p == pytest.approx(1.0)
    # 3 vs 3 with one inversion: U1 = 1, P(U <= 1) = 2/20.
    assert mann_whitney_less([1.0, 2.0, 5.0], [3.0, 6.0, 7.0]).p == pytest.approx(0.1)


def test_ties_use_normal_approximation_with_tie_correction() -> None:
    # Failed trainings score the worst value (100): ties among them.
    x = [2.0, 2.5, 100.0, 3.0, 2.5]
    y = [4.0, 100.0, 100.0, 3.0, 5.0]
    result = mann_whitney_less(x, y)
    assert result.method == "asymptotic"
    n1 = n2 = 5
    u1 = _u1(x, y)
    ties = [2, 2, 3]  # 2.5 twice, 3.0 twice, 100 three times
    tie_term = sum(t**3 - t for t in ties)
    sigma = math.sqrt(n1 * n2 / 12 * (n1 + n2 + 1 - tie_term / ((n1 + n2) * (n1 + n2 - 1))))
    z = (u1 - n1 * n2 / 2 + 0.5) / sigma
    assert result.u == u1
    assert result.p == pytest.approx(0.5 * math.erfc(-z / math.sqrt(2)), rel=1e-12)
    # all values tied: no evidence
    assert mann_whitney_less([1.0, 1.0], [1.0, 1.0]).p == 1.0


def test_infinite_scores_are_largest_values() -> None:
    assert mann_whitney_less([1.0, 2.0], [math.inf, 3.0]).p == pytest.approx(1 / 6)


def test_bad_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        mann_whitney_less([], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        mann_whitney_less([math.nan], [1.0])
    with pytest.raises(ValueError, match="ties"):
        mann_whitney_less([1.0, 1.0], [2.0], method="exact")


def test_holm_adjusts_as_the_step_down_procedure_decides() -> None:
    # Holm (1979): ordered p_(1) <= ... <= p_(m) are rejected while p_(k) <= alpha / (m - k + 1);
    # the adjusted p is the smallest alpha at which each would be rejected.
    p = [0.01, 0.04, 0.03, 0.005]
    adjusted = holm(p)
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])
    rng = np.random.default_rng(5)
    for _ in range(200):
        p = rng.uniform(0, 0.1, rng.integers(1, 6)).round(4).tolist()
        for alpha in (0.01, 0.025, 0.05):
            order = sorted(range(len(p)), key=lambda i: p[i])
            rejected = set()
            for k, i in enumerate(order):
                if p[i] > alpha / (len(p) - k):
                    break
                rejected.add(i)
            assert {i for i, a in enumerate(holm(p)) if a <= alpha} == rejected


def test_holm_of_one_test_is_its_p_and_never_exceeds_one() -> None:
    assert holm([0.004]) == [0.004]
    assert holm([0.6, 0.7, 0.9]) == [1.0, 1.0, 1.0]

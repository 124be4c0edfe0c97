"""Energy response of the regressor: log bins, standard errors that match the scatter of repeated
samples, and the resolution fit a/sqrt(E) (+) b (+) c/E recovering known terms."""

from __future__ import annotations

import numpy as np
import pytest

from evogan.physics.resolution import (
    MIN_EVENTS,
    bin_edges,
    energy_response,
    fit_resolution,
    resolution_model,
)

TRUE = (0.15, 0.02, 0.5)  # a [GeV^1/2], b, c [GeV]


def _sample(n: int, seed: int, terms=TRUE, bias: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Energies uniform over 2-500 GeV (as the synthetic set) smeared by the resolution model."""
    rng = np.random.default_rng(seed)
    true = rng.uniform(2.0, 500.0, n)
    sigma = resolution_model(true, *terms)
    return true, true * bias * (1 + sigma * rng.standard_normal(n))


def _fit(rows):
    return fit_resolution(
        np.array([r["true_mean"] for r in rows]),
        np.array([r["resolution"] for r in rows]),
        np.array([r["resolution_err"] for r in rows]),
    )


def test_bins_are_log_spaced_and_hold_enough_events() -> None:
    true, _ = _sample(3000, 0)
    edges = bin_edges(true, 10)
    widths = np.diff(edges)
    counts = np.histogram(true, edges)[0]
    assert np.all(np.diff(widths) > 0)  # narrow at low energy
    assert counts.min() >= MIN_EVENTS and counts.sum() == true.size
    assert widths[0] < 0.05 * widths[-1]  # equal-width bins would have one point below 50 GeV


def test_sparse_low_energy_bins_are_merged_not_dropped() -> None:
    true, pred = _sample(60, 1)
    rows = energy_response(true, pred, 10)
    assert sum(r["count"] for r in rows) == 60
    assert all(r["count"] >= MIN_EVENTS for r in rows)


@pytest.mark.parametrize(("n", "seed"), [(20000, 3), (5000, 4)])
def test_fit_recovers_known_terms_within_errors(n: int, seed: int) -> None:
    true, pred = _sample(n, seed)
    fit = _fit(energy_response(true, pred, 12))
    assert fit is not None
    for value, error, known in zip(
        (fit.a, fit.b, fit.c), (fit.a_err, fit.b_err, fit.c_err), TRUE, strict=True
    ):
        assert abs(value - known) < 3 * error, (value, error, known)
        assert error < 0.3 * known  # the errors are informative, not just wide
    assert fit.chi2 / fit.ndf < 3


def test_fit_ranks_a_worse_stochastic_term_and_is_blind_to_a_scale_bias() -> None:
    """Resolution is spread over mean: a 10% scale bias leaves it alone, a doubled a does not."""
    good = _fit(energy_response(*_sample(20000, 5), 12))
    biased = _fit(energy_response(*_sample(20000, 5, bias=0.9), 12))
    worse = _fit(energy_response(*_sample(20000, 5, terms=(0.30, 0.02, 0.5)), 12))
    assert abs(biased.a - good.a) < 1e-7 and abs(biased.c - good.c) < 1e-7
    assert worse.a - good.a > 3 * np.hypot(worse.a_err, good.a_err)


def test_standard_errors_match_the_scatter_of_repeated_samples() -> None:
    """Over 300 independent smearings of one set of true energies (so the bins stay put) the
    spread of each bin's response and resolution equals the mean quoted error, within the ~6%
    a 300-sample spread allows (three times over)."""
    true, _ = _sample(2000, 0)
    sigma = resolution_model(true, *TRUE)
    values: dict[str, list[list[float]]] = {k: [] for k in ("ratio", "resolution")}
    errors: dict[str, list[list[float]]] = {k: [] for k in ("ratio", "resolution")}
    for seed in range(300):
        smear = np.random.default_rng(100 + seed).standard_normal(true.size)
        rows = energy_response(true, true * (1 + sigma * smear), 8)
        for key in values:
            values[key].append([r[key] for r in rows])
            errors[key].append([r[f"{key}_err"] for r in rows])
    for key in values:
        spread = np.std(np.array(values[key]), axis=0, ddof=1)
        quoted = np.mean(np.array(errors[key]), axis=0)
        np.testing.assert_allclose(spread, quoted, rtol=0.2, err_msg=key)


def test_too_few_bins_give_no_fit() -> None:
    assert _fit(energy_response(*_sample(25, 6), 10)) is None

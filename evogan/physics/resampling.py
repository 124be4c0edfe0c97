"""Errors of a distance between two shower sets, from resampling their events.

A distance D (separation power, FPD) is recomputed on replicates of the two sets:

- ``BOOTSTRAP`` bootstrap replicates, each set resampled on its own: their variance v_boot;
- ``PERMUTATIONS`` permutation replicates, the pooled events dealt at random into two sets of
  the same sizes (what two samples of one distribution give): their variance v_null.

Where D is far from zero its noise is linear in the events' fluctuations, and v_boot is its
variance. Near zero D is quadratic in them: a bootstrap replicate adds its own fluctuation to
the sample's, so v_boot holds the null variance two to three times (3 for a pure quadratic
form, about 2 measured for the separation power and the extrapolated FPD), where v_null holds
it once. The stated error takes the middle:

    error^2 = max(v_null, v_boot - NULL_EXCESS v_null),      NULL_EXCESS = 1.5

Measured over 100 pairs of samples at a time (tests/test_physics_errors.py; five feature
distributions), the pulls have an RMS of 0.74-1.03 (FPD) and 0.79-0.95 (separation power) for
samples of one distribution, 1.05-1.34 for FPD a distance apart comparable with its noise and
0.96-1.26 a few times further; subtracting v_null once or twice moves one end nearer 1 and the
other further from it. Replicates share their event weights across features, so the
error of a mean over features or energy bins is the spread of the replicates' means: every
correlation is in it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP = 20
PERMUTATIONS = 20
NULL_EXCESS = 1.5


def resampled_error(replicates: np.ndarray, boot: int = BOOTSTRAP) -> np.ndarray:
    """The error of a distance from its replicates (axis 0: the data, then ``boot`` bootstrap
    replicates, then the permutation replicates; any trailing shape)."""
    replicates = np.asarray(replicates, dtype=np.float64)
    v_boot = replicates[1 : 1 + boot].var(axis=0, ddof=1)
    v_null = replicates[1 + boot :].var(axis=0, ddof=1)
    return np.sqrt(np.maximum(v_null, v_boot - NULL_EXCESS * v_null))


@dataclass(frozen=True)
class EventWeights:
    """Weights of every event in every replicate: row 0 is the data, then ``BOOTSTRAP``
    bootstrap rows, then ``PERMUTATIONS`` permutation rows (:func:`resampled_error`'s order).

    Bootstrap rows weigh each set's own events (Poisson(1) counts); a permutation row deals the
    pooled events (reference first, then generated) within each stratum (energy bin), so each
    side keeps its count per stratum."""

    ref: np.ndarray  # (1 + BOOTSTRAP, n_ref)
    gen: np.ndarray  # (1 + BOOTSTRAP, n_gen)
    null: np.ndarray  # (PERMUTATIONS, n_ref + n_gen): 1 where a pooled event is dealt to ref

    @classmethod
    def draw(
        cls, ref_strata: np.ndarray, gen_strata: np.ndarray, rng: np.random.Generator
    ) -> EventWeights:
        n_ref, n_gen = len(ref_strata), len(gen_strata)
        ref = np.vstack([np.ones(n_ref), rng.poisson(1.0, (BOOTSTRAP, n_ref))])
        gen = np.vstack([np.ones(n_gen), rng.poisson(1.0, (BOOTSTRAP, n_gen))])
        return cls(ref, gen, dealt(ref_strata, gen_strata, PERMUTATIONS, rng))


def dealt(
    ref_strata: np.ndarray, gen_strata: np.ndarray, count: int, rng: np.random.Generator
) -> np.ndarray:
    """``count`` random deals of the pooled events (reference first): 1 where an event goes to
    the reference side, as many per stratum as the reference has there."""
    strata = np.concatenate([ref_strata, gen_strata])
    keys = rng.random((count, strata.size)) + strata  # strata are integers: sorted by stratum
    order = np.argsort(keys, axis=-1)
    values, starts, sizes = np.unique(strata[order[0]], return_index=True, return_counts=True)
    ref_count = np.array([np.count_nonzero(ref_strata == v) for v in values])
    position = np.arange(strata.size) - np.repeat(starts, sizes)
    slot_is_ref = position < np.repeat(ref_count, sizes)
    deal = np.empty(keys.shape)
    np.put_along_axis(deal, order, np.broadcast_to(slot_is_ref, keys.shape).astype(float), -1)
    return deal

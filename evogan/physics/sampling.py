"""The historic 3DGAN model-selection number, kept as a reported metric (not in the score):
the mean over energy bins of the relative error of the mean sampling fraction,

    SF = 1/B sum_b |<E_tot/E>_gen(b) - <E_tot/E>_ref(b)| / <E_tot/E>_ref(b),

with the error propagated from the standard errors of both means. Empty generated showers
count with a sampling fraction of 0, so SF is finite for any input.
"""

from __future__ import annotations

import numpy as np


def sf_error(
    ref_ratio: np.ndarray,
    gen_ratio: np.ndarray,
    ref_bins: np.ndarray,
    gen_bins: np.ndarray,
    energy_bins: int,
) -> tuple[float, float]:
    """SF term and its error over the energy bins filled in both sets (NaN if none is)."""
    terms, variances = [], []
    for b in range(energy_bins):
        ref, gen = ref_ratio[ref_bins == b], gen_ratio[gen_bins == b]
        if len(ref) < 2 or len(gen) < 2 or ref.mean() == 0:
            continue
        mean_r, mean_g = ref.mean(), gen.mean()
        terms.append(abs(mean_g - mean_r) / mean_r)
        var_g = gen.var(ddof=1) / len(gen)
        var_r = ref.var(ddof=1) / len(ref)
        variances.append((var_g + (mean_g / mean_r) ** 2 * var_r) / mean_r**2)
    if not terms:
        return float("nan"), float("nan")
    return float(np.mean(terms)), float(np.sqrt(np.sum(variances)) / len(terms))

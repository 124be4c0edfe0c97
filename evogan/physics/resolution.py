"""Energy response of an energy reconstruction (the regressor's): predicted / true energy and
the resolution sigma(E)/E per bin of true energy, and the calorimeter resolution fit
sigma/E = a/sqrt(E) (+) b (+) c/E.

Bins are log-spaced because the stochastic (a) and noise (c) terms live at low energy, where
equal-width bins would put one point; a bin with fewer than :data:`MIN_EVENTS` events joins its
neighbour so every point has a usable standard error. The resolution of a bin is the spread of
predicted / true over its mean (the ratio, not the predicted energy, so the spread of true
energies inside a wide bin does not count as resolution).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

MIN_EVENTS = 10
FIT_POINTS = 4  # three parameters and at least one degree of freedom
AT_LIMIT = 1e-4  # a fitted term this small is zero within any calorimeter's resolution


def bin_edges(true: np.ndarray, bins: int, min_events: int = MIN_EVENTS) -> np.ndarray:
    """``bins`` log-spaced edges over the energies, merged until each bin holds ``min_events``
    (a short last bin joins the one below)."""
    low, high = float(true.min()), float(true.max())
    if not 0 < low < high:
        return np.array([low, high])
    edges = np.geomspace(low, high, bins + 1)
    counts = np.histogram(true, edges)[0]
    kept, running = [edges[0]], 0
    for count, edge in zip(counts, edges[1:], strict=True):
        running += count
        if running >= min_events:
            kept.append(edge)
            running = 0
    if running and len(kept) > 1:
        kept[-1] = edges[-1]
    elif len(kept) == 1:
        kept.append(edges[-1])
    return np.array(kept)


def energy_response(
    true_energy: np.ndarray, predicted_energy: np.ndarray, bins: int = 10
) -> list[dict[str, float]]:
    """Per bin of true energy (GeV): events, mean true and predicted energy, the response
    predicted/true and the resolution with their standard errors (sigma/sqrt(n),
    sigma/sqrt(2(n-1))), and |pred - true| / true (mean, spread and standard error)."""
    true = np.asarray(true_energy, dtype=np.float64)
    pred = np.asarray(predicted_energy, dtype=np.float64)
    edges = bin_edges(true, bins)
    which = np.clip(np.searchsorted(edges, true, side="right") - 1, 0, len(edges) - 2)
    rows = []
    for index in range(len(edges) - 1):
        mask = which == index
        n = int(mask.sum())
        if n == 0:
            continue
        ratio = pred[mask] / true[mask]
        rel = np.abs(ratio - 1.0)
        mean = float(ratio.mean())
        spread = float(ratio.std(ddof=1)) if n > 1 else math.nan
        resolution = spread / mean if mean > 0 else math.nan
        rows.append(
            {
                "low": float(edges[index]),
                "high": float(edges[index + 1]),
                "count": n,
                "true_mean": float(true[mask].mean()),
                "pred_mean": float(pred[mask].mean()),
                "pred_std": float(pred[mask].std()),
                "ratio": mean,
                "ratio_err": spread / math.sqrt(n),
                "resolution": resolution,
                "resolution_err": resolution / math.sqrt(2 * (n - 1)) if n > 1 else math.nan,
                "relative_error": float(rel.mean()),
                "relative_error_std": float(rel.std()),
                "relative_error_err": float(rel.std(ddof=1)) / math.sqrt(n) if n > 1 else math.nan,
                "bias": mean - 1.0,
            }
        )
    return rows


def resolution_model(energy: np.ndarray, a: float, b: float, c: float) -> np.ndarray:
    """sigma/E = a/sqrt(E) (+) b (+) c/E, terms added in quadrature (E in GeV)."""
    return np.sqrt(a * a / energy + b * b + (c / energy) ** 2)


@dataclass(frozen=True)
class ResolutionFit:
    """Fitted stochastic (a, GeV^1/2), constant (b) and noise (c, GeV) terms with their errors."""

    a: float
    a_err: float
    b: float
    b_err: float
    c: float
    c_err: float
    chi2: float
    ndf: int

    def curve(self, energy: np.ndarray) -> np.ndarray:
        return resolution_model(energy, self.a, self.b, self.c)

    def terms(self, units: tuple[str, str, str] = ("", "", "")) -> list[str]:
        """a, b, c as ``value ± error`` with their units; a term fitted to its lower limit reads
        ``0 (at limit)`` since its error is not defined there."""
        pairs = ((self.a, self.a_err), (self.b, self.b_err), (self.c, self.c_err))
        return [
            f"0{unit} (at limit)" if value < AT_LIMIT else f"{format_pm(value, error)}{unit}"
            for (value, error), unit in zip(pairs, units, strict=True)
        ]

    def label(self) -> str:
        a, b, c = self.terms((" GeV$^{1/2}$", "", " GeV"))
        return f"a = {a}, b = {b}, c = {c}, $\\chi^2$/ndf = {self.chi2:.1f}/{self.ndf}"


def format_pm(value: float, error: float, scale: float = 1.0) -> str:
    """``value ± error`` (both times ``scale``) rounded to the error's two significant digits."""
    if not math.isfinite(value):
        return "-"
    value, error = scale * value, scale * error
    if not (math.isfinite(error) and error > 0):
        return f"{value:.3g}"
    decimals = max(0, 1 - math.floor(math.log10(error)))
    return f"{value:.{decimals}f} ± {error:.{decimals}f}"


def fit_resolution(
    energy: np.ndarray, resolution: np.ndarray, error: np.ndarray
) -> ResolutionFit | None:
    """Weighted least squares of :func:`resolution_model` with a, b, c >= 0; None when fewer
    than :data:`FIT_POINTS` bins have a finite resolution and error."""
    energy, resolution, error = (
        np.asarray(v, dtype=np.float64) for v in (energy, resolution, error)
    )
    ok = np.isfinite(resolution) & np.isfinite(error) & (error > 0) & (energy > 0)
    energy, resolution, error = energy[ok], resolution[ok], error[ok]
    if energy.size < FIT_POINTS:
        return None
    # Imported here: every regressor run bins its response, only reports fit it (0.3 s).
    from scipy.optimize import OptimizeWarning, curve_fit, nnls

    # sigma^2/E^2 is linear in (a^2, b^2, c^2): non-negative least squares gives the start.
    design = np.stack([1 / energy, np.ones_like(energy), energy**-2], axis=1)
    weight = 1 / (2 * resolution * error)
    squares, _ = nnls(design * weight[:, None], resolution**2 * weight)
    start = np.sqrt(squares) + 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        try:
            values, cov = curve_fit(
                resolution_model,
                energy,
                resolution,
                p0=start,
                sigma=error,
                absolute_sigma=True,
                bounds=(0.0, np.inf),
            )
        except RuntimeError:
            return None
    errors = np.sqrt(np.clip(np.diag(cov), 0, None))
    chi2 = float((((resolution_model(energy, *values) - resolution) / error) ** 2).sum())
    a, b, c = (float(v) for v in values)
    a_err, b_err, c_err = (float(e) for e in errors)
    return ResolutionFit(a, a_err, b, b_err, c, c_err, chi2, int(energy.size - 3))

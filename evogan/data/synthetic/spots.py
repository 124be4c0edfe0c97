"""GFLASH energy spots (Grindhammer-Peters, hep-ex/0001020; docs/explanation/physics.md section 3):
how many spots a shower has, its longitudinal shape, and how far each spot lies from the shower
axis.

Everything is in the absorber's own units (depth in X0, radius in Moliere radii), so one model
serves every detector: the materials give Z and the critical energy, the caller scales to mm.
Vectorised over every spot of a batch; per-spot arithmetic is in float32.
"""

from __future__ import annotations

import math

import numpy as np

from evogan.detectors.materials import Materials

SPOT_SCALE = 0.5


def spot_counts(energies: np.ndarray, z: int) -> np.ndarray:
    """Energy spots per shower: ``SPOT_SCALE`` x GFLASH's 10.3 ln(Z) E^0.959 (at least 8)."""
    full = 10.3 * math.log(z) * np.power(energies, 0.959)
    return np.maximum(np.rint(SPOT_SCALE * full), 8).astype(np.int64)


def longitudinal(
    energies: np.ndarray, materials: Materials, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Per-shower gamma shape alpha and depth of maximum T (X0), with correlated fluctuations."""
    ln_y = np.log(energies / materials.critical_gev)
    mean_ln_t = np.log(ln_y - 0.812)
    mean_ln_alpha = np.log(0.81 + (0.458 + 2.26 / materials.z) * ln_y)
    sigma_ln_t = 1.0 / (-2.5 + 1.25 * ln_y)
    sigma_ln_alpha = 1.0 / (-0.82 + 0.79 * ln_y)
    rho = 0.784 - 0.023 * ln_y
    z = rng.standard_normal((2, len(energies)))
    ln_t = mean_ln_t + sigma_ln_t * z[0]
    ln_alpha = mean_ln_alpha + sigma_ln_alpha * (rho * z[0] + np.sqrt(1.0 - rho**2) * z[1])
    alpha = np.maximum(np.exp(ln_alpha), 1.05)  # alpha <= 1 has no maximum; 4+ sigma, rare
    return alpha, np.exp(ln_t)


def radial_radius(
    tau: np.ndarray, ln_e: np.ndarray, counts: np.ndarray, z: int, rng: np.random.Generator
) -> np.ndarray:
    """Spot distance from the shower axis in Moliere radii (GFLASH core/tail mixture).

    ``tau`` is per spot, ``ln_e`` per shower; energy-dependent coefficients are formed per
    shower and repeated, and the per-spot arithmetic is done in place in float32.
    """

    def per_spot(values: np.ndarray) -> np.ndarray:
        return np.repeat(values.astype(np.float32), counts)

    # Core radius Rc = z1 + z2 tau.
    rc = tau * np.float32(0.1162 - 0.000381 * z)
    rc += per_spot(0.0251 + 0.00319 * ln_e)
    # Tail radius Rt = k1 (exp(k3 (tau - k2)) + exp(k4 (tau - k2))).
    shifted = np.minimum(tau, np.float32(40.0))  # far behind the calorimeter: avoid overflow
    shifted -= np.float32(0.645)
    rt = np.exp(shifted * np.float32(-2.59))
    shifted *= per_spot(0.3585 + 0.0412 * ln_e)
    rt += np.exp(shifted, out=shifted)
    rt *= np.float32(0.659 - 0.00309 * z)
    # Core probability p = p1 exp(x - exp(x)), x = (p2 - tau) / p3.
    x = np.float32(0.401 + 0.00187 * z) - tau
    x *= per_spot(1.0 / (1.313 - 0.0686 * ln_e))
    x -= np.exp(x)
    p = np.exp(x, out=x)
    p *= np.float32(2.632 - 0.00094 * z)

    u = rng.random((2, len(tau)), dtype=np.float32)
    radius = np.where(u[0] < p, rc, rt)
    ratio = np.float32(1.0) - u[1]
    np.divide(u[1], ratio, out=ratio)
    radius *= np.sqrt(ratio, out=ratio)
    return radius

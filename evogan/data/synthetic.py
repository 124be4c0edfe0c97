"""Synthetic electron showers in the CLIC Si-W ECAL from the GFLASH parametrisation.

Why it exists: the public 3DGAN files cannot be downloaded on our machines, yet every workflow
(regressor GA, GAN training, architecture search, tests) needs realistic 51 x 51 x 25 showers.
GFLASH (Grindhammer-Peters, hep-ex/0001020) gives per-shower longitudinal fluctuations, a
two-component radial profile and sampling fluctuations through discrete energy spots; summing
the spots into 5.1 mm pads reproduces the sparsity and the falling sampling fraction of the data.

Model choices (all vectorised over every spot of a batch of showers):

- Longitudinal: gamma profile with correlated Gaussian fluctuations of ln T and ln alpha. Means
  are the homogeneous tungsten ones (they reproduce the reference T = 4.7 X0 at 2 GeV ... 10.2 X0
  at 500 GeV); widths and correlation are the sampling-calorimeter ones.
- Spots: ``SPOT_SCALE`` times the GFLASH count N = 10.3 ln(Z) E^0.959, each carrying E/N times a
  gamma-distributed weight whose spread keeps the sampling term at 0.11/sqrt(E) whatever the
  spot count (half the spots buys 2x speed without losing the sampling fluctuations). At fixed
  energy the ECAL sum also fluctuates by ~6% from 50 GeV up because the shower depth fluctuates
  (about 1 X0) across the boundary between thin and thick layers, which sample differently.
- Radial: core/tail mixture sampled by inversion, r = R sqrt(u / (1 - u)), uniform azimuth.
- Sampling: a thin layer turns ``VISIBLE_PER_ABSORBED`` of its absorbed energy into silicon
  signal, a thick layer (same silicon, twice the tungsten) half of that. Deeper, higher-energy
  showers put more energy in thick layers and behind the calorimeter, so the sampling fraction
  falls with energy as in the Geant4 reference table.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from evogan.data import detector as det
from evogan.data.writer import ShowerWriter
from evogan.errors import EvoganError
from evogan.resources import require_disk

# Calibrated once against the reference sampling-fraction table (scripts/bench_synth.py
# --physics 1000) to the smallest worst-case deviation: +3.3% at 2 GeV, -3.5% at 50-100 GeV.
VISIBLE_PER_ABSORBED = 0.02408
THICK_TO_THIN = 0.5
SPOT_SCALE = 0.5
STOCHASTIC_TERM = 0.11
MIN_ENERGY_GEV = 1.0
MAX_ENERGY_GEV = 1000.0  # bounds the spot arrays of a block (~1 GB at the top)
BLOCK_EVENTS = 64  # events per independent random stream: fixes the output for a seed
FILE_BYTES_PER_EVENT = 1000  # compressed, at least: 1.5 kB measured at 1 GeV, 4.4 kB at 2-500

_CELLS_PER_EVENT = det.CELLS_X * det.CELLS_Y * det.LAYERS
_THIN_DEPTH_X0 = det.THIN_LAYERS * det.THIN_W_MM / det.X0_MM
_THIN_X0 = det.THIN_W_MM / det.X0_MM
_THICK_X0 = det.THICK_W_MM / det.X0_MM


def spot_counts(energies: np.ndarray) -> np.ndarray:
    """Energy spots per shower: ``SPOT_SCALE`` x GFLASH's 10.3 ln(Z) E^0.959 (at least 8)."""
    full = 10.3 * math.log(det.Z) * np.power(energies, 0.959)
    return np.maximum(np.rint(SPOT_SCALE * full), 8).astype(np.int64)


def _longitudinal(energies: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Per-shower gamma shape alpha and depth of maximum T (X0), with correlated fluctuations."""
    ln_y = np.log(energies / det.CRITICAL_GEV)
    mean_ln_t = np.log(ln_y - 0.812)
    mean_ln_alpha = np.log(0.81 + (0.458 + 2.26 / det.Z) * ln_y)
    sigma_ln_t = 1.0 / (-2.5 + 1.25 * ln_y)
    sigma_ln_alpha = 1.0 / (-0.82 + 0.79 * ln_y)
    rho = 0.784 - 0.023 * ln_y
    z = rng.standard_normal((2, len(energies)))
    ln_t = mean_ln_t + sigma_ln_t * z[0]
    ln_alpha = mean_ln_alpha + sigma_ln_alpha * (rho * z[0] + np.sqrt(1.0 - rho**2) * z[1])
    alpha = np.maximum(np.exp(ln_alpha), 1.05)  # alpha <= 1 has no maximum; 4+ sigma, rare
    return alpha, np.exp(ln_t)


def _radial_radius(
    tau: np.ndarray, ln_e: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Spot distance from the shower axis in Moliere radii (GFLASH core/tail mixture).

    ``tau`` is per spot, ``ln_e`` per shower; energy-dependent coefficients are formed per
    shower and repeated, and the per-spot arithmetic is done in place in float32.
    """
    z = det.Z

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


def _layer_of(depth_x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Layer index (25 = behind the calorimeter) and visible fraction of each spot's energy."""
    thin = depth_x0 < _THIN_DEPTH_X0
    layer = np.where(
        thin,
        depth_x0 / np.float32(_THIN_X0),
        det.THIN_LAYERS + (depth_x0 - np.float32(_THIN_DEPTH_X0)) / np.float32(_THICK_X0),
    )
    layer = np.minimum(layer, det.LAYERS).astype(np.int64)
    visible = np.where(
        thin, np.float32(VISIBLE_PER_ABSORBED), np.float32(VISIBLE_PER_ABSORBED * THICK_TO_THIN)
    )
    return layer, visible


def _cell_index(offset_cells: np.ndarray, cells: int) -> np.ndarray:
    """Pad index along one transverse axis (window centred on the axis entry point).

    Far-out spots (the radial tail reaches huge r) are clipped to -1 so the int cast is safe.
    """
    index = offset_cells + np.float32(cells / 2)
    np.clip(index, -1.0, cells, out=index)
    return np.floor(index, out=index).astype(np.int64)


def generate_showers(
    energies: np.ndarray, rng: np.random.Generator, *, theta: np.ndarray | float | None = None
) -> np.ndarray:
    """Visible (silicon) energy in GeV of one shower per primary energy, shape (n, 51, 51, 25).

    ``theta`` is the polar angle of incidence in radians (default pi/2, perpendicular). An
    inclined shower keeps its shape along its axis; its depth is projected on the layer normal
    and the axis drifts along y by (geometric depth) x cot(theta) from the window centre.
    All spots of the batch are held at once (about 1 MB per 500 GeV shower): pass blocks of
    tens of showers, as :func:`synthesize` does.
    """
    energies, theta = _check_showers(energies, theta)
    alpha, t_max = _longitudinal(energies, rng)
    counts = spot_counts(energies)

    def per_spot(values: np.ndarray) -> np.ndarray:
        return np.repeat(np.asarray(values, dtype=np.float32), counts)

    # Depth along the axis, in X0: gamma(alpha) / beta with beta = (alpha - 1) / T.
    depth = rng.standard_gamma(per_spot(alpha), dtype=np.float32)
    depth *= per_spot(t_max / (alpha - 1.0))
    tau = depth * per_spot(1.0 / t_max)
    radius = _radial_radius(tau, np.log(energies), counts, rng)
    del tau
    radius *= np.float32(det.MOLIERE_MM / det.CELL_MM)  # in cell widths from here on
    phi = rng.random(len(depth), dtype=np.float32)
    phi *= np.float32(2.0 * math.pi)
    x_cells = radius * np.cos(phi)
    y_cells = np.sin(phi, out=phi)
    y_cells *= radius
    del radius

    if theta is not None:
        depth *= per_spot(np.sin(theta))
        drift_mm = np.interp(depth, det.layer_edges_x0(), det.layer_edges_mm())
        y_cells += (drift_mm / det.CELL_MM).astype(np.float32) * per_spot(1.0 / np.tan(theta))

    # Per-spot sampling weight: gamma with mean 1 and relative spread s such that the visible
    # sum fluctuates by STOCHASTIC_TERM / sqrt(E): s^2 / N = STOCHASTIC_TERM^2 / E.
    shape = energies / (STOCHASTIC_TERM**2 * counts)
    energy = rng.standard_gamma(per_spot(shape), dtype=np.float32)
    energy *= per_spot(energies / counts / shape)

    return _deposit(counts, x_cells, y_cells, depth, energy)


def _check_showers(
    energies: np.ndarray, theta: np.ndarray | float | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Energies as a flat float64 array and theta broadcast to it, both checked."""
    energies = np.asarray(energies, dtype=np.float64).reshape(-1)
    if energies.size and not (
        np.all(np.isfinite(energies))
        and energies.min() >= MIN_ENERGY_GEV
        and energies.max() <= MAX_ENERGY_GEV
    ):
        raise EvoganError(
            f"synthetic shower energies must lie in [{MIN_ENERGY_GEV:g}, {MAX_ENERGY_GEV:g}] GeV, "
            f"got {energies.min():g} to {energies.max():g}"
        )
    if theta is None:
        return energies, None
    theta = np.broadcast_to(np.asarray(theta, dtype=np.float64), (energies.size,))
    if energies.size and not np.all((theta > 0.1) & (theta < math.pi - 0.1)):
        raise EvoganError(
            f"theta must lie in (0.1, pi - 0.1) rad, got {theta.min():g} to "
            f"{theta.max():g} (a grazing shower leaves the window)"
        )
    return energies, theta


def _deposit(
    counts: np.ndarray,
    x_cells: np.ndarray,
    y_cells: np.ndarray,
    depth: np.ndarray,
    energy: np.ndarray,
) -> np.ndarray:
    """Sum the spots (``counts`` per shower) into cells, visible energy of their layer."""
    n = counts.size
    layer, visible = _layer_of(depth)
    energy *= visible
    ix = _cell_index(x_cells, det.CELLS_X)
    iy = _cell_index(y_cells, det.CELLS_Y)
    inside = (ix >= 0) & (ix < det.CELLS_X) & (iy >= 0) & (iy < det.CELLS_Y)
    inside &= layer < det.LAYERS
    flat = np.repeat(np.arange(n, dtype=np.int64) * _CELLS_PER_EVENT, counts)
    flat += (ix * det.CELLS_Y + iy) * det.LAYERS + layer
    flat[~inside] = n * _CELLS_PER_EVENT  # one overflow cell collects all leakage
    cells = np.zeros(n * _CELLS_PER_EVENT + 1, dtype=np.float32)
    np.add.at(cells, flat, energy)
    return cells[:-1].reshape(n, *det.SHAPE)


def _check_request(events: int, energy_range: tuple[float, float]) -> tuple[float, float]:
    if events < 1:
        raise EvoganError(f"the number of synthetic events must be at least 1, got {events}")
    low, high = (float(v) for v in energy_range)
    if not MIN_ENERGY_GEV <= low < high <= MAX_ENERGY_GEV:
        raise EvoganError(
            f"energy range must satisfy {MIN_ENERGY_GEV:g} <= LO < HI <= {MAX_ENERGY_GEV:g} GeV, "
            f"got {low:g} {high:g}"
        )
    return low, high


def synthesize(
    events: int, energy_range: tuple[float, float], seed: int, *, chunk_events: int = BLOCK_EVENTS
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(ecal, energy, theta)`` chunks of at most ``chunk_events`` showers.

    Events are made in fixed blocks of ``BLOCK_EVENTS``, block b drawing from the b-th child of
    ``SeedSequence(seed)``, so the showers depend only on the seed and their position: not on
    the chunk size, and the first N events of a longer request are the same N showers.
    """
    low, high = _check_request(events, energy_range)
    if chunk_events < 1:
        raise EvoganError(f"chunk_events must be at least 1, got {chunk_events}")
    count = -(-events // BLOCK_EVENTS)
    ecal_parts: list[np.ndarray] = []
    energy_parts: list[np.ndarray] = []
    buffered = 0
    for index in range(count):
        # SeedSequence(seed).spawn(count)[index], made when needed: constant memory for any count
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))
        energy = rng.uniform(low, high, BLOCK_EVENTS)
        take = min(BLOCK_EVENTS, events - index * BLOCK_EVENTS)
        ecal_parts.append(generate_showers(energy, rng)[:take])
        energy_parts.append(energy[:take].astype(np.float32))
        buffered += take
        last = index == count - 1
        while buffered >= chunk_events or (last and buffered):
            ecal_all, energy_all = _join(ecal_parts), _join(energy_parts)
            size = min(chunk_events, buffered)
            yield ecal_all[:size], energy_all[:size], np.full(size, math.pi / 2, np.float32)
            ecal_parts, energy_parts = [ecal_all[size:]], [energy_all[size:]]
            buffered -= size


def _join(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def write_synthetic(
    path: Path | str,
    events: int,
    energy_range: tuple[float, float] = (2.0, 500.0),
    seed: int = 0,
    *,
    progress: bool = False,
) -> Path:
    """Generate ``events`` showers into one HDF5 file (atomically) and return its path; a
    file system without room for them is refused first."""
    low, high = _check_request(events, energy_range)
    require_disk(
        events * FILE_BYTES_PER_EVENT,
        Path(path),
        f"writing {events:,} synthetic showers ({FILE_BYTES_PER_EVENT} bytes or more each)",
        "ask for fewer showers, or write to a file system with room",
    )
    attrs = {
        "generator": "gflash-synthetic",
        "seed": int(seed),
        "energy_range_gev": np.array([low, high]),
        "spot_scale": SPOT_SCALE,
        "theta_rad": math.pi / 2,
    }
    with ShowerWriter(path, det.SHAPE, attrs=attrs) as writer:
        chunks = synthesize(events, (low, high), seed)
        if not progress:
            for ecal, energy, theta in chunks:
                writer.append(ecal, energy, theta)
        else:
            from rich.console import Console
            from rich.progress import Progress

            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("synthetic showers", total=events)
                for ecal, energy, theta in chunks:
                    writer.append(ecal, energy, theta)
                    bar.advance(task, len(energy))
    return writer.path

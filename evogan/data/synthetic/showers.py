"""Synthetic electromagnetic showers in any detector, from the GFLASH parametrisation.

Why it exists: public calorimeter data (the 3DGAN files, the CaloChallenge datasets) cannot be
downloaded on our machines, yet every workflow (regressor GA, GAN training, architecture search,
tests) needs realistic showers in the detector at hand. GFLASH (Grindhammer-Peters,
hep-ex/0001020) gives per-shower longitudinal fluctuations, a two-component radial profile and
sampling fluctuations through discrete energy spots (:mod:`.spots`); summing the spots into the
detector's cells (:mod:`.deposit`) reproduces the sparsity and the sampling fraction of the data.

Model choices (all vectorised over every spot of a batch of showers):

- Longitudinal: gamma profile with correlated Gaussian fluctuations of ln T and ln alpha. Means
  are the homogeneous ones of the absorber (for tungsten they reproduce the reference
  T = 4.7 X0 at 2 GeV ... 10.2 X0 at 500 GeV); widths and correlation are the
  sampling-calorimeter ones. Depth is in X0 of the absorber, layers from its thickness per layer.
- Spots: ``SPOT_SCALE`` times the GFLASH count N = 10.3 ln(Z) E^0.959, each carrying E/N times a
  gamma-distributed weight whose spread keeps the sampling term at 0.11/sqrt(E) whatever the
  spot count (half the spots buys 2x speed without losing the sampling fluctuations). In the
  CLIC ECAL the sum also fluctuates by ~6% from 50 GeV up because the shower depth fluctuates
  (about 1 X0) across the boundary between thin and thick layers, which sample differently.
- Radial: core/tail mixture sampled by inversion, r = R sqrt(u / (1 - u)) in Moliere radii of
  the absorber, uniform azimuth.
- Sampling: see :mod:`.deposit` (the CLIC ECAL's calibrated thin/thick scheme, the nominal
  sampling fraction elsewhere).

The model is electromagnetic: for a hadron data set (CaloChallenge dataset 1 pions) it gives
electron-like showers in that binning, useful to exercise the pipeline, not as physics.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from evogan.data.synthetic.deposit import deposit, layer_and_visible, transverse_unit_mm
from evogan.data.synthetic.spots import SPOT_SCALE, longitudinal, radial_radius, spot_counts
from evogan.data.writer import ShowerWriter
from evogan.detectors.detector import Detector
from evogan.detectors.shipped import detector_for
from evogan.errors import EvoganError
from evogan.resources import require_disk

STOCHASTIC_TERM = 0.11
MIN_ENERGY_GEV = 1.0
MAX_ENERGY_GEV = 1000.0  # bounds the spot arrays of a block (~1 GB at the top)
BLOCK_EVENTS = 64  # events per independent random stream: fixes the output for a seed
FILE_BYTES_PER_EVENT = 1000  # compressed, at least: 1.5 kB measured at 1 GeV, 4.4 kB at 2-500


def generate_showers(
    energies: np.ndarray,
    rng: np.random.Generator,
    *,
    theta: np.ndarray | float | None = None,
    detector: Detector | None = None,
) -> np.ndarray:
    """Visible energy in GeV of one shower per primary energy in ``detector`` (default the CLIC
    ECAL): its grid form where it has one ((n, 51, 51, 25) for the CLIC ECAL, (n, radial,
    angular, layer) for a regular cylinder), else flat (n, voxels).

    ``theta`` is the polar angle of incidence in radians (default pi/2, perpendicular). An
    inclined shower keeps its shape along its axis; its depth is projected on the layer normal
    and the axis drifts along y by (geometric depth) x cot(theta) from the centre.
    All spots of the batch are held at once (about 1 MB per 500 GeV shower): pass blocks of
    tens of showers, as :func:`synthesize` does.
    """
    detector = detector_for() if detector is None else detector
    materials, geometry = detector.materials, detector.geometry
    energies, theta = _check_showers(energies, theta)
    alpha, t_max = longitudinal(energies, materials, rng)
    counts = spot_counts(energies, materials.z)

    def per_spot(values: np.ndarray) -> np.ndarray:
        return np.repeat(np.asarray(values, dtype=np.float32), counts)

    # Depth along the axis, in X0: gamma(alpha) / beta with beta = (alpha - 1) / T.
    depth = rng.standard_gamma(per_spot(alpha), dtype=np.float32)
    depth *= per_spot(t_max / (alpha - 1.0))
    tau = depth * per_spot(1.0 / t_max)
    radius = radial_radius(tau, np.log(energies), counts, materials.z, rng)
    del tau
    unit_mm = transverse_unit_mm(geometry)
    radius *= np.float32(materials.moliere_mm / unit_mm)  # in transverse units from here on
    phi = rng.random(len(depth), dtype=np.float32)
    phi *= np.float32(2.0 * math.pi)
    x = radius * np.cos(phi)
    y = np.sin(phi, out=phi)
    y *= radius
    del radius

    if theta is not None:
        depth *= per_spot(np.sin(theta))
        drift_mm = np.interp(depth, materials.layer_edges_x0(), materials.layer_edges_mm())
        y += (drift_mm / unit_mm).astype(np.float32) * per_spot(1.0 / np.tan(theta))

    # Per-spot sampling weight: gamma with mean 1 and relative spread s such that the visible
    # sum fluctuates by STOCHASTIC_TERM / sqrt(E): s^2 / N = STOCHASTIC_TERM^2 / E.
    shape = energies / (STOCHASTIC_TERM**2 * counts)
    energy = rng.standard_gamma(per_spot(shape), dtype=np.float32)
    energy *= per_spot(energies / counts / shape)

    layer, visible = layer_and_visible(depth, materials)
    energy *= visible
    return deposit(geometry, counts, x, y, layer, energy)


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
    events: int,
    energy_range: tuple[float, float],
    seed: int,
    *,
    chunk_events: int = BLOCK_EVENTS,
    detector: Detector | None = None,
    log_uniform: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(showers, energy, theta)`` chunks of at most ``chunk_events`` showers in
    ``detector`` (default the CLIC ECAL), energies drawn uniformly in ``energy_range`` or, with
    ``log_uniform``, uniformly in its logarithm (as CaloChallenge datasets 2 and 3).

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
        if log_uniform:
            energy = np.exp(rng.uniform(math.log(low), math.log(high), BLOCK_EVENTS))
        else:
            energy = rng.uniform(low, high, BLOCK_EVENTS)
        take = min(BLOCK_EVENTS, events - index * BLOCK_EVENTS)
        ecal_parts.append(generate_showers(energy, rng, detector=detector)[:take])
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
    detector: Detector | None = None,
    log_uniform: bool = False,
    progress: bool = False,
) -> Path:
    """Generate ``events`` showers in ``detector`` (default the CLIC ECAL) into one file in
    that detector's format (atomically) and return its path; a file system without room for
    them is refused first."""
    detector = detector_for() if detector is None else detector
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
    if log_uniform:
        attrs["energy_sampling"] = "log-uniform"
    with ShowerWriter(path, detector.shower_shape, detector=detector, attrs=attrs) as writer:
        chunks = synthesize(events, (low, high), seed, detector=detector, log_uniform=log_uniform)
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

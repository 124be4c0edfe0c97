"""Tiny shower files in each public 3DGAN layout, written directly with h5py.

Event ``i`` of a file made with ``first=f`` has primary energy ``10 + f + i`` GeV, so a test
can recover which events a reader returned from the energies alone. ``cells_gev`` gives the
expected cells in GeV (before the reader's threshold) for the same arguments.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

SHAPES = {
    "fixed25": (25, 25, 25),
    "raw51": (51, 51, 25),
    "processed51": (51, 51, 25),
    "evogan": (51, 51, 25),
}
# Stored value = GeV x STORED_PER_GEV.
STORED_PER_GEV = {"fixed25": 1.0, "raw51": 50.0, "processed51": 50.0, "evogan": 1.0}


def cells_gev(layout: str, events: int, first: int = 0) -> np.ndarray:
    """Sparse non-negative cells (GeV), including some below the 1e-6 GeV threshold."""
    shape = SHAPES[layout]
    cells = np.zeros((events, *shape), dtype=np.float32)
    for i in range(events):
        rng = np.random.default_rng(1000 + first + i)
        flat = cells[i].reshape(-1)
        hit = rng.choice(flat.size, 300, replace=False)
        flat[hit] = rng.exponential(0.05, 300).astype(np.float32)
        flat[hit[:20]] = 5e-7  # below the default threshold
    return cells


def energies(events: int, first: int = 0) -> np.ndarray:
    return (10.0 + first + np.arange(events)).astype(np.float32)


def write_layout(
    path: Path,
    layout: str,
    events: int = 12,
    *,
    first: int = 0,
    chunks: tuple[int, ...] | None = None,
    theta_degrees: bool = False,
) -> Path:
    """Write ``events`` showers to ``path`` with the keys, shapes and units of ``layout``."""
    cells = cells_gev(layout, events, first) * np.float32(STORED_PER_GEV[layout])
    energy = energies(events, first)
    theta = np.linspace(1.2, 1.9, events).astype(np.float32)
    eta = -np.log(np.tan(theta / 2))
    if theta_degrees:
        theta = np.degrees(theta).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("ECAL", data=cells, chunks=chunks)
        if layout == "fixed25":
            f["HCAL"] = np.zeros((events, 5, 5, 60), dtype=np.float32)
            target = np.zeros((events, 2), dtype=np.float32)
            target[:, 0] = 11.0  # pdg id column; the energy is column 1
            target[:, 1] = energy
            f["target"] = target
            return path
        f["energy"] = energy
        f["theta"] = theta
        f["eta"] = eta
        if layout == "raw51":
            for key in ("ECAL_E", "HCAL_E", "phi", "pdgID", "recoEta", "recoPhi", "recoTheta"):
                f[key] = np.zeros(events, dtype=np.float32)
            f["HCAL"] = np.zeros((events, 11, 11, 60), dtype=np.float32)
        elif layout == "processed51":
            f["sum"] = cells.reshape(events, -1).sum(axis=1)
            f["mtheta"] = theta.astype(np.float64)
        else:
            f["sum"] = cells.reshape(events, -1).sum(axis=1)
            f.attrs["ecal_units"] = "GeV"
    return path


def expected_cells(layout: str, events: int, first: int = 0, threshold: float = 1e-6) -> np.ndarray:
    """What the reader must return: stored cells scaled to GeV, below-threshold cells zeroed."""
    stored = cells_gev(layout, events, first) * np.float32(STORED_PER_GEV[layout])
    gev = stored * np.float32(1.0 / STORED_PER_GEV[layout])
    gev[gev < threshold] = 0
    return gev

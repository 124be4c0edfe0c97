"""Which detector a shower file comes from, checked against ``data.detector``, and whether its
energies look like the unit they are read in.

A file evogan writes records its detector in the HDF5 attribute ``detector``. Other files are
matched by their cells: a 3DGAN ECAL window by its shape (51x51x25 is ``clic-ecal``, 25x25x25
``clic-ecal-25``), a CaloChallenge file by its row length (368 voxels is dataset 1's photons,
533 its pions, 6,480 dataset 2, 40,500 dataset 3). ``data.detector``, when given, must agree.

Units: a CaloChallenge file holds MeV, a 3DGAN one GeV, and nothing in either says so, so a file
in the other unit would be read 1000x off without a word. :func:`warn_unlikely_units` says so
once per file when, in GeV, the median primary energy is above 10 TeV (MeV read as GeV) or below
100 MeV (GeV read as MeV), or (CaloChallenge files, from the first 64 showers) the median ratio
of the cell sum to the primary energy is above 20 or below 1e-4: a calorimeter sees at most
about all of the energy (ratio 1), and a sampling fraction below 1e-4 is unheard of, while the
usual sampling fractions (0.02 CLIC, 0.03-1 CaloChallenge) are a factor 1000 from both limits.
"""

from __future__ import annotations

import logging

import h5py
import numpy as np

from evogan.data.layouts import Layout
from evogan.detectors import DETECTOR_NAMES, Detector, detector_for
from evogan.errors import ConfigError, DataError

MAX_MEDIAN_ENERGY_GEV = 1.0e4
MIN_MEDIAN_ENERGY_GEV = 0.1
MAX_CELL_FRACTION = 20.0
MIN_CELL_FRACTION = 1.0e-4
UNIT_SAMPLE = 64

_log = logging.getLogger("evogan.data")
_warned: set[str] = set()


def file_detector(
    f: h5py.File, path: object, layout: Layout, configured: Detector | None
) -> Detector | None:
    """The detector of an open file in ``layout``, checked against ``configured`` (None: take
    the file's). None only for a Cartesian window no shipped detector has and none recorded."""
    recorded = _recorded(f, path)
    if configured is not None and recorded is not None and recorded.name != configured.name:
        raise DataError(
            f"{path} records detector {recorded.name} but data.detector is {configured.name}; "
            f"set data.detector: {recorded.name}, or leave the file out"
        )
    cells = f[layout.ecal_key]
    if layout.flat:
        return _flat_detector(path, int(cells.shape[1]), recorded or configured)
    shape = tuple(int(n) for n in cells.shape[1:])
    if configured is not None and configured.geometry.kind != "cartesian":
        raise DataError(
            f"{path} holds 3DGAN ECAL cells {'x'.join(map(str, shape))}, but data.detector is "
            f"{configured.describe()}; set data.detector to a Cartesian detector"
        )
    if recorded is not None:
        if recorded.grid_shape != shape:
            raise DataError(
                f"{path}: ECAL cells {'x'.join(map(str, shape))} do not fit the recorded "
                f"detector {recorded.describe()}"
            )
        return recorded
    return cartesian_detector(shape)


def check_same_detector(found: Detector | None, reference: Detector | None, what: object) -> None:
    """Refuse showers of ``what`` whose known detector is not the reference's."""
    if found is not None and reference is not None and found.name != reference.name:
        raise DataError(
            f"{what} holds showers of detector {found.describe()}, the reference "
            f"{reference.describe()}; compare showers of one detector"
        )


def cartesian_detector(shape: tuple[int, ...]) -> Detector | None:
    """The shipped Cartesian detector whose grid is ``shape`` (51x51x25: the CLIC ECAL)."""
    return _shipped(lambda d: d.geometry.kind == "cartesian" and d.grid_shape == tuple(shape))


def _recorded(f: h5py.File, path: object) -> Detector | None:
    value = f.attrs.get("detector")
    if value is None:
        return None
    name = value.decode() if isinstance(value, bytes) else str(value)
    try:
        return detector_for(name)
    except ConfigError as exc:
        raise DataError(
            f"{path} records detector {name!r}, which is not usable here: {exc}"
        ) from None


def _flat_detector(path: object, voxels: int, expected: Detector | None) -> Detector:
    """A CaloChallenge file's detector: the expected one if its voxel count matches, or the
    shipped one with this many voxels."""
    match = _shipped(lambda d: d.voxels == voxels and d.geometry.kind == "cylindrical")
    if expected is None:
        if match is None:
            known = ", ".join(f"{d.name} {d.voxels}" for d in map(detector_for, DETECTOR_NAMES))
            raise DataError(
                f"{path}: showers rows of {voxels} voxels match no shipped detector ({known}); "
                "set data.detector to the binning XML of the file"
            )
        return match
    if expected.voxels != voxels:
        hint = f"; {match.name} has {voxels}, set data.detector: {match.name}" if match else ""
        raise DataError(
            f"{path}: showers rows hold {voxels} voxels but detector {expected.name} has "
            f"{expected.voxels}{hint}"
        )
    return expected


def _shipped(test) -> Detector | None:
    for name in DETECTOR_NAMES:
        detector = detector_for(name)
        if test(detector):
            return detector
    return None


def warn_unlikely_units(f: h5py.File, path: object, layout: Layout) -> None:
    """Warn once per file when its energies look 1000x off in the unit they are read in (the
    rule is in the module docstring)."""
    energy = np.asarray(f[layout.energy_key][...], dtype=np.float64)
    if layout.energy_column is not None:
        energy = energy[:, layout.energy_column]
    energy = energy.reshape(-1) * layout.energy_scale
    good = energy[np.isfinite(energy) & (energy > 0)]
    if not good.size:
        return  # the reader refuses such energies with the event named
    median = float(np.median(good))
    unit = "MeV" if layout.energy_scale != 1.0 else "GeV"
    if median > MAX_MEDIAN_ENERGY_GEV:
        _warn(
            path,
            f"the median primary energy is {median:.4g} GeV, above 10 TeV: the file's energies "
            f"look 1000x too large for {unit} (MeV read as GeV?)",
        )
    elif median < MIN_MEDIAN_ENERGY_GEV:
        _warn(
            path,
            f"the median primary energy is {median:.4g} GeV, below 100 MeV: the file's "
            f"energies look 1000x too small for {unit} (GeV read as MeV?)",
        )
    if layout.flat:
        _check_cell_fraction(f, path, layout, energy)


def _check_cell_fraction(f: h5py.File, path: object, layout: Layout, energy: np.ndarray) -> None:
    n = min(UNIT_SAMPLE, len(energy))
    sums = np.asarray(f[layout.ecal_key][:n], dtype=np.float64).sum(axis=1) * layout.ecal_scale
    ok = np.isfinite(sums) & (sums > 0) & np.isfinite(energy[:n]) & (energy[:n] > 0)
    if not ok.any():
        return
    ratio = float(np.median(sums[ok] / energy[:n][ok]))
    if ratio > MAX_CELL_FRACTION:
        _warn(
            path,
            f"the cells sum to {ratio:.4g}x the primary energy (median of the first {n} "
            "showers): the cells look 1000x too large for the energies; set data.ecal_scale",
        )
    elif ratio < MIN_CELL_FRACTION:
        _warn(
            path,
            f"the cells sum to {ratio:.3g}x the primary energy (median of the first {n} "
            "showers): the cells look 1000x too small for the energies; set data.ecal_scale",
        )


def _warn(path: object, message: str) -> None:
    line = f"{path}: {message}"
    if line not in _warned:
        _warned.add(line)
        _log.warning(line)

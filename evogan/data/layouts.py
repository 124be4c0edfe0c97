"""The public 3DGAN HDF5 layouts (docs/explanation/physics.md section 1), the CaloChallenge one and
evogan's.

``fixed25`` (a), ``raw51`` (b) and ``processed51`` (c) are the public files; ``evogan`` is what
evogan writes for a Cartesian detector (synthetic sets, GAN samples): any cell shape,
``ecal_units`` declared. ``calochallenge`` is the Fast Calorimeter Simulation Challenge's:
``showers`` (N, voxels) and ``incident_energies`` (N, 1), both in MeV, which evogan also writes
for cylindrical detectors (with a ``detector`` attribute).

A file's layout is detected from its keys, the ECAL shape and the ``ecal_units`` attribute,
then resolved into a :class:`Layout`: which dataset holds the cells, which holds the primary
energy (and which column of it), where the angle is, and the factor that turns stored cell
values into GeV. Users with renamed keys or another unit override any of these from the
``data`` config section; detection never guesses silently, it fails with the keys it found.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import h5py
import numpy as np

from evogan.detectors import Detector
from evogan.errors import DataError

# Stored cell value x scale = GeV. Layouts (b) and (c) store 50 x GeV.
RAW_ECAL_SCALE = 1.0 / 50.0
# Units a file may declare in its ``ecal_units`` attribute, as a factor to GeV.
UNITS_TO_GEV = {"GeV": 1.0, "MeV": 1.0e-3, "keV": 1.0e-6}


@dataclass(frozen=True)
class Layout:
    """How one file's datasets map onto showers (cells in GeV, energy in GeV, theta in rad)."""

    name: str
    ecal_key: str
    energy_key: str
    energy_column: int | None  # layout (a): energy is ``target[:, 1]``
    theta_key: str | None
    ecal_scale: float  # stored cell value x ecal_scale = GeV
    theta_scale: float = 1.0  # stored angle x theta_scale = radians
    energy_scale: float = 1.0  # stored primary energy x energy_scale = GeV

    @property
    def flat(self) -> bool:
        """Cells stored one row of voxels per shower (the CaloChallenge layout)."""
        return self.name == "calochallenge"


# Defaults per layout name; the ECAL scale may be replaced by the file's ``ecal_units``.
_DEFAULTS = {
    "fixed25": Layout("fixed25", "ECAL", "target", 1, None, 1.0),
    "raw51": Layout("raw51", "ECAL", "energy", None, "theta", RAW_ECAL_SCALE),
    "processed51": Layout("processed51", "ECAL", "energy", None, "theta", RAW_ECAL_SCALE),
    "evogan": Layout("evogan", "ECAL", "energy", None, "theta", 1.0),
    "calochallenge": Layout(
        "calochallenge", "showers", "incident_energies", 0, None, 1.0e-3, energy_scale=1.0e-3
    ),
}
CALOCHALLENGE_KEYS = ("showers", "incident_energies")


def written_layout(detector: Detector) -> Layout:
    """The layout evogan writes showers of ``detector`` in: the CaloChallenge one for a
    cylindrical detector (the challenge's evaluation reads it), its own for a Cartesian one."""
    return _DEFAULTS["calochallenge" if detector.geometry.kind == "cylindrical" else "evogan"]


def particle_from_name(path: str | Path) -> str:
    """Particle type from the file-name prefix (``EleEscan_1_2.h5`` -> ``Ele``, ``ChPiEscan``
    -> ``ChPi``, ``Ele_VarAngleMeas_100_200_000.h5`` -> ``Ele``), else ``""``."""
    match = re.match(r"([A-Z][A-Za-z0-9]*?)(?:Escan|_)", Path(path).name)
    return match.group(1) if match else ""


def detect_layout(f: h5py.File, ecal: h5py.Dataset) -> str:
    """Name of the layout of an open file, from ``ecal_units``, the ECAL shape and the keys.

    Files written by evogan (synthetic sets, GAN samples) declare ``ecal_units`` and may have
    any cell shape; the public layouts are told apart by shape, then by their extra keys.
    """
    if "ecal_units" in f.attrs:
        return "evogan"
    shape = tuple(ecal.shape[1:])
    if shape == (25, 25, 25):
        return "fixed25"
    if shape == (51, 51, 25):
        return "processed51" if "sum" in f or "mtheta" in f else "raw51"
    raise DataError(
        f"{f.filename}: cannot detect the layout from ECAL shape {ecal.shape}; expected "
        "(N,25,25,25) or (N,51,51,25); set data.layout (and data.ecal_scale) for other windows"
    )


def resolve_layout(
    f: h5py.File,
    layout: str = "auto",
    *,
    ecal_key: str | None = None,
    energy_key: str | None = None,
    ecal_scale: float | None = None,
) -> Layout:
    """The layout of an open file with the user's overrides applied and every key checked.

    Precedence of the cell scale: ``ecal_scale`` override, then the file's ``ecal_units``
    attribute, then the layout's default (x1/50 for layouts b and c, MeV for CaloChallenge).
    """
    if layout != "auto" and layout not in _DEFAULTS:
        raise DataError(f"layout {layout!r} is not known; allowed: auto, {', '.join(_DEFAULTS)}")
    if layout == "calochallenge" or (
        layout == "auto" and ecal_key is None and all(key in f for key in CALOCHALLENGE_KEYS)
    ):
        return _calochallenge(f, ecal_key, energy_key, ecal_scale)
    ecal = _dataset(f, ecal_key or "ECAL", "data.ecal_key")
    if ecal.ndim != 4:
        raise DataError(
            f"{f.filename}: {ecal.name.lstrip('/')} must be 4-D (events, x, y, depth), "
            f"got shape {ecal.shape}"
        )
    base = _DEFAULTS[detect_layout(f, ecal) if layout == "auto" else layout]
    energy_name = energy_key or base.energy_key
    energy = _dataset(f, energy_name, "data.energy_key")
    column = base.energy_column if energy_key is None else None
    if energy.ndim == 2 and column is None and energy_name == "target":
        column = 1
    theta_key = base.theta_key if base.theta_key and base.theta_key in f else None
    scale = ecal_scale if ecal_scale is not None else _declared_scale(f, base.ecal_scale)
    resolved = Layout(
        base.name, ecal.name.lstrip("/"), energy_name, column, theta_key, float(scale)
    )
    return replace(resolved, theta_scale=_theta_scale(f, resolved))


def _calochallenge(
    f: h5py.File, ecal_key: str | None, energy_key: str | None, ecal_scale: float | None
) -> Layout:
    """``showers`` (N, voxels) and ``incident_energies`` (N, 1) or (N,), MeV unless overridden;
    the detector's own unit replaces the MeV once it is known (:mod:`evogan.data.file_detector`)."""
    base = _DEFAULTS["calochallenge"]
    showers = _dataset(f, ecal_key or base.ecal_key, "data.ecal_key")
    if showers.ndim != 2:
        raise DataError(
            f"{f.filename}: {showers.name.lstrip('/')} must be 2-D (events, voxels) in the "
            f"CaloChallenge layout, got shape {showers.shape}"
        )
    energy_name = energy_key or base.energy_key
    energy = _dataset(f, energy_name, "data.energy_key")
    column = 0 if energy.ndim == 2 else None
    scale = base.ecal_scale if ecal_scale is None else float(ecal_scale)
    return replace(
        base, ecal_key=showers.name.lstrip("/"), energy_key=energy_name, energy_column=column,
        ecal_scale=scale,
    )  # fmt: skip


def _dataset(f: h5py.File, key: str, option: str) -> h5py.Dataset:
    node = f.get(key)
    if not isinstance(node, h5py.Dataset):
        _refuse_weights(f)
        raise DataError(
            f"{f.filename}: missing dataset {key!r}; keys present: {_list(f.keys())}; "
            f"not a 3DGAN or CaloChallenge shower file, or set {option} to the right key"
        )
    return node


def _refuse_weights(f: h5py.File) -> None:
    """A network file given where showers belong (a generator as a reference, say) is named
    for what it is, with where it goes instead."""
    if "meta" not in f.attrs:
        return
    from evogan.store.weights import FORMAT

    if f.attrs.get("format") != FORMAT:
        return
    try:
        kind = json.loads(f.attrs["meta"]).get("kind") or "network"
    except (TypeError, ValueError, AttributeError):
        kind = "network"
    where = ""
    if kind == "gan3d-generator":
        where = " (a generator goes to evogan generate, or as evogan validate's first argument)"
    raise DataError(
        f"{f.filename} holds evogan {kind} weights, not showers; pass shower files here{where}"
    )


def _declared_scale(f: h5py.File, default: float) -> float:
    units = f.attrs.get("ecal_units")
    if units is None:
        return default
    units = units.decode() if isinstance(units, bytes) else str(units)
    if units not in UNITS_TO_GEV:
        raise DataError(
            f"{f.filename}: ecal_units = {units!r} is not known; allowed: "
            f"{', '.join(UNITS_TO_GEV)}, or set data.ecal_scale"
        )
    return UNITS_TO_GEV[units]


def _theta_scale(f: h5py.File, layout: Layout) -> float:
    """Radians per stored unit: angles larger than 2 pi can only be degrees."""
    if layout.theta_key is None:
        return 1.0
    theta = np.asarray(f[layout.theta_key][...], dtype=np.float64).reshape(-1)
    finite = theta[np.isfinite(theta)]
    if finite.size and np.abs(finite).max() > 2 * math.pi:
        return math.pi / 180.0
    return 1.0


def _list(keys) -> str:
    names = sorted(keys)
    return ", ".join(names) if names else "(none)"

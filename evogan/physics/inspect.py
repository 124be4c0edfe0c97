"""``evogan data inspect``: a physics summary of one shower file, streamed in chunks.

Energy bins: the group's reference edges [2, 10, 50, 100, 200, 300, 400, 500] GeV that fall
strictly inside the file's energy range, closed by the file's minimum and maximum energy (a
2-500 GeV file gets exactly the reference bins). When fewer than two reference edges fall
inside (e.g. a 100-200 GeV file), six equal-width bins span the range instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evogan.data.hdf5 import ShowerFile
from evogan.data.reader import ShowerDataset, open_file
from evogan.detectors import Detector
from evogan.physics import observables as obs
from evogan.physics.features import depth_centres
from evogan.physics.profiles import ProfileSums
from evogan.progress import progress

REFERENCE_EDGES_GEV = (2.0, 10.0, 50.0, 100.0, 200.0, 300.0, 400.0, 500.0)
FALLBACK_BINS = 6
# Sampling fraction vs primary energy from the group's Geant4 fit (docs/explanation/physics.md
# section 1).
REFERENCE_SAMPLING_FRACTION = {
    2.0: 0.0220,
    10.0: 0.0220,
    50.0: 0.0209,
    100.0: 0.0202,
    200.0: 0.0193,
    400.0: 0.0184,
    500.0: 0.0181,
}
INSPECT_CHUNK_EVENTS = 500


@dataclass
class Scan:
    """Per-event observables and per-bin mean profiles of one streamed file."""

    source: ShowerFile
    dataset: ShowerDataset
    edges: np.ndarray
    energy: np.ndarray
    sampling_fraction: np.ndarray
    shower_max: np.ndarray
    empty_fraction: np.ndarray
    profiles: dict[str, np.ndarray] = field(default_factory=dict)  # axis -> (bins, size) means
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0))
    depth_unit: str = "x0"  # of ``shower_max``: "x0" (the detector's layers) or "layer"
    detector_profiles: dict[str, np.ndarray] | None = None  # a cylinder's layer/radial profiles


def energy_edges(energy_min: float, energy_max: float) -> np.ndarray:
    """Bin edges for a file spanning ``[energy_min, energy_max]`` GeV (module docstring)."""
    if not energy_max > energy_min:
        return np.array([energy_min * 0.99, energy_max * 1.01])
    inside = [e for e in REFERENCE_EDGES_GEV if energy_min < e < energy_max]
    if len(inside) >= 2:
        return np.array([energy_min, *inside, energy_max])
    return np.linspace(energy_min, energy_max, FALLBACK_BINS + 1)


def scan_file(path: str | Path, **read: Any) -> Scan:
    """Stream ``path`` once and collect everything the report and the figures need; ``read``
    are :func:`~evogan.data.reader.open_file`'s settings (``detector`` among them). Shower
    maxima are in X0 of the file's detector's absorber (the CLIC ECAL's where the file names
    none) when the file has its layers, in layers otherwise."""
    source = open_file(path, **read)
    dataset = ShowerDataset.from_files([source])
    detector = dataset.detector
    cylinder = detector is not None and detector.geometry.kind == "cylindrical"
    energy = dataset.energies()
    edges = energy_edges(float(energy.min()), float(energy.max()))
    layers = detector.layers if cylinder else dataset.shape[2]
    depth, unit = depth_centres(layers, detector)
    if unit == "layer":
        depth = depth + 0.5
    nbins = len(edges) - 1
    shape = (1, 1, layers) if cylinder else dataset.shape
    sums = {axis: np.zeros((nbins, n)) for axis, n in zip("xyz", shape, strict=True)}
    parts: dict[str, list[np.ndarray]] = {"sf": [], "max": [], "empty": []}
    detector_sums = ProfileSums(detector) if cylinder else None
    with progress("inspect", total=len(dataset), unit="events") as task:
        for chunk in dataset.iter_chunks(INSPECT_CHUNK_EVENTS):
            cells = chunk.ecal
            parts["empty"].append(obs.empty_cell_fraction(cells.reshape(len(cells), -1, 1, 1)))
            if detector_sums is not None:  # per-layer sums stand in for the cells
                flat = cells if cells.ndim == 2 else detector.geometry.to_flat(cells)
                detector_sums.add(flat)
                cells = (flat @ detector_sums.layer)[:, None, None, :]
            parts["sf"].append(obs.sampling_fraction(cells, chunk.energy))
            parts["max"].append(obs.shower_max_depth_x0(cells, depth))
            bins = _bin_of(chunk.energy, edges)
            for axis in "xyz":
                np.add.at(sums[axis], bins, obs.profile(cells, axis))
            task.advance(len(chunk.energy))
    counts = np.bincount(_bin_of(energy, edges), minlength=nbins)
    with np.errstate(divide="ignore", invalid="ignore"):
        profiles = {axis: s / counts[:, None] for axis, s in sums.items()}
    if detector_sums is not None:
        profiles = {"z": profiles["z"]}
    return Scan(
        source,
        dataset,
        edges,
        energy,
        np.concatenate(parts["sf"]),
        np.concatenate(parts["max"]),
        np.concatenate(parts["empty"]),
        profiles,
        counts,
        unit,
        detector_sums.result() if detector_sums is not None else None,
    )


def inspect_file(path: str | Path, **read: Any) -> dict[str, Any]:
    """The JSON-ready summary of ``path``: see :func:`summarise`."""
    return summarise(scan_file(path, **read))


def summarise(scan: Scan) -> dict[str, Any]:
    """The JSON-ready summary of a scanned file: counts, energy range, sampling fraction and
    shower maximum per energy bin, sparsity."""
    return {
        "file": str(scan.source.path),
        "layout": scan.dataset.layout,
        "particle": scan.source.particle,
        "shape": list(scan.dataset.shape),
        "ecal_scale": scan.source.layout.ecal_scale,
        "events": len(scan.dataset),
        "energy_min": float(scan.energy.min()),
        "energy_max": float(scan.energy.max()),
        "sampling_fraction": _binned(scan.sampling_fraction, scan.energy, scan.edges),
        "shower_max": _binned(scan.shower_max, scan.energy, scan.edges),
        "shower_max_unit": "X0" if scan.depth_unit == "x0" else "layers",
        "empty_cell_fraction": float(scan.empty_fraction.mean()),
        "nominal_sampling_fraction": _nominal(scan.dataset.detector),
        "made_by": made_by(scan.source.path),
    }


def made_by(path: Path) -> dict[str, Any] | None:
    """What made an evogan-written file (its attributes: the synthetic generator and its seed,
    or the GAN generator file, spec, precision, seed and conditions source); None for others."""
    import h5py

    with h5py.File(path, "r") as handle:
        attrs = dict(handle.attrs)
    if attrs.get("producer") != "evogan" or "generator" not in attrs:
        return None
    keys = ("generator", "spec", "precision", "seed", "conditions_from")
    return {key: _plain(attrs[key]) for key in keys if key in attrs}


def _plain(value: Any) -> Any:
    """An HDF5 attribute as JSON: numpy scalars and arrays to Python numbers and lists."""
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else value


def format_report(report: dict[str, Any]) -> str:
    """A readable text version of :func:`inspect_file`'s report."""
    shape = "x".join(map(str, report["shape"]))
    lines = [
        f"file              {report['file']}",
        f"layout            {report['layout']} (cells {shape}, stored x {report['ecal_scale']:g}"
        f" = GeV{', particle ' + report['particle'] if report.get('particle') else ''})",
        f"events            {report['events']}",
        f"primary energy    {report['energy_min']:.2f} - {report['energy_max']:.2f} GeV",
        f"empty cells       {100 * report['empty_cell_fraction']:.2f} %",
        *_made_by_lines(report.get("made_by")),
        "",
        f"{'energy bin (GeV)':>18}  {'events':>7}  {'sampling fraction':>19}  "
        f"{'ref':>6}  {'shower max (' + report.get('shower_max_unit', 'X0') + ')':>16}",
    ]
    nominal = report.get("nominal_sampling_fraction")
    for sf, smax in zip(report["sampling_fraction"], report["shower_max"], strict=True):
        span = f"{sf['energy_lo']:.1f} - {sf['energy_hi']:.1f}"
        ref = nominal or reference_sampling_fraction(0.5 * (sf["energy_lo"] + sf["energy_hi"]))
        lines.append(
            f"{span:>18}  {sf['count']:>7}  {_pm(sf, 4):>19}  {ref:>6.4f}  {_pm(smax, 2):>16}"
        )
    lines.append(
        "(ref: the detector's nominal sampling fraction, docs/explanation/physics.md section 7)"
        if nominal
        else "(ref: Geant4 sampling fraction at the bin centre, interpolated)"
    )
    return "\n".join(lines)


def _made_by_lines(made: dict[str, Any] | None) -> list[str]:
    if not made:
        return []
    details = [made[key] for key in ("spec", "precision") if key in made]
    details += [f"seed {made['seed']}"] if "seed" in made else []
    lines = [f"made by           {made['generator']} ({', '.join(map(str, details))})"]
    if "conditions_from" in made:
        lines.append(f"conditions from   {', '.join(made['conditions_from'])}")
    return lines


def _nominal(detector: Detector | None) -> float | None:
    """The sampling fraction a file's showers are compared with where it is not the CLIC
    ECAL's Geant4 table (which depends on energy): the detector's nominal value."""
    if detector is None or detector.name.startswith("clic-ecal"):
        return None
    return detector.materials.sampling_fraction


def compared_sampling_fraction(
    energy: np.ndarray, detector: Detector | None
) -> tuple[np.ndarray, str]:
    """What a file's sampling fraction at ``energy`` GeV is compared with, as the report's
    ``ref`` column does, and its name: the detector's nominal value, or the CLIC ECAL's
    Geant4 table interpolated."""
    energy = np.asarray(energy, dtype=np.float64)
    nominal = _nominal(detector)
    if detector is not None and nominal is not None:
        return np.full(energy.shape, nominal), f"{detector.name} nominal"
    return _geant4(energy), "Geant4"


def reference_sampling_fraction(energy: float) -> float:
    """The Geant4 reference sampling fraction at ``energy`` GeV (linear interpolation)."""
    return float(_geant4(np.asarray(energy, dtype=np.float64)))


def _geant4(energy: np.ndarray) -> np.ndarray:
    points = sorted(REFERENCE_SAMPLING_FRACTION.items())
    return np.interp(energy, [p[0] for p in points], [p[1] for p in points])


def _bin_of(energy: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.clip(np.searchsorted(edges, energy, side="right") - 1, 0, len(edges) - 2)


def _binned(values: np.ndarray, energy: np.ndarray, edges: np.ndarray) -> list[dict[str, Any]]:
    ok = np.isfinite(values)  # an empty event has no shower maximum
    stats = obs.binned_mean(values[ok], energy[ok], edges)
    return [
        {
            "energy_lo": float(edges[i]),
            "energy_hi": float(edges[i + 1]),
            "mean": _number(stats.mean[i]),
            "std": _number(stats.std[i]),
            "count": int(stats.count[i]),
        }
        for i in range(len(edges) - 1)
    ]


def _number(value: float) -> float | None:
    """JSON has no NaN: an empty bin's statistics are null."""
    return None if not math.isfinite(value) else float(value)


def _pm(row: dict[str, Any], digits: int) -> str:
    if row["mean"] is None:
        return "-"
    return f"{row['mean']:.{digits}f} ± {row['std']:.{digits}f}"

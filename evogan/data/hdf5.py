"""Reading one validated shower file: its description, event ranges and checked cell slices.

Cells are read in contiguous, HDF5-chunk-aligned slices straight into a float32 buffer and
scaled, thresholded and checked while the slice is in cache; :mod:`evogan.data.reader` builds
datasets, shards and train/test splits on top. Showers come out in their detector's in-memory
form: a 3DGAN ECAL as stored (x, y, layer); a CaloChallenge row of voxels as the regular
cylinder's grid (radial, angular, layer), or as the row itself for irregular binning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from evogan.data.cells import zero_below
from evogan.data.layouts import Layout, particle_from_name
from evogan.detectors import Detector
from evogan.errors import DataError

# Cells are read (and then scaled, thresholded, checked) in slices of about this many bytes,
# so the passes over a slice find it in the CPU cache instead of streaming main memory again.
_READ_BYTES = 4 << 20
# Reads are aligned to HDF5 chunks up to this size (whole chunks are decompressed once).
_MAX_ALIGNED_BYTES = 256 << 20


@dataclass
class ShowerChunk:
    """Consecutive showers: cells in GeV (below-threshold cells are 0), energy and angle."""

    ecal: np.ndarray  # float32 (n, *shape) in the detector's in-memory form, GeV
    energy: np.ndarray  # float32 (n,), GeV
    theta: np.ndarray  # float32 (n,), radians; pi/2 where the file stores no angle

    def __len__(self) -> int:
        return len(self.energy)


@dataclass(frozen=True)
class ShowerFile:
    """One opened and validated file: where it is, how to read it, how many events, its
    detector (None for a Cartesian window no shipped detector has and the file records none)
    and the shape of one shower in memory."""

    path: Path
    layout: Layout
    events: int
    shape: tuple[int, ...]
    chunk_rows: int  # events per HDF5 chunk of ECAL (1 when stored contiguously)
    particle: str
    detector: Detector | None = None

    @property
    def regridded(self) -> bool:
        """Stored as rows of voxels, held as the detector's grid."""
        return self.layout.flat and self.shape != self.stored_shape

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """One shower's cells as the file holds them."""
        if self.layout.flat:
            return (int(np.prod(self.shape)),)
        return self.shape


@dataclass(frozen=True)
class Segment:
    """Events ``start:stop`` of one file."""

    file: ShowerFile
    start: int
    stop: int


def describe(
    f: h5py.File, path: Path, layout: Layout, detector: Detector | None = None
) -> ShowerFile:
    """Check the shapes and counts of an open file in ``layout`` (reads no cells); a
    CaloChallenge file's rows are held as ``detector``'s grid where it has one."""
    ecal = f[layout.ecal_key]
    _check_sources(ecal, path)
    events = ecal.shape[0]
    if events == 0:
        raise DataError(f"{path}: {layout.ecal_key} holds zero events")
    energy = f[layout.energy_key]
    if layout.energy_column is None and energy.ndim != 1:
        raise DataError(
            f"{path}: {layout.energy_key} must be 1-D (one energy per event), got shape "
            f"{energy.shape}; set data.energy_key"
        )
    if layout.energy_column is not None and (
        energy.ndim != 2 or energy.shape[1] <= layout.energy_column
    ):
        raise DataError(
            f"{path}: {layout.energy_key} must have shape (N, >={layout.energy_column + 1}) "
            f"with the energy in column {layout.energy_column}, got {energy.shape}"
        )
    for key in filter(None, (layout.energy_key, layout.theta_key)):
        if f[key].shape[0] != events:
            raise DataError(
                f"{path}: {key} has {f[key].shape[0]} entries but {layout.ecal_key} has "
                f"{events} events; the file is inconsistent"
            )
    shape = tuple(int(n) for n in ecal.shape[1:])
    if layout.flat and detector is not None and detector.grid_shape is not None:
        shape = detector.grid_shape
    rows = ecal.chunks[0] if ecal.chunks else 1
    if rows * 4 * int(np.prod(shape)) > _MAX_ALIGNED_BYTES:
        rows = 1  # huge HDF5 chunks: keep memory bounded rather than aligned
    particle = particle_from_name(path)
    return ShowerFile(path, layout, int(events), shape, int(rows), particle, detector)


def _check_sources(dataset: h5py.Dataset, path: Path) -> None:
    """A virtual dataset (the showers ``evogan generate`` wrote on several ranks, joined) reads
    zeros where a file it joins is missing: refuse it instead, naming that file."""
    if not dataset.is_virtual:
        return
    for source in dataset.virtual_sources():
        if source.file_name != "." and not (path.parent / source.file_name).exists():
            raise DataError(
                f"{path} joins the showers of {source.file_name}, which is missing beside it; "
                "keep the files written with it together, or generate them again"
            )


def read_segment(segment: Segment, step: int, threshold: float) -> Iterator[ShowerChunk]:
    """The segment's showers in chunks of about ``step`` events, whole HDF5 chunks each."""
    source = segment.file
    rows = source.chunk_rows
    step = max(rows, step // rows * rows)  # whole HDF5 chunks per yielded chunk
    with opened(source.path) as f:
        energy, theta = event_arrays(f, segment)
        start = segment.start
        while start < segment.stop:
            stop = min(segment.stop, (start // step + 1) * step)
            cells = np.empty((stop - start, *source.shape), dtype=np.float32)
            read_cells(f, source, start, stop, cells, threshold)
            lo, hi = start - segment.start, stop - segment.start
            yield ShowerChunk(cells, energy[lo:hi], theta[lo:hi])
            start = stop


def read_segment_into(
    segment: Segment,
    out: np.ndarray,
    threshold: float,
    on_read: Callable[[int], object] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The segment's cells straight into ``out`` (one shower per row): no chunk buffers to
    fill and copy, so each page of a large read is touched once. Returns energies and angles;
    ``on_read(showers)`` is called after each slice (progress displays)."""
    with opened(segment.file.path) as f:
        energy, theta = event_arrays(f, segment)
        read_cells(f, segment.file, segment.start, segment.stop, out, threshold, on_read)
    return energy, theta


def read_cells(
    f: h5py.File,
    source: ShowerFile,
    start: int,
    stop: int,
    out: np.ndarray,
    threshold: float,
    on_read: Callable[[int], object] | None = None,
) -> None:
    """Events ``start:stop`` of the open file into ``out``, in slices of whole HDF5 chunks of
    about ``_READ_BYTES``, each scaled, thresholded and checked while it is in cache."""
    layout, rows = source.layout, source.chunk_rows
    event_bytes = 4 * int(np.prod(source.shape))
    per_read = max(rows, _READ_BYTES // event_bytes // rows * rows)
    ecal = f[layout.ecal_key]
    rows_buffer = (
        np.empty((per_read, *source.stored_shape), np.float32) if source.regridded else None
    )
    at = start
    while at < stop:
        end = min(stop, (at // per_read + 1) * per_read)
        part = out[at - start : end - start]
        stored = part if rows_buffer is None else rows_buffer[: end - at]
        try:
            ecal.read_direct(stored, np.s_[at:end])
        except OSError as exc:
            raise DataError(
                f"{source.path}: reading events {at}-{end - 1} failed: {first_line(exc)}"
            ) from None
        where = f"{source.path}: {layout.ecal_key}"
        clean_cells(stored, layout.ecal_scale, threshold, where, at, divisor=_divisor(layout))
        if rows_buffer is not None:
            part[...] = source.detector.geometry.to_grid(stored)
        if on_read is not None:
            on_read(end - at)
        at = end


@contextmanager
def opened(path: Path) -> Iterator[h5py.File]:
    """An open file for reading; a file that vanished or broke since opening is a DataError."""
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"data file {path} cannot be opened: {first_line(exc)}") from None
    with f:
        yield f


def event_arrays(f: h5py.File, segment: Segment) -> tuple[np.ndarray, np.ndarray]:
    """Energy and angle of a segment (small: one number per event), checked."""
    layout, lo, hi = segment.file.layout, segment.start, segment.stop
    if layout.energy_column is None:
        energy = f[layout.energy_key][lo:hi]
    else:
        energy = f[layout.energy_key][lo:hi, layout.energy_column]
    if layout.energy_scale != 1.0:  # in float64: 50000 MeV is 50 GeV, not 50.000004
        energy = np.asarray(energy, dtype=np.float64) * layout.energy_scale
    energy = np.asarray(energy, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(energy) | (energy <= 0))
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"{segment.file.path}: {layout.energy_key} of event {lo + i} is {energy[i]}; "
            "primary energies must be finite and positive"
        )
    if layout.theta_key is None:
        return energy, np.full(hi - lo, np.pi / 2, dtype=np.float32)
    theta = np.asarray(f[layout.theta_key][lo:hi], dtype=np.float32).reshape(hi - lo)
    theta *= np.float32(layout.theta_scale)
    bad = np.flatnonzero(~np.isfinite(theta))
    if bad.size:
        raise DataError(
            f"{segment.file.path}: {layout.theta_key} of event {lo + int(bad[0])} is not finite"
        )
    return energy, theta


def _divisor(layout: Layout) -> float | None:
    """For a CaloChallenge file in MeV, 1000: x / 1000 is the float32 nearest the GeV value,
    x * float32(0.001) can be one ulp off (3DGAN layouts keep their multiplication)."""
    if layout.flat and layout.ecal_scale < 1 and (1 / layout.ecal_scale).is_integer():
        return 1 / layout.ecal_scale
    return None


def clean_cells(
    cells: np.ndarray,
    scale: float,
    threshold: float,
    where: str,
    first: int,
    *,
    divisor: float | None = None,
) -> None:
    """In place: stored units -> GeV (x ``scale``, or / ``divisor`` when given), cells below
    ``threshold`` -> 0 (the rule of
    :func:`evogan.data.cells.zero_below`, which the score applies too), NaN/inf -> DataError.

    Called on each freshly read slice while it is in cache. The finiteness test is one sum (any
    NaN or inf makes it non-finite; only a failing slice is searched).
    """
    import torch  # here, not at the top: commands that only open files stay fast to start

    tensor = torch.from_numpy(cells)
    if not math.isfinite(tensor.sum().item()):
        bad = np.flatnonzero(~np.isfinite(cells.reshape(len(cells), -1)).all(axis=1))
        if bad.size:  # else the float32 sum merely overflowed
            raise DataError(
                f"{where} of event {first + int(bad[0])} holds NaN or inf; "
                "fix or drop that event, or leave the file out"
            )
    if divisor is not None:
        tensor.div_(divisor)
    elif scale != 1.0:
        tensor.mul_(float(np.float32(scale)))
    zero_below(cells, threshold)


def first_line(exc: BaseException) -> str:
    """The first line of an HDF5 error: the rest is a C stack trace."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""Lazy, chunked reading of calorimeter shower files in any public 3DGAN layout.

A :class:`ShowerDataset` is only a list of event ranges in files: opening one reads the
metadata and the (small) energy arrays, never the cells. Cells are read in contiguous,
HDF5-chunk-aligned slices straight into a float32 buffer, so files of tens of GB stream in
constant memory and ranks can take disjoint blocks of the same files with :meth:`shard`.
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from evogan.config.data import DataConfig
from evogan.data.layouts import Layout, particle_from_name, resolve_layout
from evogan.errors import DataError

# Cells are read (and then scaled, thresholded, checked) in slices of about this many bytes,
# so the passes over a slice find it in the CPU cache instead of streaming main memory again.
_READ_BYTES = 4 << 20
# Reads are aligned to HDF5 chunks up to this size (whole chunks are decompressed once).
_MAX_ALIGNED_BYTES = 256 << 20
_GLOB_CHARS = set("*?[")


@dataclass
class ShowerChunk:
    """Consecutive showers: cells in GeV (below-threshold cells are 0), energy and angle."""

    ecal: np.ndarray  # float32 (n, X, Y, Z), GeV
    energy: np.ndarray  # float32 (n,), GeV
    theta: np.ndarray  # float32 (n,), radians; pi/2 where the file stores no angle

    def __len__(self) -> int:
        return len(self.energy)


@dataclass(frozen=True)
class ShowerFile:
    """One opened and validated file: where it is, how to read it, how many events."""

    path: Path
    layout: Layout
    events: int
    shape: tuple[int, int, int]
    chunk_rows: int  # events per HDF5 chunk of ECAL (1 when stored contiguously)
    particle: str


@dataclass(frozen=True)
class _Segment:
    file: ShowerFile
    start: int
    stop: int


class ShowerDataset:
    """Event ranges across files, read lazily; slicing methods return new views."""

    def __init__(
        self,
        segments: Iterable[_Segment],
        *,
        cell_threshold: float = 1e-6,
        chunk_events: int = 1000,
    ) -> None:
        self._segments = tuple(s for s in segments if s.stop > s.start)
        self.cell_threshold = float(cell_threshold)
        self.chunk_events = int(chunk_events)
        shapes = {s.file.shape for s in self._segments}
        if len(shapes) > 1:
            described = ", ".join(f"{s.file.path.name} {s.file.shape}" for s in self._segments)
            raise DataError(f"all files must have the same cell shape (x, y, z); got {described}")

    @classmethod
    def from_files(
        cls, files: Sequence[ShowerFile], *, cell_threshold: float = 1e-6, chunk_events: int = 1000
    ) -> ShowerDataset:
        segments = [_Segment(f, 0, f.events) for f in files]
        return cls(segments, cell_threshold=cell_threshold, chunk_events=chunk_events)

    def __len__(self) -> int:
        return sum(s.stop - s.start for s in self._segments)

    def __repr__(self) -> str:
        return f"ShowerDataset({len(self)} events, {len(self.files)} file(s), layout {self.layout})"

    @property
    def files(self) -> list[Path]:
        return list(dict.fromkeys(s.file.path for s in self._segments))

    @property
    def shape(self) -> tuple[int, int, int]:
        return self._segments[0].file.shape if self._segments else (0, 0, 0)

    @property
    def layout(self) -> str:
        names = list(dict.fromkeys(s.file.layout.name for s in self._segments))
        return "+".join(names) if names else "none"

    @property
    def ranges(self) -> list[tuple[Path, int, int]]:
        """``(file, start, stop)`` event ranges this view covers, in reading order."""
        return [(s.file.path, s.start, s.stop) for s in self._segments]

    def select(self, start: int, stop: int) -> ShowerDataset:
        """Events ``start:stop`` of this view, counted across files in order."""
        start, stop = max(0, start), min(len(self), stop)
        segments, offset = [], 0
        for s in self._segments:
            n = s.stop - s.start
            lo, hi = max(start - offset, 0), min(stop - offset, n)
            if lo < hi:
                segments.append(_Segment(s.file, s.start + lo, s.start + hi))
            offset += n
        return self._like(segments)

    def take(self, n: int) -> ShowerDataset:
        """The first ``n`` events (all of them when there are fewer)."""
        return self.select(0, n)

    def shard(self, rank: int, size: int) -> ShowerDataset:
        """Contiguous block ``rank`` of ``size`` balanced blocks (sizes differ by at most 1)."""
        if not 0 <= rank < size:
            raise DataError(f"shard needs 0 <= rank < size, got rank {rank} of {size}")
        n = len(self)
        return self.select(rank * n // size, (rank + 1) * n // size)

    def iter_chunks(self, chunk_events: int | None = None) -> Iterator[ShowerChunk]:
        """Stream the view in order, at most about ``chunk_events`` events per chunk.

        Slices follow the HDF5 chunk grid of ECAL (a chunk is read and decompressed once) and
        never span two files. Cells and energies are checked for NaN/inf as they arrive.
        """
        step = int(chunk_events or self.chunk_events)
        if step < 1:
            raise DataError(f"chunk_events must be at least 1, got {step}")
        for segment in self._segments:
            yield from _read_segment(segment, step, self.cell_threshold)

    def read(self, max_events: int | None = None) -> ShowerChunk:
        """All events of the view (or the first ``max_events``) in one chunk."""
        view = self if max_events is None else self.take(max_events)
        n = len(view)
        ecal = np.empty((n, *view.shape), dtype=np.float32)
        energy = np.empty(n, dtype=np.float32)
        theta = np.empty(n, dtype=np.float32)
        at = 0
        for chunk in view.iter_chunks():
            k = len(chunk)
            ecal[at : at + k], energy[at : at + k], theta[at : at + k] = (
                chunk.ecal,
                chunk.energy,
                chunk.theta,
            )
            at += k
        return ShowerChunk(ecal, energy, theta)

    def energies(self) -> np.ndarray:
        """Primary energies (GeV) of the view, read without touching the cells."""
        parts = []
        for segment in self._segments:
            with _opened(segment.file.path) as f:
                parts.append(_event_arrays(f, segment)[0])
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.float32)

    def _like(self, segments: Iterable[_Segment]) -> ShowerDataset:
        return ShowerDataset(
            segments, cell_threshold=self.cell_threshold, chunk_events=self.chunk_events
        )


def open_files(
    patterns: str | Path | Sequence[str | Path],
    *,
    layout: str = "auto",
    ecal_key: str | None = None,
    energy_key: str | None = None,
    ecal_scale: float | None = None,
) -> list[ShowerFile]:
    """Expand paths and glob patterns (sorted, duplicates dropped) and validate every file."""
    if isinstance(patterns, (str, Path)):
        patterns = [patterns]
    paths: list[Path] = []
    for pattern in patterns:
        paths.extend(_expand(str(pattern)))
    if not paths:
        raise DataError("no data files given; set data.files to paths or glob patterns")
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(path.resolve(), path)  # the first mention keeps its place
    return [
        open_file(p, layout=layout, ecal_key=ecal_key, energy_key=energy_key, ecal_scale=ecal_scale)
        for p in unique.values()
    ]


def open_file(
    path: str | Path,
    *,
    layout: str = "auto",
    ecal_key: str | None = None,
    energy_key: str | None = None,
    ecal_scale: float | None = None,
) -> ShowerFile:
    """Open one file, resolve its layout and check shapes and counts (reads no cells)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file {path} does not exist")
    if path.is_dir():
        raise DataError(f"data file {path} is a directory; give files or a glob like {path}/*.h5")
    if not h5py.is_hdf5(path):
        raise DataError(f"data file {path} is not an HDF5 file; expected a 3DGAN .h5 shower file")
    try:
        with h5py.File(path, "r") as f:
            found = resolve_layout(
                f, layout, ecal_key=ecal_key, energy_key=energy_key, ecal_scale=ecal_scale
            )
            return _describe(f, path, found)
    except OSError as exc:
        raise DataError(f"data file {path} cannot be read as HDF5: {_first_line(exc)}") from None


def open_dataset(
    cfg: DataConfig, *, announce: Callable[[str], object] = print
) -> tuple[ShowerDataset, ShowerDataset]:
    """The (train, test) views the ``data`` section asks for; the synthetic set when no files.

    Test events are the files in ``test_files`` when given, else the last ``test_fraction`` of
    the (``max_events``-limited) events. ``train_events`` / ``test_events`` are upper limits.
    """
    patterns = list(cfg.files)
    if not patterns:
        if cfg.test_files:
            raise DataError("data.test_files is set but data.files is empty; set data.files too")
        from evogan.data.default import ensure_default_data

        patterns = [str(ensure_default_data(cfg.synthetic, announce=announce))]
    options = dict(
        layout=cfg.layout,
        ecal_key=cfg.ecal_key,
        energy_key=cfg.energy_key,
        ecal_scale=cfg.ecal_scale,
    )
    view = dict(cell_threshold=cfg.cell_threshold, chunk_events=cfg.chunk_events)
    files = open_files(patterns, **options)
    everything = ShowerDataset.from_files(files, **view)
    if cfg.max_events is not None:
        everything = everything.take(cfg.max_events)
    if cfg.test_files:
        test_files = open_files(cfg.test_files, **options)
        shared = {f.path.resolve() for f in files} & {f.path.resolve() for f in test_files}
        if shared:
            raise DataError(
                f"data.test_files must not repeat data.files, got {', '.join(map(str, shared))}"
            )
        train, test = everything, ShowerDataset.from_files(test_files, **view)
    else:
        n = len(everything)
        n_test = max(1, round(n * cfg.test_fraction))
        if n - n_test < 1:
            raise DataError(
                f"{n} event(s) cannot be split into train and test with data.test_fraction = "
                f"{cfg.test_fraction}; use more events"
            )
        train, test = everything.select(0, n - n_test), everything.select(n - n_test, n)
    train = _limit(train, cfg.train_events, "data.train_events", announce)
    test = _limit(test, cfg.test_events, "data.test_events", announce)
    if len(train) and len(test) and train.shape != test.shape:
        raise DataError(f"test files have cell shape {test.shape} but training files {train.shape}")
    names = ", ".join(p.name for p in everything.files[:3])
    more = f" and {len(everything.files) - 3} more" if len(everything.files) > 3 else ""
    announce(
        f"data: {len(train)} training / {len(test)} test events, layout {train.layout}, "
        f"cells {'x'.join(map(str, train.shape))}, from {names}{more}"
    )
    return train, test


def _limit(
    data: ShowerDataset, limit: int | None, key: str, announce: Callable[[str], object]
) -> ShowerDataset:
    if limit is None:
        return data
    if limit > len(data):
        announce(f"data: {key} = {limit} but only {len(data)} are available; using {len(data)}")
    return data.take(limit)


def _expand(pattern: str) -> list[Path]:
    expanded = os.path.expanduser(pattern)
    if _GLOB_CHARS & set(expanded):
        matches = sorted(glob.glob(expanded, recursive=True))
        if not matches:
            raise DataError(f"data pattern {pattern!r} matched no files")
        return [Path(m) for m in matches]
    return [Path(expanded)]


def _describe(f: h5py.File, path: Path, layout: Layout) -> ShowerFile:
    ecal = f[layout.ecal_key]
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
    rows = ecal.chunks[0] if ecal.chunks else 1
    if rows * 4 * int(np.prod(shape)) > _MAX_ALIGNED_BYTES:
        rows = 1  # huge HDF5 chunks: keep memory bounded rather than aligned
    return ShowerFile(path, layout, int(events), shape, int(rows), particle_from_name(path))


def _read_segment(segment: _Segment, step: int, threshold: float) -> Iterator[ShowerChunk]:
    source, layout = segment.file, segment.file.layout
    rows = source.chunk_rows
    step = max(rows, step // rows * rows)  # whole HDF5 chunks per yielded chunk
    event_bytes = 4 * int(np.prod(source.shape))
    # Rows per HDF5 read: whole HDF5 chunks, about _READ_BYTES.
    per_read = max(rows, _READ_BYTES // event_bytes // rows * rows)
    with _opened(source.path) as f:
        energy, theta = _event_arrays(f, segment)
        ecal = f[layout.ecal_key]
        start = segment.start
        while start < segment.stop:
            stop = min(segment.stop, (start // step + 1) * step)
            cells = np.empty((stop - start, *source.shape), dtype=np.float32)
            at = start
            while at < stop:
                end = min(stop, (at // per_read + 1) * per_read)
                part = cells[at - start : end - start]
                try:
                    ecal.read_direct(part, np.s_[at:end])
                except OSError as exc:
                    raise DataError(
                        f"{source.path}: reading events {at}-{end - 1} failed: {_first_line(exc)}"
                    ) from None
                _clean(part, layout.ecal_scale, threshold, source.path, at)
                at = end
            lo, hi = start - segment.start, stop - segment.start
            yield ShowerChunk(cells, energy[lo:hi], theta[lo:hi])
            start = stop


@contextmanager
def _opened(path: Path) -> Iterator[h5py.File]:
    """An open file for reading; a file that vanished or broke since opening is a DataError."""
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise DataError(f"data file {path} cannot be opened: {_first_line(exc)}") from None
    with f:
        yield f


def _event_arrays(f: h5py.File, segment: _Segment) -> tuple[np.ndarray, np.ndarray]:
    """Energy and angle of a segment (small: one number per event), checked."""
    layout, lo, hi = segment.file.layout, segment.start, segment.stop
    if layout.energy_column is None:
        energy = f[layout.energy_key][lo:hi]
    else:
        energy = f[layout.energy_key][lo:hi, layout.energy_column]
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


def _clean(cells: np.ndarray, scale: float, threshold: float, path: Path, first: int) -> None:
    """In place: stored units -> GeV, cells below ``threshold`` -> 0, NaN/inf -> DataError.

    Called on each freshly read slice while it is in cache. The finiteness test is one sum (any
    NaN or inf makes it non-finite; only a failing slice is searched). torch's fused in-place
    threshold is about twice as fast as numpy's compare-and-multiply and shares the memory.
    """
    import torch  # here, not at the top: commands that only open files stay fast to start

    tensor = torch.from_numpy(cells)
    if not math.isfinite(tensor.sum().item()):
        bad = np.flatnonzero(~np.isfinite(cells.reshape(len(cells), -1)).all(axis=1))
        if bad.size:  # else the float32 sum merely overflowed
            raise DataError(
                f"{path}: ECAL of event {first + int(bad[0])} holds NaN or inf; "
                "fix or drop that event, or leave the file out"
            )
    if scale != 1.0:
        tensor.mul_(float(np.float32(scale)))
    # threshold_ zeroes x <= t; t just below the threshold keeps cells equal to it.
    keep_above = float(np.nextafter(np.float32(threshold), np.float32(-np.inf)))
    torch.nn.functional.threshold_(tensor, keep_above, 0.0)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

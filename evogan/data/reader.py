"""Lazy, chunked reading of calorimeter shower files in any public 3DGAN layout or the
CaloChallenge one.

A :class:`ShowerDataset` is only a list of event ranges in files: opening one reads the
metadata and the (small) energy arrays, never the cells. Cells stream in constant memory
(:mod:`evogan.data.hdf5`), so files of tens of GB are fine and ranks can take disjoint blocks
of the same files with :meth:`ShowerDataset.shard`.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from evogan.config.data import DataConfig
from evogan.data.file_detector import file_detector, warn_unlikely_units
from evogan.data.hdf5 import (
    Segment,
    ShowerChunk,
    ShowerFile,
    describe,
    event_arrays,
    first_line,
    opened,
    read_segment,
    read_segment_into,
)
from evogan.data.layouts import resolve_layout
from evogan.detectors import Detector, detector_for
from evogan.errors import DataError

_GLOB_CHARS = set("*?[")


class ShowerDataset:
    """Event ranges across files, read lazily; slicing methods return new views."""

    def __init__(
        self,
        segments: Iterable[Segment],
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
        detectors = {s.file.detector.name for s in self._segments if s.file.detector}
        if len(detectors) > 1:
            described = ", ".join(
                f"{s.file.path.name} {s.file.detector.name if s.file.detector else '?'}"
                for s in self._segments
            )
            raise DataError(f"all files must come from the same detector; got {described}")

    @classmethod
    def from_files(
        cls, files: Sequence[ShowerFile], *, cell_threshold: float = 1e-6, chunk_events: int = 1000
    ) -> ShowerDataset:
        segments = [Segment(f, 0, f.events) for f in files]
        return cls(segments, cell_threshold=cell_threshold, chunk_events=chunk_events)

    def __len__(self) -> int:
        return sum(s.stop - s.start for s in self._segments)

    def __repr__(self) -> str:
        return f"ShowerDataset({len(self)} events, {len(self.files)} file(s), layout {self.layout})"

    @property
    def files(self) -> list[Path]:
        return list(dict.fromkeys(s.file.path for s in self._segments))

    @property
    def shape(self) -> tuple[int, ...]:
        """One shower's cells in memory: (x, y, layer), (radial, angular, layer) or (voxels,)."""
        return self._segments[0].file.shape if self._segments else (0, 0, 0)

    @property
    def detector(self) -> Detector | None:
        """The files' detector; None for a Cartesian window that no shipped detector has."""
        return next((s.file.detector for s in self._segments if s.file.detector), None)

    @property
    def layout(self) -> str:
        names = list(dict.fromkeys(s.file.layout.name for s in self._segments))
        return "+".join(names) if names else "none"

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The view's event ranges with the files (and layouts) they are read from."""
        return self._segments

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
                segments.append(Segment(s.file, s.start + lo, s.start + hi))
            offset += n
        return self._like(segments)

    def split_each(self, fraction: float) -> tuple[ShowerDataset, ShowerDataset]:
        """(train, test) with the last ``fraction`` of every file's events as test (at least
        one of each file of two or more events): the public sets hold one energy or angle range
        per file, and a test split of the last files alone would be a range never trained on."""
        train, test = [], []
        for s in self._segments:
            n = s.stop - s.start
            k = max(1, round(n * fraction)) if n > 1 else 0
            train.append(Segment(s.file, s.start, s.stop - k))
            test.append(Segment(s.file, s.stop - k, s.stop))
        return self._like(train), self._like(test)

    def take(self, n: int) -> ShowerDataset:
        """``n`` events (all of them when there are fewer) from every file in proportion to
        its events, the first ones of each: the public sets hold one energy or angle range
        per file, so the first ``n`` of the view would cover the first files' ranges alone.
        The first ``n`` events of a single file."""
        total = len(self)
        if n >= total:
            return self
        sizes = [s.stop - s.start for s in self._segments]
        shares = [n * size / total for size in sizes]
        counts = [int(share) for share in shares]
        by_remainder = sorted(range(len(sizes)), key=lambda i: counts[i] - shares[i])
        for i in by_remainder[: n - sum(counts)]:  # largest remainders first: n in all
            counts[i] += 1
        kept = zip(self._segments, counts, strict=True)
        return self._like(Segment(s.file, s.start, s.start + k) for s, k in kept)

    def shard(self, rank: int, size: int) -> ShowerDataset:
        """Block ``rank`` of ``size`` of every file's events: each rank reads every file, as
        the public sets hold one energy or angle range per file (one block of the whole view
        would give each rank the ranges of its own files alone). A file's leftover events go
        to the ranks in turn across files, so shard sizes differ by at most 1."""
        if not 0 <= rank < size:
            raise DataError(f"shard needs 0 <= rank < size, got rank {rank} of {size}")
        segments, turn = [], 0
        for s in self._segments:
            each, extra = divmod(s.stop - s.start, size)
            counts = [each + ((r - turn) % size < extra) for r in range(size)]
            start = s.start + sum(counts[:rank])
            segments.append(Segment(s.file, start, start + counts[rank]))
            turn = (turn + extra) % size
        return self._like(segments)

    def iter_chunks(self, chunk_events: int | None = None) -> Iterator[ShowerChunk]:
        """Stream the view in order, at most about ``chunk_events`` events per chunk.

        Slices follow the HDF5 chunk grid of ECAL (a chunk is read and decompressed once) and
        never span two files. Cells and energies are checked for NaN/inf as they arrive.
        """
        step = int(chunk_events or self.chunk_events)
        if step < 1:
            raise DataError(f"chunk_events must be at least 1, got {step}")
        for segment in self._segments:
            yield from read_segment(segment, step, self.cell_threshold)

    def read(
        self, max_events: int | None = None, on_read: Callable[[int], object] | None = None
    ) -> ShowerChunk:
        """All events of the view (or ``max_events`` of them, as :meth:`take` picks) in one
        chunk, each file's cells read straight into it; ``on_read(showers)`` after each slice
        (progress displays)."""
        view = self if max_events is None else self.take(max_events)
        n = len(view)
        ecal = np.empty((n, *view.shape), dtype=np.float32)
        energy = np.empty(n, dtype=np.float32)
        theta = np.empty(n, dtype=np.float32)
        at = 0
        for segment in view._segments:
            k = segment.stop - segment.start
            energy[at : at + k], theta[at : at + k] = read_segment_into(
                segment, ecal[at : at + k], view.cell_threshold, on_read
            )
            at += k
        return ShowerChunk(ecal, energy, theta)

    def energies(self) -> np.ndarray:
        """Primary energies (GeV) of the view, read without touching the cells."""
        return self.conditions()[0]

    def conditions(self) -> tuple[np.ndarray, np.ndarray]:
        """Primary energies (GeV) and angles (radians) of the view, read without the cells."""
        energy, theta = [np.empty(0, dtype=np.float32)], [np.empty(0, dtype=np.float32)]
        for segment in self._segments:
            with opened(segment.file.path) as f:
                e, t = event_arrays(f, segment)
            energy.append(e)
            theta.append(t)
        return np.concatenate(energy), np.concatenate(theta)

    def _like(self, segments: Iterable[Segment]) -> ShowerDataset:
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
    detector: str | Detector | None = None,
    units: bool = True,
) -> list[ShowerFile]:
    """Expand paths and glob patterns (sorted, duplicates dropped) and validate every file
    (``units``: as :func:`open_file`)."""
    if isinstance(patterns, (str, Path)):
        patterns = [patterns]
    paths: list[Path] = []
    for pattern in patterns:
        paths.extend(expand_pattern(str(pattern)))
    if not paths:
        raise DataError("no data files given; set data.files to paths or glob patterns")
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(path.resolve(), path)  # the first mention keeps its place
    options = dict(layout=layout, ecal_key=ecal_key, energy_key=energy_key, ecal_scale=ecal_scale)
    return [open_file(p, **options, detector=detector, units=units) for p in unique.values()]


def open_file(
    path: str | Path,
    *,
    layout: str = "auto",
    ecal_key: str | None = None,
    energy_key: str | None = None,
    ecal_scale: float | None = None,
    detector: str | Detector | None = None,
    units: bool = True,
) -> ShowerFile:
    """Open one file, resolve its layout and detector (``detector``: what ``data.detector``
    says, a name, a binning XML path or a :class:`Detector`; None takes the file's) and check
    shapes, counts and, with ``units``, whether its energies look like their unit (reading
    them, and a few rows of a CaloChallenge file's cells); of the event arrays, only the angles
    are read otherwise (degrees or radians)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file {path} does not exist")
    if path.is_dir():
        raise DataError(f"data file {path} is a directory; give files or a glob like {path}/*.h5")
    if not h5py.is_hdf5(path):
        raise DataError(
            f"data file {path} is not an HDF5 file; expected a 3DGAN or CaloChallenge .h5 "
            "shower file"
        )
    expected = detector_for(detector) if isinstance(detector, str) else detector
    try:
        with h5py.File(path, "r") as f:
            found = resolve_layout(
                f, layout, ecal_key=ecal_key, energy_key=energy_key, ecal_scale=ecal_scale
            )
            source = file_detector(f, path, found, expected)
            if found.flat:
                to_gev = source.to_gev
                found = replace(
                    found,
                    ecal_scale=to_gev if ecal_scale is None else found.ecal_scale,
                    energy_scale=to_gev,
                )
            described = describe(f, path, found, source)
            if units:
                warn_unlikely_units(f, path, found)
            return described
    except OSError as exc:
        raise DataError(f"data file {path} cannot be read as HDF5: {first_line(exc)}") from None


def open_dataset(
    cfg: DataConfig, *, announce: Callable[[str], object] = print
) -> tuple[ShowerDataset, ShowerDataset]:
    """The (train, test) views the ``data`` section asks for; the synthetic set when no files.

    Test events are the files in ``test_files`` when given, else the last ``test_fraction`` of
    each file's (``max_events``-limited) events. ``train_events`` / ``test_events`` are upper
    limits.
    """
    options = read_settings(cfg)
    patterns = list(cfg.files)
    if not patterns:
        from evogan.data.default import ensure_default_data

        detector = detector_for(cfg.detector)
        patterns = [str(ensure_default_data(cfg.synthetic, detector, announce=announce))]
    return split_dataset(cfg, open_files(patterns, **options), announce)


def read_settings(cfg: DataConfig) -> dict[str, Any]:
    """The :func:`open_files` keywords of the ``data`` section, which is first checked for
    test files without training files."""
    if not cfg.files and cfg.test_files:
        raise DataError("data.test_files is set but data.files is empty; set data.files too")
    return dict(
        layout=cfg.layout,
        ecal_key=cfg.ecal_key,
        energy_key=cfg.energy_key,
        ecal_scale=cfg.ecal_scale,
        detector=cfg.detector,
    )


def split_dataset(
    cfg: DataConfig,
    files: list[ShowerFile],
    announce: Callable[[str], object] = print,
    *,
    units: bool = True,
) -> tuple[ShowerDataset, ShowerDataset]:
    """:func:`open_dataset`'s (train, test) views of the opened training ``files``: its
    limits and split, and ``data.test_files`` opened (``units``: as :func:`open_file`)."""
    view = dict(cell_threshold=cfg.cell_threshold, chunk_events=cfg.chunk_events)
    everything = ShowerDataset.from_files(files, **view)
    everything = _limit(everything, cfg.max_events, "data.max_events", announce)
    if cfg.test_files:
        test_files = open_files(cfg.test_files, **read_settings(cfg), units=units)
        shared = {f.path.resolve() for f in files} & {f.path.resolve() for f in test_files}
        if shared:
            raise DataError(
                f"data.test_files must not repeat data.files, got {', '.join(map(str, shared))}"
            )
        train, test = everything, ShowerDataset.from_files(test_files, **view)
    else:
        train, test = everything.split_each(cfg.test_fraction)
        if not len(train) or not len(test):
            raise DataError(
                f"{len(everything)} event(s) cannot be split into train and test with "
                f"data.test_fraction = {cfg.test_fraction}; use more events"
            )
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


def expand_pattern(pattern: str) -> list[Path]:
    """The files a path or glob names (``~`` expanded); a glob that matches none is refused."""
    expanded = os.path.expanduser(pattern)
    if _GLOB_CHARS & set(expanded):
        matches = sorted(glob.glob(expanded, recursive=True))
        if not matches:
            raise DataError(f"data pattern {pattern!r} matched no files")
        return [Path(m) for m in matches]
    return [Path(expanded)]

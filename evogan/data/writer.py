"""Incremental, atomic HDF5 writer for calorimeter showers (synthetic data, GAN samples), in the
layout of the showers' detector.

Cartesian detectors (and any (X, Y, Z) image shape; 51 x 51 x 25 for the CLIC ECAL):

- ``ECAL`` (N, X, Y, Z) float32, visible energy per cell in GeV;
- ``energy`` (N,) float32 primary energy in GeV; ``theta`` (N,) float32 incidence angle in rad;
- ``sum`` (N,) float32 ECAL sum per event in GeV;
- ``event`` (N,) int64, only in numbered files (``numbered=True``): each shower's event number
  (``evogan generate``: with the file's ``seed``, what makes the shower again);
- attributes ``producer = "evogan"``, ``ecal_units = "GeV"`` (readers apply no x50 scale),
  ``evogan_version``, ``detector`` (its name, when the writer is given one) and whatever the
  producer adds (seed, energy range, ...).

Cylindrical detectors: the CaloChallenge format, so the challenge's own evaluation reads the
file unchanged: ``incident_energies`` (N, 1) and ``showers`` (N, voxels) float32 in the
detector's file unit (MeV), voxels radial bin fastest, then angular bin, then layer, chunked by
about :data:`ROWS_CHUNK_BYTES` of rows; ``event`` when numbered (the challenge's own evaluation
reads only the first two); the same attributes but ``ecal_units``. The format has no
angle: showers at other than 90 degrees are refused.

Storage choice (3DGAN layout): one event per chunk along N so a reader streaming or sampling
events touches only the events it needs, compressed with gzip level 1 and no byte-shuffle.
Measured on 512 synthetic 2-500 GeV showers, CPU time on one core (scripts/bench_synth.py
--codecs):

    codec             write ms/event  read ms/event  kB/event
    gzip-1            0.76            0.29           4.4
    gzip-1 + shuffle  0.93            0.45           5.8
    gzip-4            1.78            0.83           3.3
    lzf               1.06            0.97           6.0
    lzf + shuffle     1.21            1.10           8.0

gzip-1 is the fastest compressed codec both ways for these sparse images (shuffle only helps
smooth data); gzip-4 is 25% smaller but over twice as slow to write and read. Unlike lzf, gzip is
readable by every HDF5 tool (h5dump, ROOT, Julia, MATLAB) without plugins.

Atomicity (:func:`evogan.store.atomic.atomic_path`): events go to a hidden temporary file in the
destination directory that replaces the destination with ``os.replace`` only when the ``with``
block ends cleanly; any exception removes it, so a crash never leaves a half-written file. Every
append is a safe point for SIGTERM/SIGINT (:func:`evogan.distributed.signals.check_stop`).
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import h5py
import numpy as np

from evogan import __version__
from evogan.data.layouts import written_layout
from evogan.detectors import Detector
from evogan.distributed.signals import check_stop
from evogan.errors import DataError
from evogan.store.atomic import atomic_path

STREAMING = ("v110", "v110")
"""The ``libver`` of files streamed to any length (``evogan generate``): HDF5 1.10's chunk index
(an extensible array) keeps the writer's memory flat, where the 1.8 format's B-tree took 19 MB
at 10^5 one-shower chunks and 1.6 bytes more per chunk after (measured with h5py 3.16, HDF5
2.0). Readers need HDF5 1.10 or later (2016), as for the virtual datasets that join the
ranks' files."""
COMPRESSION = "gzip"
COMPRESSION_LEVEL = 1
SHUFFLE = False
# CaloChallenge rows per chunk: about this many bytes (10 rows of dataset 2, 1 of dataset 3),
# large enough that the per-chunk cost of HDF5 is small beside decompression.
ROWS_CHUNK_BYTES = 256 << 10


def check_writable(path: Path) -> None:
    """Raise ``DataError`` (one line) unless a file can be created at ``path``."""
    if path.is_dir():
        raise DataError(f"output path must be a file, but {path} is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise DataError(f"output directory must exist: {parent} does not (create it first)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError(f"output directory must be writable: no write permission on {parent}")


class ShowerWriter:
    """Append batches of showers to ``path``; the file appears only if every append succeeded.

    Showers come in the detector's in-memory form (``shape``: its grid, or (voxels,) for
    irregular binning) in GeV; a ``numbered`` file takes each shower's event number too.
    ``libver`` is h5py's (None: the oldest format that holds the file); :data:`STREAMING`
    suits files of millions of showers. Use as a context manager::

        with ShowerWriter(out, (51, 51, 25), detector=clic, attrs={"seed": 0}) as writer:
            writer.append(ecal, energy, theta)
    """

    def __init__(
        self,
        path: Path | str,
        shape: tuple[int, ...],
        *,
        detector: Detector | None = None,
        attrs: Mapping[str, Any] | None = None,
        compression: str | None = COMPRESSION,
        compression_opts: int | None = COMPRESSION_LEVEL,
        shuffle: bool = SHUFFLE,
        numbered: bool = False,
        libver: str | tuple[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.numbered = numbered
        self.libver = libver
        self.shape = tuple(int(s) for s in shape)
        self.detector = detector
        self.rows = detector is not None and written_layout(detector).flat
        if self.rows:
            held = detector.shower_shape
            if self.shape != held:
                raise ValueError(f"{detector.describe()} showers have shape {held}, not {shape}")
        elif len(self.shape) != 3 or min(self.shape) < 1:
            raise ValueError(f"shape must be three positive sizes (X, Y, Z), got {shape}")
        elif detector is not None and detector.grid_shape != self.shape:
            raise ValueError(f"{detector.describe()} showers have shape {detector.grid_shape}")
        check_writable(self.path)
        self.attrs = dict(attrs or {})
        self.compression = compression
        self.compression_opts = compression_opts if compression == "gzip" else None
        self.shuffle = shuffle and compression is not None
        self.events = 0
        self._file: h5py.File | None = None
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> ShowerWriter:
        with contextlib.ExitStack() as stack:  # unwinds (file closed, temp removed) on failure
            try:
                tmp = stack.enter_context(atomic_path(self.path))
            except OSError as exc:
                raise DataError(f"cannot create a file in {self.path.parent}: {exc}") from exc
            self._file = stack.enter_context(h5py.File(tmp, "w", libver=self.libver))
            self._create_datasets()
            self._stack = stack.pop_all()
        return self

    def _create_datasets(self) -> None:
        assert self._file is not None
        f = self._file
        f.attrs["producer"] = "evogan"
        if not self.rows:
            f.attrs["ecal_units"] = "GeV"
        f.attrs["evogan_version"] = __version__
        if self.detector is not None:
            f.attrs["detector"] = self.detector.name
        for key, value in self.attrs.items():
            f.attrs[key] = value
        filters = {
            "compression": self.compression,
            "compression_opts": self.compression_opts,
            "shuffle": self.shuffle,
        }
        if self.numbered:
            f.create_dataset("event", shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(4096,))
        if self.rows:
            voxels = self.detector.voxels
            rows = max(1, ROWS_CHUNK_BYTES // (4 * voxels))
            f.create_dataset(
                "incident_energies", shape=(0, 1), maxshape=(None, 1), dtype=np.float32,
                chunks=(4096, 1),
            )  # fmt: skip
            f.create_dataset(
                "showers", shape=(0, voxels), maxshape=(None, voxels), dtype=np.float32,
                chunks=(rows, voxels), **filters,
            )  # fmt: skip
            return
        f.create_dataset(
            "ECAL",
            shape=(0, *self.shape),
            maxshape=(None, *self.shape),
            dtype=np.float32,
            chunks=(1, *self.shape),
            **filters,
        )
        for key in ("energy", "theta", "sum"):
            f.create_dataset(key, shape=(0,), maxshape=(None,), dtype=np.float32, chunks=(4096,))

    def append(
        self,
        ecal: np.ndarray,
        energy: np.ndarray,
        theta: np.ndarray | float | None = None,
        event: np.ndarray | None = None,
    ) -> None:
        """Write a batch: ecal (n, X, Y, Z) GeV, energy (n,) GeV, theta (n,) or scalar rad, and
        in a numbered file the (n,) event numbers."""
        if self._file is None:
            raise RuntimeError("ShowerWriter.append called outside its `with` block")
        check_stop()
        ecal = np.asarray(ecal, dtype=np.float32)
        energy = np.asarray(energy, dtype=np.float32).reshape(-1)
        n = energy.size
        if ecal.shape != (n, *self.shape):
            raise DataError(
                f"ECAL batch must have shape ({n}, {', '.join(map(str, self.shape))}) to match "
                f"{n} energies, got {ecal.shape}"
            )
        theta_arr = np.broadcast_to(
            np.asarray(np.pi / 2 if theta is None else theta, dtype=np.float32), (n,)
        )
        for key, values in (("ECAL", ecal), ("energy", energy), ("theta", theta_arr)):
            if not np.all(np.isfinite(values)):
                raise DataError(f"{key} values must be finite, got NaN or inf in a batch of {n}")
        if self.rows:
            columns = self._rows(ecal, energy, theta_arr)
        else:
            total = ecal.reshape(n, -1).sum(axis=1, dtype=np.float64).astype(np.float32)
            columns = (("ECAL", ecal), ("energy", energy), ("theta", theta_arr), ("sum", total))
        if self.numbered != (event is not None):
            raise ValueError("a numbered ShowerWriter takes event numbers, any other none")
        if event is not None:
            columns = (*columns, ("event", np.asarray(event, dtype=np.int64).reshape(n)))
        start, stop = self.events, self.events + n
        for key, values in columns:
            dataset = self._file[key]
            dataset.resize(stop, axis=0)
            dataset[start:stop] = values
        self.events = stop

    def _rows(
        self, ecal: np.ndarray, energy: np.ndarray, theta: np.ndarray
    ) -> tuple[tuple[str, np.ndarray], ...]:
        """A batch in the CaloChallenge format: rows of voxels and (n, 1) energies, GeV to the
        detector's file unit (x1000 for MeV, exact in float32 up to rounding of the product)."""
        detector = self.detector
        if not np.allclose(theta, np.pi / 2):
            raise DataError(
                f"the CaloChallenge format of {detector.name} holds no angle; showers at "
                f"{np.degrees(theta[0]):.4g} degrees cannot be written to it"
            )
        flat = ecal if detector.grid_shape is None else detector.geometry.to_flat(ecal)
        per_gev = np.float32(1.0 / detector.to_gev)
        showers = flat * per_gev if per_gev != 1 else flat
        incident = (energy.astype(np.float64) / detector.to_gev).astype(np.float32)
        return (("showers", showers), ("incident_energies", incident.reshape(-1, 1)))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the file, then move it into place (clean exit) or delete it (exception)."""
        stack, self._stack, self._file = self._stack, None, None
        if stack is not None:
            stack.__exit__(exc_type, exc, tb)


def stored_bytes(ecal: np.ndarray) -> float:
    """Bytes a shower of the batch ``ecal`` (n, *shape; float32 GeV) takes in a file, on
    average: its cells through the writer's codec (gzip level 1, one shower a chunk) and the
    4-8 bytes of each of its columns. What ``evogan generate`` measures on its first batch to
    size a request against the free disk."""
    cells = np.ascontiguousarray(ecal, dtype=np.float32).reshape(len(ecal), -1)
    packed = sum(len(zlib.compress(row.tobytes(), COMPRESSION_LEVEL)) for row in cells)
    return packed / len(cells) + 20

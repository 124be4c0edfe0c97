"""The regressor's 2D projections, kept in the cache so that a run does not stream 3D cells again.

Projecting streams every cell of the view through the HDF5 decompressor: for the built-in
6,250 showers, 1.6 GB of cells and about 3 s of a regressor run's start on one core, for
projections of 32 MB. They are kept in ``cache_dir()/projections``, one file per view (files,
event ranges, layouts, cell threshold, resolved axis: ``auto`` on a Cartesian grid is keyed as
``y``), and used while every source file keeps the size and modification time it had and
evogan's reading code is unchanged; otherwise they are made again and replace the stale copy,
so a view never holds more than one file. The folder keeps at most ``BUDGET_BYTES``: the least
recently used projections go first, and one larger than the budget is not kept.
``data.cache_projections: false`` turns this off (e.g. for a cache on a slow shared file
system).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from evogan.data.default import source_digest
from evogan.data.reader import ShowerDataset
from evogan.settings import cache_dir
from evogan.store import atomic_path

Projection = tuple[np.ndarray, np.ndarray]
"""Images (n, W, Z) float32, unscaled, and primary energies (n,) float32 in GeV."""

BUDGET_BYTES = 4 * 2**30

_READING_CODE = (
    "evogan.data.hdf5",
    "evogan.data.layouts",
    "evogan.data.reader",
    "evogan.data.transforms",
    "evogan.data.projections",
    "evogan.detectors.projection",
)


def cached_projection(
    dataset: ShowerDataset,
    axis: str,
    build: Callable[[], Projection],
    announce: Callable[[str], object] = print,
) -> Projection:
    """The projection of ``dataset`` on ``axis`` from the cache, or ``build()``'s, then cached.

    A cache that cannot be written (read-only, full) costs only the saving: the run goes on.
    """
    path = projection_path(dataset, axis)
    stamp = _stamp(dataset)
    found = _read(path, stamp)
    if found is not None:
        return found
    images, energy = build()
    if images.nbytes > BUDGET_BYTES:
        return images, energy
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as stream:
            np.savez(stream, images=images, energy=energy, stamp=np.array(stamp))
        _evict(path)
    except OSError as exc:
        announce(
            f"data: could not cache the 2D projections in {path.parent} ({exc.strerror}); "
            "set EVOGAN_CACHE_DIR to a writable directory or data.cache_projections=false"
        )
    return images, energy


def projection_path(dataset: ShowerDataset, axis: str) -> Path:
    """Where the projection of this view is cached: named by what its values depend on."""
    view = [
        [str(s.file.path.resolve()), s.start, s.stop, repr(s.file.layout)] for s in dataset.segments
    ]
    identity = json.dumps([view, dataset.cell_threshold, axis])
    return cache_dir() / "projections" / f"{hashlib.sha256(identity.encode()).hexdigest()[:20]}.npz"


def _stamp(dataset: ShowerDataset) -> str:
    """What must not have changed since the projection was made: the files and the code."""
    files = []
    for path in dataset.files:
        status = path.stat()
        files.append([str(path.resolve()), status.st_size, status.st_mtime_ns])
    return json.dumps([files, _code_digest()])


@cache
def _code_digest() -> str:
    return source_digest(*_READING_CODE)[:16]


def _read(path: Path, stamp: str) -> Projection | None:
    """The cached projection when it is there, readable and current (then marked as just
    used); else None."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            if str(stored["stamp"]) != stamp:
                return None
            found = stored["images"], stored["energy"]
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    with contextlib.suppress(OSError):  # a cache shared read-only still serves
        os.utime(path)
    return found


def _evict(kept: Path) -> None:
    """Remove the least recently used projections beyond the budget, never ``kept``."""
    entries = []
    for path in kept.parent.glob("*.npz"):
        with contextlib.suppress(OSError):  # another process may remove it meanwhile
            status = path.stat()
            entries.append((status.st_mtime_ns, status.st_size, path))
    total = 0
    for _, size, path in sorted(entries, key=lambda entry: entry[0], reverse=True):
        total += size
        if total > BUDGET_BYTES and path != kept:
            path.unlink(missing_ok=True)

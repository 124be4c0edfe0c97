"""The default data set: synthetic showers generated once per machine and cached.

Every workflow runs out of the box without the (non-downloadable) public files. The cache file
name carries everything the showers depend on (events, energy range and its sampling, seed,
generator version, and the detector unless it is the CLIC ECAL), so a changed setting or
generator never reuses stale showers. Many MPI ranks may start at the
same moment: one takes an exclusive ``flock`` on a lock file beside the cache and generates into
a temporary file that it renames into place; the others block on the lock and then find the
finished file. (``flock`` needs a file system that supports it; node-local and NFSv4 do, Lustre
does when mounted with ``-o flock``; point ``EVOGAN_CACHE_DIR`` elsewhere otherwise.)
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

from evogan import __version__
from evogan.config.data import SyntheticConfig
from evogan.detectors.detector import Detector
from evogan.detectors.shipped import DEFAULT, DETECTOR_NAMES, detector_for
from evogan.errors import DataError
from evogan.settings import cache_dir


def source_digest(*modules: str) -> str:
    """sha256 (hex) of the modules' source files, found without importing them, so that
    checking a cache made by that code stays cheap."""
    digest = hashlib.sha256()
    for module in modules:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()


GENERATOR_MODULES = (
    "evogan.data.synthetic.spots",
    "evogan.data.synthetic.deposit",
    "evogan.data.synthetic.showers",
    "evogan.detectors.shipped",
)


def generator_version() -> str:
    """evogan's version plus a digest of the generator's source and the shipped detectors:
    any model or material change shows."""
    return f"{__version__}-{source_digest(*GENERATOR_MODULES)[:10]}"


def detector_key(detector: Detector) -> str:
    """The cache-name part for ``detector``: none for the CLIC ECAL (its names predate other
    detectors), the name of another shipped one, or a binning file's stem and content digest."""
    if detector.name == DEFAULT:
        return ""
    if detector.name in DETECTOR_NAMES:
        return f"_{detector.name}"
    path = Path(detector.name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:10]
    return f"_{path.stem}-{digest}"


def default_data_path(cfg: SyntheticConfig, detector: Detector | None = None) -> Path:
    """Where the synthetic set for ``cfg`` in ``detector`` (default the CLIC ECAL) is (or will
    be) cached."""
    detector = detector_for() if detector is None else detector
    low, high = cfg.energy_range
    spacing = "log" if cfg.log_uniform else ""
    name = (
        f"synthetic_{cfg.events}ev_{low:g}-{high:g}GeV{spacing}_seed{cfg.seed}"
        f"{detector_key(detector)}_gen{generator_version()}.h5"
    )
    return cache_dir() / name


def ensure_default_data(
    cfg: SyntheticConfig,
    detector: Detector | None = None,
    *,
    announce: Callable[[str], object] = print,
) -> Path:
    """Path of the cached synthetic set in ``detector`` (default the CLIC ECAL), generating it
    first if no process has yet."""
    detector = detector_for() if detector is None else detector
    path = default_data_path(cfg, detector)
    if path.is_file():
        announce(f"data: using cached synthetic data at {path}")
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 (held below)
    except OSError as exc:
        raise DataError(
            f"cannot create the data cache in {path.parent} ({exc.strerror}); "
            "set EVOGAN_CACHE_DIR to a writable directory"
        ) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.is_file():  # another rank generated it while we waited
            announce(f"data: using cached synthetic data at {path}")
            return path
        low, high = cfg.energy_range
        spacing = ", log-uniform" if cfg.log_uniform else ""
        where = "" if detector.name == DEFAULT else f" in {detector.describe()}"
        announce(
            f"data: no data files configured; generating {cfg.events} synthetic showers{where} "
            f"({low:g}-{high:g} GeV{spacing}, seed {cfg.seed}) once, caching at {path}"
        )
        _generate(cfg, detector, path)
    return path


def _generate(cfg: SyntheticConfig, detector: Detector, path: Path) -> None:
    """Write into a temporary file in the cache and rename it: no half-written cache."""
    from evogan.data.synthetic import write_synthetic

    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.h5")
    try:
        write_synthetic(
            tmp,
            cfg.events,
            cfg.energy_range,
            cfg.seed,
            detector=detector,
            log_uniform=cfg.log_uniform,
            progress=True,
        )
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)

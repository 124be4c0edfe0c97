"""The default data set: synthetic showers generated once per machine and cached.

Every workflow runs out of the box without the (non-downloadable) public files. The cache file
name carries everything the showers depend on (events, energy range, seed, generator version),
so a changed setting or generator never reuses stale showers. Many MPI ranks may start at the
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


def generator_version() -> str:
    """evogan's version plus a digest of the generator's source: any model change shows."""
    return f"{__version__}-{source_digest('evogan.data.synthetic')[:10]}"


def default_data_path(cfg: SyntheticConfig) -> Path:
    """Where the synthetic set for ``cfg`` is (or will be) cached."""
    low, high = cfg.energy_range
    name = (
        f"synthetic_{cfg.events}ev_{low:g}-{high:g}GeV_seed{cfg.seed}_gen{generator_version()}.h5"
    )
    return cache_dir() / name


def ensure_default_data(cfg: SyntheticConfig, *, announce: Callable[[str], object] = print) -> Path:
    """Path of the cached synthetic set, generating it first if no process has yet."""
    path = default_data_path(cfg)
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
        announce(
            f"data: no data files configured; generating {cfg.events} synthetic showers "
            f"({low:g}-{high:g} GeV, seed {cfg.seed}) once, caching at {path}"
        )
        _generate(cfg, path)
    return path


def _generate(cfg: SyntheticConfig, path: Path) -> None:
    """Write into a temporary file in the cache and rename it: no half-written cache."""
    from evogan.data.synthetic import write_synthetic

    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.h5")
    try:
        write_synthetic(tmp, cfg.events, cfg.energy_range, cfg.seed, progress=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)

"""``manifest.json``: what a run was started with (config, versions, seeds, ranks, git revision).

Resume reads it back to refuse a rank layout the checkpoints do not fit.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from evogan.errors import EvoganError
from evogan.store.rundir import RunDir
from evogan.store.state_files import read_state, require_keys

MANIFEST = "manifest.json"
_PACKAGES = ("evogan", "torch", "numpy", "mpi4py", "deap", "h5py", "pydantic")


def git_revision(where: Path | None = None) -> str | None:
    """The commit of the source tree evogan runs from (None outside a git checkout)."""
    where = where or Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def versions() -> dict[str, str | None]:
    """Versions of Python, the packages and the MPI library the run started (None where MPI
    has not started: importing ``mpi4py.MPI`` here would start it without the transport rule
    of :mod:`evogan.distributed.mpi`, which sits above this package)."""
    found: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    mpi = sys.modules.get("mpi4py.MPI")
    found["mpi"] = mpi.Get_library_version().splitlines()[0].strip() if mpi else None
    return found


def write_manifest(
    run: RunDir, config: dict[str, Any], layout: dict[str, Any], seeds: dict[str, Any]
) -> None:
    """Write the manifest of a new run (rank 0 only)."""
    run.write_json(
        MANIFEST,
        {
            "config": config,
            "versions": versions(),
            "seeds": seeds,
            "layout": layout,
            "git_revision": git_revision(),
            "host": platform.node(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    )


def check_resume_layout(run: RunDir, world_size: int, ranks_per_island: int) -> dict[str, Any]:
    """The manifest of ``run``; raises when this launch has another rank layout."""
    if not run.file(MANIFEST).is_file():
        raise EvoganError(
            f"{run.path} has no {MANIFEST}; --resume needs a run directory made by evogan evolve"
        )
    fix = (
        "restore it from a backup of the run; without it the run's rank layout is unknown, so "
        "start a new run"
    )
    manifest = read_state(run.file(MANIFEST), fix, keys=("layout",))
    layout = manifest["layout"]
    require_keys(run.file(MANIFEST), layout, ("world_size", "ranks_per_island", "islands"), fix)
    if (layout["world_size"], layout["ranks_per_island"]) != (world_size, ranks_per_island):
        raise EvoganError(
            f"{run.path} was run on {layout['world_size']} ranks ({layout['islands']} islands "
            f"of {layout['ranks_per_island']}); resume it with mpirun -n {layout['world_size']}"
            f" and the same islands.ranks_per_island, got {world_size} ranks with "
            f"ranks_per_island = {ranks_per_island}"
        )
    return manifest

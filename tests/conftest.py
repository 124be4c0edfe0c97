"""Shared fixtures: small synthetic files and a launcher for real ``mpirun`` subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


TIMING = ("seconds", "_per_s", "finished", "eval_share")
"""Parts of summary/metrics keys that hold wall-clock figures (differ between equal runs)."""


def untimed(record: dict) -> dict:
    """``record`` without wall-clock fields, also inside lists of records (per_island)."""
    return {
        k: [untimed(r) for r in v] if isinstance(v, list) and v and isinstance(v[0], dict) else v
        for k, v in record.items()
        if not any(t in k for t in TIMING)
    }


def mpi_env() -> dict[str, str]:
    """Environment for mpirun subprocesses (root is allowed: CI runs as root)."""
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
        PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        OMPI_MCA_osc="^ucx",  # the PyPI build's UCX one-sided component only warns here
    )
    return env


def mpirun(
    ranks: int, args: list[str], timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python args...`` under a real ``mpirun -n ranks`` and return the finished process."""
    beside_python = shutil.which("mpirun", path=str(Path(sys.executable).parent))
    launcher = beside_python or shutil.which("mpirun")
    if launcher is None:
        pytest.fail("mpirun not found: install the test extras (pip install -e '.[test]')")
    command = [launcher, "-n", str(ranks), "--oversubscribe", sys.executable, *args]
    return subprocess.run(
        command, env=mpi_env(), cwd=cwd or REPO, capture_output=True, text=True, timeout=timeout
    )


def evogan(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the ``evogan`` CLI in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "evogan", *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=mpi_env(),
    )

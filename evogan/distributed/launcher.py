"""The ``mpirun`` that belongs to the running Python.

The test extras install Open MPI from PyPI into the environment's ``bin``, beside the
interpreter. Benchmarks and tests that launch their own jobs look there first, so they run
the MPI that ``mpi4py`` was built against even when the environment is not activated, and
fall back to the first ``mpirun`` on ``PATH`` (a site's module).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def find_mpirun() -> str | None:
    """Path of the environment's ``mpirun``, else the first on ``PATH``, else None."""
    beside_python = shutil.which("mpirun", path=str(Path(sys.executable).parent))
    return beside_python or shutil.which("mpirun")


def mpirun_prefix(ranks: int) -> list[str]:
    """``mpirun -n ranks --oversubscribe`` with the launcher :func:`find_mpirun` picks."""
    launcher = find_mpirun()
    if launcher is None:
        raise FileNotFoundError(
            "mpirun not found: install the test extras (pip install -e '.[test]') "
            "or load your site's MPI module"
        )
    return [launcher, "-n", str(ranks), "--oversubscribe"]

"""``evogan evolve`` for the regressor: a whole GA (or hybrid) run, alone or as islands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evogan.config.regressor import RegressorConfig
from evogan.regressor.islands import IslandRun
from evogan.store import RunDir


def evolve_regressor(
    cfg: RegressorConfig,
    run_dir: str | Path | None = None,
    announce: Callable[[str], Any] = print,
    resume: bool = False,
) -> RunDir:
    """Check everything, then evolve (one island per ``islands.ranks_per_island`` ranks under
    mpirun, one island otherwise) and write the run directory; returns it.

    ``resume`` continues ``run_dir`` from its checkpoints. A SIGTERM/SIGINT ends every rank
    after a checkpoint, without a summary; the run is then resumed with ``--resume``.
    """
    return IslandRun(cfg, announce).execute(run_dir, resume)

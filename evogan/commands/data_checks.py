"""The refusals a command's data can earn, made from the files' metadata (or the synthetic
set's settings) before torch and MPI load: missing or unreadable files, a batch larger than a
rank's share of the training events, showers of another cell window than the spec's or too
few to score. Every rank checks alike, so under mpirun every rank refuses with the same line;
the trainers check again, with the same functions, against the data they read."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from evogan.distributed.failure import launched_ranks

BATCH_KEYS = {"evolve": "ga.batch_size", "train": "train.batch_size"}
"""Command -> the key of the regressor's batch it runs with (GA and hybrid, or RMSprop)."""


def check_data(command: str, config: BaseModel, source: Path | None = None) -> None:
    """Refuse, in one line, a run of ``config`` by ``evogan COMMAND`` whose data cannot serve
    it; ``source``: the config file (a search's base spec file is named from its folder)."""
    task = getattr(config, "task", None)
    if task == "gan3d":
        from evogan.gan3d.training.data_fit import check_planned_data

        check_planned_data(config, launched_ranks())
    elif task == "regressor":
        from evogan.regressor.data_fit import check_planned_data

        key = BATCH_KEYS[command]
        section, _, name = key.partition(".")
        check_planned_data(config, key, getattr(getattr(config, section), name))
    elif task == "search":
        from evogan.search.data_fit import check_planned_data

        check_planned_data(config, source)

"""Which run directory a GAN training writes: a new one, or (``resume``) the run it continues,
checked before anything is loaded so a resume that would not continue the same computation is
refused in one line naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evogan.config.base import validate
from evogan.config.gan import Gan3dConfig
from evogan.config.resume import is_resume_safe, stored_config
from evogan.distributed.launcher import resume_line
from evogan.distributed.mpi import MPI
from evogan.errors import EvoganError
from evogan.gan3d.training import checkpoint as ckpt
from evogan.store import CONFIG, RunDir
from evogan.store.folders import require_directory


def open_run(
    config: Gan3dConfig,
    world: MPI.Comm,
    run_dir: Path | None,
    resume: bool,
    until: int | None = None,
) -> tuple[RunDir, dict[str, Any] | None]:
    """A new run directory (made by rank 0; an existing non-empty one is refused), or with
    ``resume`` the run ``run_dir`` holds a committed checkpoint of, checked before anything is
    loaded; ``until``: the epoch the resumed training is to reach (refused when it is done)."""
    if not resume:
        path = None
        if world.rank == 0:
            name = config.run.name
            path = str(RunDir.create("gan3d", root=config.run.root, name=name, path=run_dir).path)
        return RunDir(world.bcast(path, root=0)), None
    if run_dir is None:
        raise EvoganError("resume needs the run directory to continue: --resume RUN")
    run = RunDir(run_dir)
    require_directory(run.path, "run directory to resume:")
    ckpt.checkpoint_folder(run)
    marker = ckpt.read_marker(run)
    if marker["world_size"] != world.size:
        raise EvoganError(
            f"{run.path} was trained on {marker['world_size']} ranks and must be resumed on as "
            f"many: run mpirun -n {marker['world_size']} (got {world.size})"
        )
    if until is not None and marker["epoch"] >= until:
        raise EvoganError(
            f"{run.path} already finished {marker['epoch']} epoch(s) and trainer.epochs = "
            f"{until}; raise it to continue, e.g. --set trainer.epochs="
            f"{marker['epoch'] + 1}"
        )
    check_same_computation(run, config)
    return run, marker


def check_same_computation(run: RunDir, config: Gan3dConfig) -> None:
    """Refuse, naming the key, a config that would not continue the stored computation: a key
    may differ from the stored config only where ``--set`` may change it on resume
    (:data:`evogan.config.resume.RESUME_SAFE`), so the CLI and the Python API keep one rule."""
    raw = stored_config(run.path)
    # keys added since the run was made count as their defaults
    stored = validate(Gan3dConfig, raw, source=str(run.file(CONFIG))).model_dump(mode="json")
    for key, old, new in _differences(stored, config.model_dump(mode="json")):
        if not is_resume_safe("gan3d", key):
            section = key.partition(".")[0]
            raise EvoganError(
                f"{run.path} was trained with a different {section}; {key} = {old!r} there, "
                f"{new!r} here: resume it with the config it stored: "
                f"{resume_line('train', run.path)}"
            )


def _differences(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, old value, new value) of every leaf where two config dumps differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(old.keys() | new.keys()):
            found += _differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return found
    return [] if old == new else [(prefix.rstrip("."), old, new)]


def resume_command(run: RunDir, world: MPI.Comm) -> str:
    """The command that resumes ``run`` on as many ranks as ``world`` has."""
    return resume_line("train", run.path, world.size)

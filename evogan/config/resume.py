"""What ``--set`` may change when a run is resumed: only keys that do not change what is
computed (how long it runs, how often it checkpoints and reports), never the network, data,
seed or algorithm, so a resumed run stays the continuation of the run it resumes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from evogan.errors import ConfigError
from evogan.store.folders import require_directory

# Task -> keys (a trailing ".*" allows the whole section) that --set may change on --resume.
RESUME_SAFE: dict[str, tuple[str, ...]] = {
    "regressor": ("ga.epochs", "checkpoint.every", "checkpoint.keep", "run.*"),
    "gan3d": (
        "trainer.epochs",
        "trainer.validate_every",
        "trainer.validate_every_seconds",
        "checkpoint.*",
        "run.*",
    ),
    "search": (
        "candidates",
        "campaign.top",
        "campaign.tensorboard",
        "campaign.mlflow",
        "final.*",
    ),
}

# Task, or task/backend where backends differ -> resume-safe keys that, set larger, give a
# finished run more to do.
EXTENDING: dict[str, tuple[str, ...]] = {
    "regressor": ("ga.epochs",),
    "gan3d": ("trainer.epochs",),
    "search": ("candidates", "final.top", "final.retrain_seeds"),
    "search/pbt": ("final.top", "final.retrain_seeds"),  # PBT trains workers, not candidates
}


def extending_keys(run: Path) -> tuple[str, ...]:
    """The keys a larger ``--set`` of which gives the finished run ``run`` more to do, for the
    task (and search backend) of its own ``config.yaml``; none when it has no config."""
    from evogan.config.base import read_yaml

    if not (run / "config.yaml").is_file():
        return ()
    raw = read_yaml(run / "config.yaml")
    task = str(raw.get("task", "regressor"))
    return EXTENDING.get(f"{task}/{raw.get('backend')}", EXTENDING.get(task, ()))


def is_resume_safe(task: str, key: str) -> bool:
    for allowed in RESUME_SAFE.get(task, ()):
        section = allowed.removesuffix(".*")
        if key == allowed or (allowed.endswith(".*") and key.startswith(section + ".")):
            return True
    return False


def check_resume_overrides(task: str, overrides: list[str]) -> None:
    """Refuse (naming the key) any override that would change what a resumed run computes."""
    for item in overrides:
        key = item.partition("=")[0].strip()
        if not is_resume_safe(task, key):
            allowed = ", ".join(RESUME_SAFE.get(task, ())) or "none"
            raise ConfigError(
                f"--set {key} would change what the resumed run computes; on --resume only "
                f"these may change: {allowed} (start a new run to change {key})"
            )


def load_run_config(run: Path, overrides: list[str]) -> BaseModel:
    """The run's own ``config.yaml`` (in today's key names) with resume-safe overrides applied."""
    from evogan.config import task_config
    from evogan.config.base import apply_overrides, validate

    path = run / "config.yaml"
    require_directory(run, "--resume: run directory", ConfigError)
    if not path.is_file():
        raise ConfigError(f"--resume {run}: not a run directory (no config.yaml)")
    stored = stored_config(run)
    task = str(stored.get("task", "regressor"))
    check_resume_overrides(task, overrides)
    model = task_config(task)
    config = validate(model, apply_overrides(copy.deepcopy(stored), overrides), source=str(path))
    if task == "gan3d":
        _check_decay_length(validate(model, stored, source=str(path)).trainer, config.trainer)
    return config


def stored_config(run: Path) -> dict[str, Any]:
    """``run``'s ``config.yaml`` as written, with today's key names (:func:`current_keys`)."""
    from evogan.config.base import read_yaml

    return current_keys(read_yaml(run / "config.yaml"))


def current_keys(stored: dict[str, Any]) -> dict[str, Any]:
    """A run's stored config with the keys earlier evogan wrote renamed to today's, so its runs
    resume: the regressor's ``migration.interval``/``k`` (now ``every``/``migrants``, the
    search's names) and ``run.energy_bins``, which every task's run section held and only the
    regressor reads."""
    raw = {key: dict(value) if isinstance(value, dict) else value for key, value in stored.items()}
    task = raw.get("task", "regressor")
    migration = raw.get("migration")
    if task == "regressor" and isinstance(migration, dict):
        for old, new in (("interval", "every"), ("k", "migrants")):
            if old in migration and new not in migration:
                migration[new] = migration.pop(old)
    if task != "regressor" and isinstance(raw.get("run"), dict):
        raw["run"].pop("energy_bins", None)
    return raw


def _check_decay_length(stored: Any, resumed: Any) -> None:
    """Refuse a new ``trainer.epochs`` for a run whose learning rates decay over its length
    (the search's inheriting members extend their parents' epochs through the Python API,
    where the decay is spread over the new length)."""
    if stored.lr_decay_from < 1 and resumed.epochs != stored.epochs:
        raise ConfigError(
            f"--set trainer.epochs={resumed.epochs}: this run decays its learning rates over its "
            f"trainer.epochs = {stored.epochs} (trainer.lr_decay_from = "
            f"{stored.lr_decay_from}), so a resume cannot change its length; start a new run "
            "for a longer training"
        )

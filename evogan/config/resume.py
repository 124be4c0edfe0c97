"""What ``--set`` may change when a run is resumed: only keys that do not change what is
computed (how long it runs, how often it checkpoints and reports), never the network, data,
seed or algorithm, so a resumed run stays the continuation of the run it resumes."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from evogan.errors import ConfigError

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
    "search": ("candidates", "campaign.top", "campaign.tensorboard", "final.*"),
}


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
    """The run's own ``config.yaml`` with resume-safe overrides applied."""
    from evogan.config import load_config
    from evogan.config.base import read_yaml

    path = run / "config.yaml"
    if not run.is_dir():
        raise ConfigError(f"--resume {run}: no such run directory")
    if not path.is_file():
        raise ConfigError(f"--resume {run}: not a run directory (no config.yaml)")
    task = read_yaml(path).get("task", "regressor")
    check_resume_overrides(str(task), overrides)
    return load_config(path, overrides)

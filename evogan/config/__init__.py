"""Typed, validated configs; every workflow's YAML file loads through :func:`load_config`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from evogan.config.base import StrictModel, apply_overrides, dump, read_yaml, validate
from evogan.config.data import DataConfig, SyntheticConfig
from evogan.config.gan import Gan3dConfig, GanSpec
from evogan.config.regressor import GAConfig, RegressorConfig, RegressorModelConfig, TrainConfig
from evogan.config.search import SearchConfig
from evogan.errors import ConfigError

__all__ = [
    "TASKS",
    "DataConfig",
    "GAConfig",
    "Gan3dConfig",
    "GanSpec",
    "RegressorConfig",
    "RegressorModelConfig",
    "SearchConfig",
    "StrictModel",
    "SyntheticConfig",
    "TrainConfig",
    "dump",
    "load_config",
]

TASKS: dict[str, type[BaseModel]] = {
    "regressor": RegressorConfig,
    "gan3d": Gan3dConfig,
    "search": SearchConfig,
}


def load_config(path: str | Path, overrides: list[str] | None = None) -> BaseModel:
    """Read ``path``, apply ``key=value`` overrides and validate against the file's ``task``."""
    raw = apply_overrides(read_yaml(path), list(overrides or []))
    task = raw.get("task", "regressor")
    if task not in TASKS:
        raise ConfigError(f"{path}: task = {task!r} is not allowed; allowed: {', '.join(TASKS)}")
    return validate(TASKS[task], raw, source=str(path))

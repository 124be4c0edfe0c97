"""Typed, validated configs: every workflow's YAML file loads through :func:`load_config`, which
validates it against its ``task``'s config class (``regressor``, ``gan3d``, ``search``) and turns
every problem into one line naming the key. The YAML helpers and :class:`StrictModel` (the base
of every section) live in :mod:`evogan.config.base`. The GAN task configs embed the 3DGAN spec of
:mod:`evogan.gan3d.model.spec`, which itself builds on ``config.base``; so this package names the
task config classes by module path and imports them when a config is loaded (and on first attribute
access), never when a section module is imported.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from evogan.config.base import StrictModel, apply_overrides, dump, read_yaml, validate
from evogan.config.data import DataConfig, SyntheticConfig
from evogan.config.regressor import GAConfig, RegressorConfig, RegressorModelConfig, TrainConfig
from evogan.errors import ConfigError

__all__ = [
    "TASKS",
    "DataConfig",
    "GAConfig",
    "Gan3dConfig",
    "RegressorConfig",
    "RegressorModelConfig",
    "SearchConfig",
    "StrictModel",
    "SyntheticConfig",
    "TrainConfig",
    "dump",
    "load_config",
    "task_config",
]

TASKS: dict[str, str] = {
    "regressor": "evogan.config.regressor:RegressorConfig",
    "gan3d": "evogan.config.gan:Gan3dConfig",
    "search": "evogan.config.search:SearchConfig",
}
"""Task name -> ``module:class`` of its config."""

_LAZY = {"Gan3dConfig": TASKS["gan3d"], "SearchConfig": TASKS["search"]}


def _resolve(target: str) -> type[BaseModel]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def task_config(task: str) -> type[BaseModel]:
    """The config class of ``task``."""
    return _resolve(TASKS[task])


def load_config(path: str | Path, overrides: list[str] | None = None) -> BaseModel:
    """Read ``path``, apply ``key=value`` overrides and validate against the file's ``task``."""
    raw = apply_overrides(read_yaml(path), list(overrides or []))
    task = raw.get("task", "regressor")
    if task not in TASKS:
        raise ConfigError(f"{path}: task = {task!r} is not allowed; allowed: {', '.join(TASKS)}")
    return validate(task_config(task), raw, source=str(path))


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _resolve(_LAZY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

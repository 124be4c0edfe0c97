"""The ``task: gan3d`` config: data, the architecture spec (:mod:`evogan.gan3d.model.spec`), the
data-parallel trainer, checkpoints and run output."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveInt, model_validator

from evogan.config.base import StrictModel
from evogan.config.data import DataConfig
from evogan.config.run import RunConfig
from evogan.config.trainer import TrainerConfig
from evogan.gan3d.model.spec import GanSpec, fit_to_data

__all__ = ["Gan3dConfig", "GanCheckpointConfig", "GanSpec"]


class GanCheckpointConfig(StrictModel):
    """When a training run commits a checkpoint: every ``every_epochs`` epochs, and mid-epoch
    once ``every_seconds`` have passed since the last one (0: epoch ends only)."""

    every_epochs: PositiveInt = 1
    every_seconds: float = Field(default=600.0, ge=0)


class Gan3dConfig(StrictModel):
    """``task: gan3d``: data, architecture spec, data-parallel trainer and run output."""

    task: Literal["gan3d"] = "gan3d"
    seed: int = 0
    data: DataConfig = Field(default_factory=DataConfig)
    spec: GanSpec
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    checkpoint: GanCheckpointConfig = Field(default_factory=GanCheckpointConfig)
    run: RunConfig = Field(default_factory=RunConfig)

    @model_validator(mode="before")
    @classmethod
    def _spec_for_detector(cls, raw: Any) -> Any:
        """The spec is written for ``data.detector`` (its shape from it where left out)."""
        if isinstance(raw, dict) and "spec" in raw:
            return {**raw, "spec": fit_to_data(raw["spec"], raw.get("data"))}
        return raw

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
    """When a training run commits a checkpoint: at epoch ends, and mid-epoch once enough
    time has passed since the last one."""

    every_epochs: PositiveInt = Field(default=1, description="epochs between checkpoints")
    every_seconds: float = Field(
        default=600.0, ge=0, description="seconds after which a checkpoint is due mid-epoch; 0: off"
    )


class Gan3dConfig(StrictModel):
    """``task: gan3d``: data, architecture spec, data-parallel trainer and run output."""

    task: Literal["gan3d"] = Field(default="gan3d", description="which task the file configures")
    seed: int = Field(default=0, description="root seed of every random stream of the run")
    data: DataConfig = Field(default_factory=DataConfig, description="the showers trained on")
    spec: GanSpec = Field(description="the 3DGAN architecture and its training hyper-parameters")
    trainer: TrainerConfig = Field(
        default_factory=TrainerConfig, description="how the training runs on its ranks"
    )
    checkpoint: GanCheckpointConfig = Field(
        default_factory=GanCheckpointConfig, description="when the training commits checkpoints"
    )
    run: RunConfig = Field(default_factory=RunConfig, description="where results go")

    @model_validator(mode="before")
    @classmethod
    def _spec_for_detector(cls, raw: Any) -> Any:
        """The spec is written for ``data.detector`` (its shape from it where left out)."""
        if isinstance(raw, dict) and "spec" in raw:
            return {**raw, "spec": fit_to_data(raw["spec"], raw.get("data"))}
        return raw

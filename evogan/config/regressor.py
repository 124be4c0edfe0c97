"""Configs of the 2D energy regressor: network, GA strategy, RMSprop baseline, run output."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, field_validator, model_validator
from pydantic_core import PydanticCustomError

from evogan.config.base import StrictModel
from evogan.config.data import DataConfig
from evogan.config.islands import CheckpointConfig, IslandsConfig, MigrationConfig
from evogan.config.run import RunConfig
from evogan.detectors import detector_for
from evogan.detectors.projection import image_shape, projection_axis
from evogan.errors import ConfigError

Schedule = Literal["constant", "step", "exponential"]


class RegressorModelConfig(StrictModel):
    """Conv2d -> ReLU -> pooling -> Linear, as in the GA study (docs/explanation/physics.md,
    section 5)."""

    filters: PositiveInt = 8
    kernel: PositiveInt = 5
    pool: PositiveInt = 2
    pooling: Literal["avg", "max"] = "avg"
    bias: bool = True
    readout: Literal["random", "least_squares"] = "random"
    readout_events: PositiveInt = 1024
    readout_ridge: float = Field(default=1e-4, gt=0)

    def check_fits(self, height: int, width: int, image: str = "") -> None:
        """Refuse, in one line, a kernel or pooling larger than an input image of ``height`` x
        ``width`` (``image``: whose image it is, for the message)."""
        if self.kernel > min(height, width):
            raise ConfigError(
                f"model.kernel must not exceed the input size {height}x{width}{image}, got "
                f"{self.kernel}; use model.kernel: {min(height, width)} or less"
            )
        conv_h, conv_w = height - self.kernel + 1, width - self.kernel + 1
        if self.pool > min(conv_h, conv_w):
            raise ConfigError(
                f"model.pool must not exceed the convolution output {conv_h}x{conv_w} "
                f"(input {height}x{width}{image}, kernel {self.kernel}), got {self.pool}; "
                f"use model.pool: {min(conv_h, conv_w)} or less, or a smaller model.kernel"
            )


class GAConfig(StrictModel):
    """Elitist (1+lambda) point-mutation strategy; defaults from Table 1 of the GA study."""

    strategy: Literal["plus_lambda", "hybrid"] = "plus_lambda"
    initial_parents: PositiveInt = 8
    children: PositiveInt = 8
    batch_size: PositiveInt = 128
    epochs: PositiveInt = 30
    mutation: Literal["add", "replace"] = "add"
    mutation_rate: float = Field(default=0.1, gt=0, le=1)
    mutation_power: float = Field(default=0.1, gt=0)
    replace_sigma: float = Field(default=0.1, gt=0)
    rate_schedule: Schedule = "step"
    power_schedule: Schedule = "constant"
    schedule_milestones: list[PositiveInt] = Field(default_factory=lambda: [10, 20])
    schedule_factor: float = Field(default=0.1, gt=0, le=1)
    schedule_gamma: float = Field(default=0.9, gt=0, le=1)
    step_adaptation: Literal["none", "success_rule"] = "none"
    adapt: Literal["power", "rate", "both"] = "power"
    adaptation_window: PositiveInt = 10
    adaptation_factor: float = Field(default=1.5, gt=1)
    adaptation_target: float = Field(default=0.1, gt=0, lt=1)
    adaptation_min: float = Field(default=1e-3, gt=0, le=1)  # bounds of the scale, which
    adaptation_max: float = Field(default=10.0, ge=1)  # starts at 1 (so min <= 1 <= max)
    acceptance: Literal["minibatch", "reevaluate"] = "minibatch"
    reevaluation_events: PositiveInt = 256
    reevaluation_first: NonNegativeInt = 0  # 0: score the whole sample at once
    reevaluation_z: float = Field(default=3.0, gt=0)
    hybrid_steps: PositiveInt = 1
    hybrid_lr: float = Field(default=1e-3, gt=0)
    hybrid_keep_steps: Literal["always", "no_worse", "compete"] = "always"
    hall_of_fame: PositiveInt = 1
    eval_block: PositiveInt = 36
    device: Literal["cpu", "cuda"] = "cpu"

    @model_validator(mode="after")
    def _first_stage_within_sample(self) -> GAConfig:
        """The first stage is part of the sample (raised as is: one line)."""
        first, events = self.reevaluation_first, self.reevaluation_events
        if first >= events:
            raise ConfigError(
                f"ga.reevaluation_first = {first} is not allowed: it must be below "
                f"ga.reevaluation_events = {events}; set it smaller, or 0 to score the whole "
                "sample at once"
            )
        return self


class TrainConfig(StrictModel):
    """Gradient baseline on the same network, data, batch and loss."""

    optimizer: Literal["rmsprop"] = "rmsprop"
    lr: float = Field(default=1e-3, gt=0)
    epochs: PositiveInt = 30
    batch_size: PositiveInt = 128


class RegressorRunConfig(RunConfig):
    """The shared run settings plus the energy bins of the regressor's resolution report."""

    energy_bins: PositiveInt = 10


def mape_fractions(targets: list[float]) -> list[float]:
    """Each test MAPE target is a fraction in (0, 1): summary keys are named in percent, so a
    target given in percent (5) would name and chase a MAPE of 500%."""
    outside = [target for target in targets if not 0 < target < 1]
    if outside:
        raise PydanticCustomError(
            "mape_fraction",
            "each target must be a fraction in (0, 1), e.g. 0.05 for 5% "
            f"(not {', '.join(f'{target:g}' for target in outside)})",
        )
    return targets


class RegressorConfig(StrictModel):
    """``task: regressor``: for ``evogan evolve`` (GA, hybrid) and ``evogan train`` (RMSprop)."""

    task: Literal["regressor"] = "regressor"
    seed: int = 0
    test_target_mape: list[float] = Field(default_factory=lambda: [0.10, 0.05])
    data: DataConfig = Field(default_factory=DataConfig)
    model: RegressorModelConfig = Field(default_factory=RegressorModelConfig)
    ga: GAConfig = Field(default_factory=GAConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    run: RegressorRunConfig = Field(default_factory=RegressorRunConfig)
    islands: IslandsConfig = Field(default_factory=IslandsConfig)
    migration: MigrationConfig = Field(default_factory=MigrationConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)

    _mape_fractions = field_validator("test_target_mape")(mape_fractions)

    @model_validator(mode="after")
    def _image_fits(self) -> RegressorConfig:
        """The projection fits the detector, and the network fits the image where the config
        fixes it: the synthetic set, or a cylindrical detector (its files must match it
        voxel for voxel); a Cartesian file may hold another window, checked once read. Raised
        as is (one line), so every rank refuses before anything is read or written."""
        detector = detector_for(self.data.detector)
        axis = projection_axis(detector, self.data.projection_axis)
        if not self.data.files or detector.geometry.kind == "cylindrical":
            height, width = image_shape(detector, axis)
            self.model.check_fits(height, width, f" ({detector.describe()} summed over {axis})")
        return self

    @model_validator(mode="after")
    def _islands_migrate(self) -> RegressorConfig:
        """An island sends at least its elite (raised as is: one line)."""
        if self.migration.migrants == 0:
            raise ConfigError(
                "migration.migrants = 0 is not allowed: a regressor island sends at least its "
                "elite; set 1 or more (a run on one island migrates nothing anyway)"
            )
        return self

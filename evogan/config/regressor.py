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

    filters: PositiveInt = Field(default=8, description="output channels of the convolution")
    kernel: PositiveInt = Field(default=5, description="side of the square convolution kernel")
    pool: PositiveInt = Field(default=2, description="side of the square pooling window")
    pooling: Literal["avg", "max"] = Field(default="avg", description="average or max pooling")
    bias: bool = Field(default=True, description="the convolution and readout have biases")
    readout: Literal["random", "least_squares"] = Field(
        default="random", description="start of the linear readout: drawn, or fitted to the data"
    )
    readout_events: PositiveInt = Field(
        default=1024, description="training events the least-squares readout is fitted on"
    )
    readout_ridge: float = Field(
        default=1e-4, gt=0, description="ridge term of the least-squares readout (unit-free)"
    )

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

    strategy: Literal["plus_lambda", "hybrid"] = Field(
        default="plus_lambda", description="(1+lambda), or with RMSprop steps on the elite"
    )
    initial_parents: PositiveInt = Field(
        default=8, description="random genomes of the first generation; the best is the elite"
    )
    children: PositiveInt = Field(default=8, description="lambda: mutated children per generation")
    batch_size: PositiveInt = Field(
        default=128, description="training events per generation (one minibatch)"
    )
    epochs: PositiveInt = Field(default=30, description="passes over the training set")
    mutation: Literal["add", "replace"] = Field(
        default="add", description="add Gaussian noise to weights, or redraw them"
    )
    mutation_rate: float = Field(
        default=0.1, gt=0, le=1, description="share of the weights a mutation changes"
    )
    mutation_power: float = Field(
        default=0.1, gt=0, description="standard deviation of the noise mutation adds"
    )
    replace_sigma: float = Field(
        default=0.1, gt=0, description="standard deviation of redrawn weights (mutation: replace)"
    )
    rate_schedule: Schedule = Field(default="step", description="how mutation_rate moves by epoch")
    power_schedule: Schedule = Field(
        default="constant", description="how mutation_power moves by epoch"
    )
    schedule_milestones: list[PositiveInt] = Field(
        default_factory=lambda: [10, 20], description="epochs at which a step schedule steps"
    )
    schedule_factor: float = Field(
        default=0.1, gt=0, le=1, description="factor a step schedule applies at each milestone"
    )
    schedule_gamma: float = Field(
        default=0.9, gt=0, le=1, description="factor an exponential schedule applies per epoch"
    )
    step_adaptation: Literal["none", "success_rule"] = Field(
        default="none", description="success_rule: scale the step by the share of improvements"
    )
    adapt: Literal["power", "rate", "both"] = Field(
        default="power", description="what the success rule scales"
    )
    adaptation_window: PositiveInt = Field(
        default=10, description="generations over which the success rule counts improvements"
    )
    adaptation_factor: float = Field(
        default=1.5, gt=1, description="factor by which the success rule moves its scale"
    )
    adaptation_target: float = Field(
        default=0.1, gt=0, lt=1, description="share of improvements the success rule aims at"
    )
    adaptation_min: float = Field(  # bounds of the scale, which starts at 1 (so min <= 1 <= max)
        default=1e-3, gt=0, le=1, description="lower bound of the success rule's scale"
    )
    adaptation_max: float = Field(
        default=10.0, ge=1, description="upper bound of the success rule's scale"
    )
    acceptance: Literal["minibatch", "reevaluate"] = Field(
        default="minibatch",
        description="a child replaces the elite when better on the minibatch or on a fresh sample",
    )
    reevaluation_events: PositiveInt = Field(
        default=256, description="size of the fresh sample of acceptance: reevaluate"
    )
    reevaluation_first: NonNegativeInt = Field(
        default=0, description="events scored first, deciding early when clear; 0: all at once"
    )
    reevaluation_z: float = Field(
        default=3.0, gt=0, description="standard errors that decide on the first events"
    )
    hybrid_steps: PositiveInt = Field(
        default=1, description="RMSprop steps on the elite after every selection (hybrid)"
    )
    hybrid_lr: float = Field(default=1e-3, gt=0, description="learning rate of the hybrid's steps")
    hybrid_keep_steps: Literal["always", "no_worse", "compete"] = Field(
        default="always", description="when the elite keeps its RMSprop steps (hybrid)"
    )
    hall_of_fame: PositiveInt = Field(default=1, description="best genomes of the run kept")
    eval_block: PositiveInt = Field(
        default=36, description="(event, genome) pairs per block of the batched evaluation"
    )
    device: Literal["cpu", "cuda"] = Field(
        default="cpu", description="where candidates are evaluated (mutation stays on the host)"
    )

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

    optimizer: Literal["rmsprop"] = Field(default="rmsprop", description="the optimiser")
    lr: float = Field(default=1e-3, gt=0, description="learning rate")
    epochs: PositiveInt = Field(default=30, description="passes over the training set")
    batch_size: PositiveInt = Field(default=128, description="training events per step")


class RegressorRunConfig(RunConfig):
    """The shared run settings plus the energy bins of the regressor's resolution report."""

    energy_bins: PositiveInt = Field(
        default=10, description="energy bins of the response and resolution report"
    )


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

    task: Literal["regressor"] = Field(
        default="regressor", description="which task the file configures"
    )
    seed: int = Field(default=0, description="root seed of every random stream of the run")
    test_target_mape: list[float] = Field(
        default_factory=lambda: [0.10, 0.05],
        description="test MAPEs (fractions) whose time to reach the summary records",
    )
    data: DataConfig = Field(default_factory=DataConfig, description="the showers trained on")
    model: RegressorModelConfig = Field(
        default_factory=RegressorModelConfig, description="the network"
    )
    ga: GAConfig = Field(default_factory=GAConfig, description="the GA (evogan evolve)")
    train: TrainConfig = Field(
        default_factory=TrainConfig, description="the RMSprop baseline (evogan train)"
    )
    run: RegressorRunConfig = Field(
        default_factory=RegressorRunConfig, description="where results go and what they report"
    )
    islands: IslandsConfig = Field(
        default_factory=IslandsConfig, description="how MPI ranks form islands"
    )
    migration: MigrationConfig = Field(
        default_factory=MigrationConfig, description="how islands exchange candidates"
    )
    checkpoint: CheckpointConfig = Field(
        default_factory=CheckpointConfig, description="when islands write checkpoints"
    )

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

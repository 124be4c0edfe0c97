"""The 3DGAN architecture spec and the ``task: gan3d`` config.

A :class:`GanSpec` is everything needed to build, train and invert a 3DGAN: the latent and its
conditioning, the generator's dense seed and convolution blocks, the discriminator's blocks,
pooling and heads, loss weights, optimiser settings and the cell transform. Its shapes are
checked block by block when it is validated (:mod:`evogan.gan3d.shapes`), so a spec that
cannot produce ``output_shape`` fails with one line naming the block before any allocation.
Specs live in YAML (``configs/gan3d*.yaml``) and are stored as JSON in every model file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from evogan.config.base import StrictModel, read_yaml, validate
from evogan.config.data import DataConfig
from evogan.config.parallel import ParallelConfig
from evogan.config.regressor import RunConfig
from evogan.errors import ConfigError

Triple = tuple[PositiveInt, PositiveInt, PositiveInt]
PadTriple = tuple[NonNegativeInt, NonNegativeInt, NonNegativeInt]
Activation = Literal["relu", "leaky_relu", "linear"]
Init = Literal["he_uniform", "glorot_uniform", "glorot_normal"]


class GeneratorBlock(StrictModel):
    """upsample -> ZeroPadding3D -> Conv3D -> activation -> [BatchNorm] (Keras order)."""

    filters: PositiveInt
    kernel: Triple
    padding: Literal["same", "valid"] = "valid"
    zero_pad: PadTriple = (0, 0, 0)
    upsample: Triple = (1, 1, 1)
    activation: Activation = "relu"
    batch_norm: bool = False
    bias: bool = True
    init: Init = "he_uniform"


class DiscriminatorBlock(StrictModel):
    """ZeroPadding3D -> Conv3D -> activation -> [BatchNorm] -> [Dropout] (Keras order)."""

    filters: PositiveInt
    kernel: Triple
    padding: Literal["same", "valid"] = "valid"
    zero_pad: PadTriple = (0, 0, 0)
    activation: Activation = "leaky_relu"
    batch_norm: bool = False
    dropout: float = Field(default=0.0, ge=0, lt=1)
    bias: bool = True
    init: Init = "glorot_uniform"


class PoolingSpec(StrictModel):
    """Pooling between the last discriminator block and the flatten."""

    kind: Literal["avg", "max"] = "avg"
    size: Triple = (2, 2, 2)


class ConditioningSpec(StrictModel):
    """How the primary energy (and angle) enter the latent vector.

    ``concat``: latent = [E/energy_scale, theta (if angle), normal draws] (variable-angle model);
    ``multiply``: latent = normal draws x E/energy_scale (fixed-angle model).
    """

    mode: Literal["concat", "multiply"] = "concat"
    angle: bool = False
    energy_scale: float = Field(default=100.0, gt=0)


class HeadsSpec(StrictModel):
    """Discriminator outputs besides real/fake: trainable energy regression, fixed sums."""

    energy: bool = True
    ecal_sum: bool = True
    angle: bool = False


class LossWeights(StrictModel):
    """Weights of BCE(real/fake), MAPE(energy), MAE(angle), MAPE(ECAL sum)."""

    real_fake: float = Field(default=3.0, ge=0)
    energy: float = Field(default=0.1, ge=0)
    angle: float = Field(default=25.0, ge=0)
    ecal_sum: float = Field(default=0.1, ge=0)


class GanSpec(StrictModel):
    """A complete, shape-checked 3DGAN architecture with its training hyper-parameters."""

    name: str = "gan3d"
    output_shape: Triple
    latent_size: PositiveInt
    conditioning: ConditioningSpec = Field(default_factory=ConditioningSpec)
    dense_seed: tuple[PositiveInt, PositiveInt, PositiveInt, PositiveInt]  # (C, X, Y, Z)
    generator: list[GeneratorBlock] = Field(min_length=1)
    discriminator: list[DiscriminatorBlock] = Field(min_length=1)
    pooling: PoolingSpec = Field(default_factory=PoolingSpec)
    heads: HeadsSpec = Field(default_factory=HeadsSpec)
    loss_weights: LossWeights = Field(default_factory=LossWeights)
    leaky_slope: float = Field(default=0.3, ge=0)  # Keras LeakyReLU default
    batch_norm_eps: float = Field(default=1e-3, gt=0)
    batch_norm_momentum: float = Field(default=0.01, gt=0, le=1)  # PyTorch convention
    g_lr: float = Field(default=1e-3, gt=0)
    d_lr: float = Field(default=1e-3, gt=0)
    rmsprop_alpha: float = Field(default=0.9, gt=0, lt=1)  # Keras rho
    rmsprop_eps: float = Field(default=1e-7, gt=0)
    batch_size: PositiveInt = 64
    label_flip: float = Field(default=0.05, ge=0, lt=0.5)
    generator_steps: PositiveInt = 2
    cell_scale: float = Field(default=1.0, gt=0)  # network cell = (cell_scale * GeV) ** power
    cell_power: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> GanSpec:
        cond = self.conditioning
        if cond.mode == "multiply" and cond.angle:
            raise ConfigError(
                "spec: conditioning.angle needs conditioning.mode = 'concat', got 'multiply'"
            )
        if cond.mode == "concat" and self.latent_size <= 1 + int(cond.angle):
            raise ConfigError(
                f"spec: latent_size must leave room for noise after the {1 + int(cond.angle)} "
                f"condition slot(s), got {self.latent_size}"
            )
        if self.heads.angle and not cond.angle:
            raise ConfigError(
                "spec: heads.angle needs conditioning.angle = true (the angle is its target)"
            )
        if self.generator[-1].filters != 1:
            raise ConfigError(
                f"spec: the last generator block must have 1 filter (one energy per cell), "
                f"got {self.generator[-1].filters}"
            )
        # Imported here: the shape arithmetic lives with the models but needs no torch.
        from evogan.gan3d.shapes import discriminator_layers, generator_layers

        generator_layers(self)
        discriminator_layers(self)
        return self

    @property
    def noise_size(self) -> int:
        """Normal draws in the latent vector (the rest are condition slots)."""
        if self.conditioning.mode == "multiply":
            return self.latent_size
        return self.latent_size - 1 - int(self.conditioning.angle)


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
    trainer: ParallelConfig = Field(default_factory=ParallelConfig)
    checkpoint: GanCheckpointConfig = Field(default_factory=GanCheckpointConfig)
    run: RunConfig = Field(default_factory=RunConfig)


def load_spec(path: str | Path) -> GanSpec:
    """A spec from YAML: either a bare spec or a full ``task: gan3d`` config's ``spec``."""
    raw = read_yaml(path)
    if "spec" in raw:
        raw = raw["spec"]
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: spec must be a mapping, got {type(raw).__name__}")
    return validate(GanSpec, raw, source=str(path))

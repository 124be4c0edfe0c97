"""The ``trainer`` section of GAN training: its length and batches, how ranks share the work
(sync all-reduce or SAGIPS ARAR), how the passes run, and validation during training."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from evogan.config.base import StrictModel
from evogan.errors import ConfigError


class TrainerConfig(StrictModel):
    """How one GAN training runs: its length and batches, how ranks share the work, how the
    passes run and validation during training; see docs/explanation/parallel.md for choosing a mode.

    ``sync``: every rank holds identical replicas of both networks and gradients are averaged
    with all-reduce each step. ``arar`` (SAGIPS): every rank keeps its own discriminator and
    sends its generator gradients around a ring without waiting; ``group_size`` ranks form an
    inner ring used every step, their leaders an outer ring fed every ``outer_every`` epochs.
    ``ring_buffers: device`` hands torch tensors on the GPU to MPI directly, which needs a
    CUDA-aware MPI. The ``gloo`` and ``nccl`` backends (torch.distributed, set up from the MPI
    communicator) overlap the all-reduce with the backward pass, as ``overlap`` makes the
    ``mpi`` backend do on the CPU. How the forward passes run:
    :mod:`evogan.gan3d.model.precision`.

    Validation during training (off unless ``validate_every`` or ``validate_every_seconds`` is
    set) scores rank 0's generator on held-out showers of the test split and keeps the best one
    (docs/tutorials/gan.md); the scored and saved generators get standing batch-norm statistics
    (:mod:`evogan.gan3d.training.standing_stats`), and with ``generator_average`` they are an
    exponential moving average of the generator's weights
    (:mod:`evogan.gan3d.training.weight_average`; 0.995 averages over about the last 200 steps
    once past the warm-up, over about the last ninth of the steps so far before). The learning
    rates follow :mod:`evogan.gan3d.training.lr_decay`.
    """

    mode: Literal["sync", "arar"] = Field(
        default="sync", description="sync all-reduce, or SAGIPS asynchronous rings (arar)"
    )
    group_size: PositiveInt | Literal["node"] | None = Field(
        default=None,
        description="arar: ranks per inner ring; node: a node's ranks; null: all ranks",
    )
    outer_every: PositiveInt = Field(
        default=1, description="arar: epochs between feeds of the leaders' outer ring"
    )
    rma: bool = Field(default=False, description="arar: the inner ring in MPI one-sided windows")
    epochs: PositiveInt = Field(default=1, description="epochs of the training")
    steps_per_epoch: PositiveInt | None = Field(
        default=None, description="steps per epoch at most; null: every full batch of the shard"
    )
    batch_size: PositiveInt | None = Field(
        default=None, description="showers per rank and step; null: the spec's batch_size"
    )
    shuffle: bool = Field(default=True, description="shuffle showers within each read chunk")
    bucket_mb: float = Field(
        default=4.0, gt=0, description="sync: MiB of gradients per all-reduce bucket"
    )
    ring_depth: PositiveInt = Field(
        default=2, description="arar: gradient messages a rank may have in flight per ring"
    )
    ring_buffers: Literal["auto", "host", "device"] = Field(
        default="auto",
        description="arar: ring payloads in host or device memory; auto: device if CUDA-aware",
    )
    device: Literal["cpu", "cuda"] = Field(default="cpu", description="where the networks train")
    backend: Literal["auto", "mpi", "gloo", "nccl"] = Field(
        default="auto",
        description="sync: what carries the all-reduce; auto: nccl on several GPUs, else mpi",
    )
    overlap: bool = Field(
        default=False, description="sync, mpi, CPU: all-reduce buckets during the backward pass"
    )
    precision: Literal["float32", "bf16"] = Field(
        default="float32", description="forward passes in float32 or bf16 autocast"
    )
    channels_last: bool = Field(
        default=False, description="channels-last memory format for the 3D convolutions"
    )
    compile: bool = Field(default=False, description="torch.compile the forward passes")
    convolution: Literal["direct", "fft"] = Field(
        default="direct",
        description="large-kernel convolutions computed directly or as FFT products",
    )
    validate_every: PositiveInt | None = Field(
        default=None, description="epochs between validations; null: none by epoch"
    )
    validate_every_seconds: float | None = Field(
        default=None, gt=0, description="seconds after which a validation is due; null: none"
    )
    validation_events: PositiveInt | None = Field(
        default=None, description="held-out showers a validation scores; null: the test split"
    )
    validation_bins: PositiveInt = Field(
        default=5, description="energy bins of the validation score"
    )
    standing_batches: NonNegativeInt = Field(
        default=100,
        description="batches for standing batch-norm statistics; 0: the running averages",
    )
    generator_average: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="decay per step of the generator's weight average; 0: off",
    )
    lr_decay_from: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="share of the epochs after which both learning rates fall linearly to 0",
    )

    @model_validator(mode="after")
    def _mode_options(self) -> TrainerConfig:
        if self.mode == "sync" and self.rma:
            raise ConfigError(
                "trainer.rma = true needs trainer.mode = 'arar' (sync mode uses all-reduce)"
            )
        if self.mode == "sync" and self.group_size is not None:
            raise ConfigError(
                f"trainer.group_size applies to trainer.mode = 'arar' only, got "
                f"trainer.group_size = {self.group_size!r} with trainer.mode = 'sync'"
            )
        if self.ring_buffers != "auto" and self.mode != "arar":
            raise ConfigError(
                f"trainer.ring_buffers = {self.ring_buffers!r} applies to trainer.mode = 'arar' "
                "only (sync mode's buffers follow trainer.backend); remove trainer.ring_buffers"
            )
        if self.ring_buffers == "device" and self.rma:
            raise ConfigError(
                "trainer.ring_buffers = 'device' cannot go with trainer.rma = true (RMA windows "
                "are host memory); use trainer.ring_buffers: auto or host, or trainer.rma: false"
            )
        if self.backend in ("gloo", "nccl") and self.mode != "sync":
            raise ConfigError(
                f"trainer.backend = {self.backend!r} applies to trainer.mode = 'sync' only (arar "
                "rings use MPI); use trainer.backend: mpi or auto"
            )
        if self.overlap and self.mode != "sync":
            raise ConfigError(
                "trainer.overlap = true applies to trainer.mode = 'sync' only (arar rings never "
                "wait); remove trainer.overlap"
            )
        if self.overlap and self.backend in ("gloo", "nccl"):
            raise ConfigError(
                f"trainer.overlap = true applies to trainer.backend = 'mpi' (the {self.backend} "
                "backend always overlaps); remove trainer.overlap"
            )
        if self.overlap and self.device == "cuda":
            raise ConfigError(
                "trainer.overlap = true applies to trainer.device = 'cpu' (it overlaps host "
                "buffers); on GPUs remove it: trainer.backend nccl or auto overlap on the device"
            )
        if self.backend == "nccl" and self.device != "cuda":
            raise ConfigError(
                f"trainer.backend = 'nccl' needs trainer.device = 'cuda', got trainer.device = "
                f"{self.device!r}; on CPU use trainer.backend: mpi, gloo or auto"
            )
        if self.validate_every is not None and self.validate_every > self.epochs:
            raise ConfigError(
                f"trainer.validate_every = {self.validate_every} is larger than trainer.epochs = "
                f"{self.epochs}, "
                "so no validation would run; lower trainer.validate_every or raise trainer.epochs"
            )
        return self

    def rank_batch(self, spec_batch: int) -> int:
        """Showers per rank and step: ``batch_size``, else the spec's ``batch_size``."""
        return self.batch_size or spec_batch

    @property
    def validates(self) -> bool:
        """Whether the training scores its generator on held-out showers as it goes."""
        return self.validate_every is not None or self.validate_every_seconds is not None

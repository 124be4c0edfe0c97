"""The ``trainer`` section of GAN training: its length and batches, how ranks share the work
(sync all-reduce or SAGIPS ARAR), how the passes run, and validation during training."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from evogan.config.base import StrictModel
from evogan.errors import ConfigError


class TrainerConfig(StrictModel):
    """How one GAN training runs: ``epochs`` of ``steps_per_epoch`` steps on ``batch_size``
    showers, and how ranks share the work; see docs/explanation/parallel.md for choosing a mode.

    ``sync``: every rank holds identical replicas of both networks and gradients are averaged
    with all-reduce each step. ``arar`` (SAGIPS): every rank keeps its own discriminator and
    sends its generator gradients around a ring without waiting; ``group_size`` ranks form an
    inner ring used every step, their leaders an outer ring fed every ``outer_every`` epochs;
    ``rma`` moves the inner ring into MPI one-sided windows. ``ring_buffers`` says where the
    rings' payloads live: ``host`` (numpy arrays; a GPU run copies gradients through host
    memory), ``device`` (torch tensors on the training device handed to MPI directly, which on
    a GPU needs a CUDA-aware MPI), ``auto`` (``device`` on GPUs when the MPI says it is
    CUDA-aware and ``rma`` is off, else ``host``).

    ``backend`` carries the sync all-reduce: ``mpi`` (host buffers, any MPI), ``gloo`` or
    ``nccl`` (torch.distributed, set up from the MPI communicator, all-reduce overlapped with
    the backward pass), ``auto`` (nccl for more than one rank on CUDA when torch has NCCL, else
    mpi). ``overlap``: the ``mpi`` backend starts a non-blocking ``Iallreduce`` per bucket from
    gradient hooks during the backward pass, as gloo and NCCL always do (CPU only).
    ``precision``, ``channels_last``, ``compile`` and ``convolution`` (``direct`` or ``fft``)
    choose how the G and D forward passes run (:mod:`evogan.gan3d.model.precision`).

    Validation during training (off unless ``validate_every`` or ``validate_every_seconds`` is
    set) scores rank 0's generator on ``validation_events`` held-out showers of the test split
    and keeps the best one (docs/tutorials/gan.md). The scored and saved generators first get
    standing batch-norm statistics from ``standing_batches`` training-sized batches (0: the running
    averages as trained; :mod:`evogan.gan3d.training.standing_stats`). ``generator_average``:
    the decay per step of an exponential moving average of the generator's weights that validations
    score and saves write instead of the last step's weights (0: off; 0.995 averages over
    about the last 200 steps once past the warm-up, over about the last ninth of the steps so
    far before; :mod:`evogan.gan3d.training.weight_average`). ``lr_decay_from``: the fraction of the
    ``epochs`` after which both learning rates fall linearly towards 0 at the last step (1: a
    constant rate; :mod:`evogan.gan3d.training.lr_decay`).
    """

    mode: Literal["sync", "arar"] = "sync"
    group_size: PositiveInt | Literal["node"] | None = None
    outer_every: PositiveInt = 1
    rma: bool = False
    epochs: PositiveInt = 1
    steps_per_epoch: PositiveInt | None = None
    batch_size: PositiveInt | None = None
    shuffle: bool = True
    bucket_mb: float = Field(default=4.0, gt=0)
    ring_depth: PositiveInt = 2
    ring_buffers: Literal["auto", "host", "device"] = "auto"
    device: Literal["cpu", "cuda"] = "cpu"
    backend: Literal["auto", "mpi", "gloo", "nccl"] = "auto"
    overlap: bool = False
    precision: Literal["float32", "bf16"] = "float32"
    channels_last: bool = False
    compile: bool = False
    convolution: Literal["direct", "fft"] = "direct"
    validate_every: PositiveInt | None = None
    validate_every_seconds: float | None = Field(default=None, gt=0)
    validation_events: PositiveInt | None = None
    validation_bins: PositiveInt = 5
    standing_batches: NonNegativeInt = 100
    generator_average: float = Field(default=0.0, ge=0, lt=1)
    lr_decay_from: float = Field(default=1.0, ge=0, le=1)

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

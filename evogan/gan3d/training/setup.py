"""What a GAN training settles before its first step: the device and cores of each rank, the
gradient all-reduce backend and how forward passes run, the data each rank reads, the batch and
epoch length, and the run manifest. Problems a user can fix (no GPU, no NCCL, too little data)
are refused here in one line, before any run directory exists."""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from evogan import __version__
from evogan.config.data import DataConfig
from evogan.config.trainer import TrainerConfig
from evogan.distributed.comm import Layout, node_position
from evogan.distributed.cuda_aware import mpi_cuda_aware
from evogan.distributed.mpi import MPI
from evogan.distributed.torch_group import backend_available
from evogan.errors import EvoganError
from evogan.gan3d.model.precision import (
    ForwardOptions,
    bf16_faster_here,
    check_bf16,
    compile_problem,
)
from evogan.gan3d.training.data_fit import epoch_shape, held_out_view


@dataclass(frozen=True)
class RankSetup:
    """How this rank runs, settled before any run directory exists (:func:`rank_setup`): its
    device, sync mode's all-reduce backend (:func:`rank_backend`), how the forward passes run
    (:func:`forward_options`), where arar's ring buffers live (None: host memory;
    :func:`ring_device`), and the hints to say once training starts."""

    device: str = "cpu"
    backend: str = "mpi"
    forward: ForwardOptions = field(default_factory=ForwardOptions)
    ring_device: str | None = None
    hints: tuple[str, ...] = ()


CPU = RankSetup()
"""A rank on the CPU with the default forward passes, MPI all-reduce and host ring buffers."""


def rank_setup(settings: TrainerConfig, world: MPI.Comm) -> RankSetup:
    """This rank's :class:`RankSetup` (collective); refuses what the machine cannot run."""
    device = rank_device(settings, world)
    sharing = ranks_per_gpu(world) if device.startswith("cuda") else 1
    backend = rank_backend(settings, device, world.size, sharing)
    forward, hints = forward_options(settings, device, world)
    ring, ring_hints = ring_device(settings, device, world)
    return RankSetup(device, backend, forward, ring, tuple(hints + ring_hints))


def rank_device(settings: TrainerConfig, world: MPI.Comm) -> str:
    """``cpu``, or the GPU of this rank among those of its node."""
    if settings.backend == "nccl" and not torch.cuda.is_available():
        raise EvoganError(
            "trainer.backend = 'nccl' needs a CUDA GPU but torch sees none; use trainer.backend: "
            "mpi, gloo or auto with trainer.device: cpu"
        )
    if settings.device == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise EvoganError("trainer.device = 'cuda' but torch sees no GPU; use trainer.device: cpu")
    local, _ = node_position(world)
    torch.backends.cudnn.benchmark = True  # shapes are fixed for a whole training: autotune once
    return f"cuda:{local % torch.cuda.device_count()}"


def ranks_per_gpu(world: MPI.Comm) -> int:
    """The most ranks that share one GPU on any node (collective; 0 where torch sees none)."""
    _, local_ranks = node_position(world)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return world.allreduce(-(-local_ranks // gpus) if gpus else 0, op=MPI.MAX)


def rank_backend(settings: TrainerConfig, device: str, ranks: int, sharing: int = 1) -> str:
    """The backend of sync mode's gradient all-reduce: ``mpi``, ``gloo`` or ``nccl`` (arar:
    always ``mpi``); ``auto`` takes nccl on CUDA when torch has it, there is more than one
    rank to reduce over and each rank has a GPU of its own (``sharing``: the most ranks on one
    GPU; NCCL refuses two ranks on one device), else mpi."""
    backend = settings.backend
    if settings.mode != "sync":
        return "mpi"
    if backend == "auto":
        gpu = device.startswith("cuda") and ranks > 1 and sharing <= 1
        return "nccl" if gpu and backend_available("nccl") else "mpi"
    if backend == "nccl" and ranks > 1 and sharing > 1:
        raise EvoganError(
            f"trainer.backend = 'nccl' needs a GPU per rank, but {sharing} ranks share one GPU "
            "on a node; launch at most one rank per GPU, or use trainer.backend: mpi or auto"
        )
    if backend != "mpi" and not backend_available(backend):
        others = ", ".join(b for b in ("mpi", "gloo", "nccl") if b != backend)
        raise EvoganError(
            f"trainer.backend = {backend!r} but this torch ({torch.__version__}) has no "
            f"{backend} backend; use trainer.backend: {others} or auto"
        )
    return backend


def forward_options(
    settings: TrainerConfig, device: str, world: MPI.Comm
) -> tuple[ForwardOptions, list[str]]:
    """``trainer.precision``, ``channels_last``, ``compile`` and ``convolution`` for this rank
    (collective), and the hints to say once the run is set up (:func:`evogan.logs.hint`):
    bf16 on a GPU without it is refused; where torch.compile fails on any rank, every rank
    runs eagerly and a hint says why; others say that FFT convolutions on CPUs are slower and
    that bf16 is faster on a CPU with AMX."""
    gpu = device.startswith("cuda")
    if settings.precision == "bf16":
        check_bf16(device, "trainer.precision = 'bf16'", "trainer.precision: float32")
    compiled, hints = settings.compile, []
    if compiled:
        problems = [p for p in world.allgather(compile_problem(device)) if p is not None]
        if problems:
            compiled = False
            hints.append(
                f"trainer.compile = true but torch.compile does not work here ({problems[0]}); "
                "G and D run eagerly"
            )
    if settings.convolution == "fft" and not gpu:
        hints.append(
            "trainer.convolution = 'fft' on CPUs runs slower than direct convolutions "
            "(docs/performance.md); it is the GPU setting"
        )
    if bf16_faster_here(device, settings.precision):
        hints.append(
            "this CPU has AMX bf16 tiles: trainer.precision: bf16 trains 1.7-2.7x faster, "
            "to the same validation score within seed noise (docs/explanation/parallel.md)"
        )
    options = ForwardOptions(
        settings.precision, settings.channels_last, compiled, settings.convolution
    )
    return options, hints


def ring_device(
    settings: TrainerConfig, device: str, world: MPI.Comm
) -> tuple[str | None, list[str]]:
    """Where arar's ring buffers live: ``device`` (torch tensors handed to MPI) or None (host
    numpy arrays), as ``trainer.ring_buffers`` asks, and on GPUs the hint that says which and
    why. Collective."""
    if settings.mode != "arar":
        return None, []
    gpu = device.startswith("cuda")
    aware = world.allgather(mpi_cuda_aware()) if gpu else []
    on_device, reason = choose_ring_buffers(settings, gpu, aware)
    hints = []
    if gpu:
        how = "move as device buffers" if on_device else "are copied through host memory"
        hints.append(f"trainer.mode = 'arar' on GPUs: ring gradients {how} ({reason})")
    return (device if on_device else None), hints


def choose_ring_buffers(
    settings: TrainerConfig, gpu: bool, aware: list[bool | None]
) -> tuple[bool, str]:
    """Whether the ring buffers go on the training device, and why in words; ``aware`` holds
    every rank's :func:`mpi_cuda_aware`. Device buffers with an MPI that says it is not
    CUDA-aware would crash inside MPI, so asking for them there is refused."""
    choice = settings.ring_buffers
    if not gpu:
        return choice == "device", "the CPU's memory is host memory"
    if choice == "host":
        return False, "trainer.ring_buffers: host"
    if settings.rma:
        return False, "trainer.rma: RMA windows are host memory"
    if False in aware:
        if choice == "device":
            raise EvoganError(
                f"trainer.ring_buffers = 'device' but the MPI on rank {aware.index(False)} says "
                "it is not CUDA-aware; use trainer.ring_buffers: auto or host, or an MPI built "
                "with CUDA support"
            )
        return False, "this MPI is not CUDA-aware"
    if None in aware:
        if choice == "device":
            return True, "trainer.ring_buffers: device; this MPI does not say it is CUDA-aware"
        return False, (
            "this MPI does not say whether it is CUDA-aware; set trainer.ring_buffers: device "
            "if it is"
        )
    return True, "this MPI is CUDA-aware"


def share_cores(world: MPI.Comm) -> None:
    """Give each rank its share of the node's cores: torch's default of one thread per core
    in every rank oversubscribes the node as two ranks share it."""
    _, local_ranks = node_position(world)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    share = max(1, (cores or 1) // local_ranks)
    if torch.get_num_threads() > share:
        torch.set_num_threads(share)


def load_data(
    data: DataConfig, settings: TrainerConfig, world: MPI.Comm, quiet: bool = False
) -> tuple[Any, Any]:
    """This rank's training shard and the held-out validation set (test split); rank 0 says
    what it read unless ``quiet``."""
    from evogan.data.reader import open_dataset

    announce = print if world.rank == 0 and not quiet else (lambda _message: None)
    train, test = open_dataset(data, announce=announce)
    wanted = settings.validation_events or len(test)
    if wanted > len(test):
        announce(
            f"note: trainer.validation_events = {wanted}, but the test split holds {len(test)} "
            f"showers; validating on all {len(test)}"
        )
    return train.shard(world.rank, world.size), held_out_view(settings, test)


def batch_shape(
    settings: TrainerConfig, spec_batch: int, world: MPI.Comm, shard: Any, held_out: Any
) -> tuple[int, int]:
    """(batch per rank, steps per epoch) of the shards the ranks hold (collective), refusing
    data too small for them in one line (:func:`~evogan.gan3d.training.data_fit.epoch_shape`)."""
    smallest = world.allreduce(len(shard), op=MPI.MIN)
    return epoch_shape(settings, spec_batch, smallest, len(held_out))


def manifest(
    seed: int,
    settings: TrainerConfig,
    layout: Layout,
    layouts: list[dict[str, Any]],
    rank: RankSetup,
) -> dict[str, Any]:
    """The run's ``manifest.json``: versions, seed, mode, the resolved all-reduce backend, ring
    buffers (``host`` or ``device``; None in sync mode) and forward options, and where every
    rank ran."""
    forward = rank.forward
    buffers = None
    if settings.mode == "arar":
        buffers = "host" if rank.ring_device is None else "device"
    return {
        "task": "gan3d",
        "evogan": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "mpi": MPI.Get_library_version().splitlines()[0],
        "seed": seed,
        "mode": settings.mode,
        "rma": settings.rma,
        "backend": rank.backend,
        "ring_buffers": buffers,
        "precision": forward.precision,
        "channels_last": forward.channels_last,
        "compile": forward.compile,
        "world_size": layout.world.size,
        "groups": len({entry["group"] for entry in layouts}),
        "ranks": layouts,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }

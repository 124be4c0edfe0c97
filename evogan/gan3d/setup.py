"""What a GAN training settles before its first step: the device and cores of each rank, the
data each rank reads, the batch and epoch length, and the run manifest. Problems a user can fix
(no GPU, too little data) are refused here in one line, before any run directory exists."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

import numpy as np
import torch
from mpi4py import MPI

from evogan import __version__
from evogan.config.data import DataConfig
from evogan.config.parallel import ParallelConfig
from evogan.distributed.comm import Layout
from evogan.errors import EvoganError
from evogan.gan3d.validation import MIN_VALIDATION_EVENTS


def rank_device(settings: ParallelConfig, world: MPI.Comm) -> str:
    """``cpu``, or the GPU of this rank among those of its node."""
    if settings.device == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise EvoganError("trainer.device = 'cuda' but torch sees no GPU; use trainer.device: cpu")
    node = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.rank)
    local = node.rank
    node.Free()
    torch.backends.cudnn.benchmark = True  # shapes are fixed for a whole training: autotune once
    return f"cuda:{local % torch.cuda.device_count()}"


def share_cores(world: MPI.Comm) -> None:
    """Give each rank its share of the node's cores: torch's default of one thread per core
    in every rank oversubscribes the node as soon as two ranks share it."""
    node = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.rank)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    share = max(1, (cores or 1) // node.size)
    node.Free()
    if torch.get_num_threads() > share:
        torch.set_num_threads(share)


def load_data(data: DataConfig, settings: ParallelConfig, world: MPI.Comm) -> tuple[Any, Any]:
    """This rank's training shard and the held-out validation set (test split)."""
    from evogan.data.reader import open_dataset

    announce = print if world.rank == 0 else (lambda _message: None)
    train, test = open_dataset(data, announce=announce)
    wanted = settings.validation_events or len(test)
    return train.shard(world.rank, world.size), test.take(min(wanted, len(test)))


def batch_shape(
    settings: ParallelConfig, spec_batch: int, world: MPI.Comm, shard: Any, held_out: Any
) -> tuple[int, int]:
    """(batch per rank, steps per epoch), refusing data too small for them in one line."""
    batch = settings.rank_batch(spec_batch)
    steps = world.allreduce(len(shard) // batch, op=MPI.MIN)
    if steps < 1:
        smallest = world.allreduce(len(shard), op=MPI.MIN)
        raise EvoganError(
            f"every rank needs at least one batch of trainer.batch_size = {batch} showers, but a "
            f"rank holds {smallest}; use more events, fewer ranks or a smaller batch"
        )
    needed = max(batch, MIN_VALIDATION_EVENTS)
    if settings.validates and len(held_out) < needed:
        raise EvoganError(
            f"the held-out validation set has {len(held_out)} showers, fewer than {needed} (one "
            f"batch, and 8 for the score's floor); raise trainer.validation_events or "
            "data.test_fraction"
        )
    return batch, min(steps, settings.steps_per_epoch or steps)


def manifest(
    seed: int, settings: ParallelConfig, layout: Layout, layouts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The run's ``manifest.json``: versions, seed, mode and where every rank ran."""
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
        "world_size": layout.world.size,
        "groups": len({entry["group"] for entry in layouts}),
        "ranks": layouts,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }

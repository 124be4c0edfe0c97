"""The epoch loop of data-parallel 3DGAN training: batches, steps, metrics, checkpoints.

Ranks meet once per epoch: rank 0 gathers every rank's figures into one JSONL record (mean
losses, samples/s of the whole job, share of step time spent exchanging gradients) and a
checkpoint is committed every ``trainer.checkpoint_every`` epochs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from mpi4py import MPI

from evogan.config.gan import Gan3dConfig
from evogan.distributed.comm import Layout
from evogan.evolution.seeding import numpy_generator
from evogan.store import MetricsWriter, RunDir
from evogan.training import gan_checkpoint as ckpt
from evogan.training.data_parallel import average_tensors

if TYPE_CHECKING:
    from evogan.training.gan_trainer import ParallelGanStep

# A rank's shard is read once and kept in memory when it is at most this large.
CACHE_BYTES = 2 << 30


@dataclass(frozen=True)
class StepInfo:
    """Where a step is, passed to the optional ``on_step`` hook."""

    rank: int
    epoch: int
    step: int


def iter_batches(
    chunks: Callable[[], Iterator[Any]], batch: int, steps: int, rng: np.random.Generator | None
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``steps`` batches of ``batch`` showers from a stream of chunks, shuffled within chunks
    when ``rng`` is given; a chunk's remainder is carried into the next chunk."""
    ecal = energy = theta = None
    made = 0
    for chunk in chunks():
        parts = (chunk.ecal, chunk.energy, chunk.theta)
        if ecal is not None and len(ecal):
            parts = tuple(
                np.concatenate([a, b]) for a, b in zip((ecal, energy, theta), parts, strict=True)
            )
        ecal, energy, theta = parts
        if rng is not None:
            order = rng.permutation(len(energy))
            ecal, energy, theta = ecal[order], energy[order], theta[order]
        usable = len(energy) // batch * batch
        for lo in range(0, usable, batch):
            yield ecal[lo : lo + batch], energy[lo : lo + batch], theta[lo : lo + batch]
            made += 1
            if made == steps:
                return
        ecal, energy, theta = ecal[usable:], energy[usable:], theta[usable:]


def rank_state(parallel: ParallelGanStep) -> ckpt.RankState:
    step = parallel.step
    return ckpt.RankState(
        step.generator, step.discriminator, step.g_optimizer, step.d_optimizer, step.rng
    )


def float_buffers(parallel: ParallelGanStep) -> list[torch.Tensor]:
    """Batch-norm running statistics: they drift apart per rank in sync mode (each rank sees
    its own batches), so they are averaged before anything is saved."""
    modules = (parallel.step.generator, parallel.step.discriminator)
    return [b for m in modules for b in m.buffers() if b.is_floating_point()]


def save_checkpoint(
    config: Gan3dConfig, world: MPI.Comm, run: RunDir, parallel: ParallelGanStep, epoch: int
) -> None:
    """Collective: every rank (sync: rank 0 only) writes its state, then the epoch is committed."""
    sync = config.trainer.mode == "sync"
    if sync:
        average_tensors(world, float_buffers(parallel))
    meta = {"epoch": epoch, "world_size": world.size, "mode": config.trainer.mode}
    if world.rank == 0 or not sync:
        ckpt.save_rank(run, epoch, world.rank, rank_state(parallel), {**meta, "rank": world.rank})
    ckpt.commit(run, world, epoch, 1 if sync else world.size, meta)


def _chunk_source(shard: Any, chunk_events: int) -> Callable[[], Iterator[Any]]:
    event_bytes = 4 * int(np.prod(shard.shape))
    if len(shard) * event_bytes <= CACHE_BYTES:
        cached = shard.read()
        return lambda: iter([cached])
    return lambda: shard.iter_chunks(chunk_events)


def _epoch_record(epoch: int, figures: list[dict[str, Any]]) -> dict[str, Any]:
    """One JSONL record from every rank's figures of an epoch."""
    wall = max(f["wall_s"] for f in figures)
    samples = sum(f["samples"] for f in figures)
    shares = [f["comm_s"] / f["step_s"] if f["step_s"] > 0 else 0.0 for f in figures]
    record: dict[str, Any] = {
        "kind": "epoch",
        "epoch": epoch + 1,
        "steps": figures[0]["steps"],
        "ranks": len(figures),
        "samples": samples,
        "wall_s": wall,
        "samples_per_s": samples / wall if wall > 0 else 0.0,
        "comm_s": float(np.mean([f["comm_s"] for f in figures])),
        "comm_share": float(np.mean(shares)),
        "comm_share_max": float(np.max(shares)),
    }
    for key in figures[0]["losses"]:
        record[key] = float(np.mean([f["losses"][key] for f in figures]))
    if figures[0]["received"] is not None:
        record["gradients_received"] = [f["received"] for f in figures]
    return record


def run_epochs(
    config: Gan3dConfig,
    layout: Layout,
    parallel: ParallelGanStep,
    run: RunDir,
    shard: Any,
    batch: int,
    steps: int,
    start_epoch: int,
    on_step: Callable[[StepInfo], None] | None,
) -> dict[str, Any]:
    """Train epochs ``start_epoch .. trainer.epochs``; returns the summary (complete on rank 0)."""
    world, trainer = layout.world, config.trainer
    rank, lead = world.rank, world.rank == 0
    chunks = _chunk_source(shard, config.data.chunk_events)
    metrics = MetricsWriter(run.file("metrics.jsonl")) if lead else None
    if metrics is not None and start_epoch:
        metrics.write({"kind": "resume", "epoch": start_epoch, "ranks": world.size})
    records: list[dict[str, Any]] = []
    for epoch in range(start_epoch, trainer.epochs):
        shuffle = numpy_generator(config.seed, "gan3d", "batches", rank, epoch)
        outer = (epoch + 1) % trainer.outer_every == 0
        sums: dict[str, float] = {}
        start = time.perf_counter()
        batches = iter_batches(chunks, batch, steps, shuffle if trainer.shuffle else None)
        for index, (ecal, energy, theta) in enumerate(batches):
            figures = parallel.train_step(
                torch.from_numpy(ecal),
                torch.from_numpy(energy),
                torch.from_numpy(theta),
                outer=outer and index == steps - 1,
            )
            for key, value in figures.items():
                sums[key] = sums.get(key, 0.0) + value
            if on_step is not None:
                on_step(StepInfo(rank, epoch, index))
            if lead and (index + 1) % config.run.progress_every == 0:
                print(
                    f"epoch {epoch + 1}/{trainer.epochs} step {index + 1}/{steps} "
                    f"d_loss {figures['d_loss']:.4g} g_loss {figures['g_loss']:.4g}",
                    flush=True,
                )
        comm_s, step_s = sums.pop("comm_s"), sums.pop("step_s")
        mine = {
            "samples": steps * batch,
            "steps": steps,
            "wall_s": time.perf_counter() - start,
            "comm_s": comm_s,
            "step_s": step_s,
            "losses": {key: value / steps for key, value in sums.items()},
            "received": parallel.g_exchange.stats.received if trainer.mode == "arar" else None,
        }
        gathered = world.gather(mine, root=0)
        if metrics is not None:
            record = _epoch_record(epoch, gathered)
            metrics.write(record)
            records.append(record)
            print(
                f"epoch {epoch + 1}/{trainer.epochs}: d_loss {record['d_loss']:.4g} "
                f"g_loss {record['g_loss']:.4g}, {record['samples_per_s']:.1f} samples/s on "
                f"{world.size} rank(s), {100 * record['comm_share']:.1f}% of step time in "
                "communication",
                flush=True,
            )
        if (epoch + 1) % trainer.checkpoint_every == 0 or epoch + 1 == trainer.epochs:
            save_checkpoint(config, world, run, parallel, epoch + 1)
    if metrics is not None:
        metrics.close()
    return _summary(config, world, start_epoch, steps, batch, records)


def _summary(
    config: Gan3dConfig,
    world: MPI.Comm,
    start_epoch: int,
    steps: int,
    batch: int,
    records: list[dict[str, Any]],
) -> dict[str, Any]:
    trainer = config.trainer
    wall = sum(r["wall_s"] for r in records)
    samples = sum(r["samples"] for r in records)
    last = records[-1] if records else {}
    return {
        "task": "gan3d",
        "mode": trainer.mode,
        "rma": trainer.rma,
        "group_size": trainer.group_size,
        "outer_every": trainer.outer_every,
        "ranks": world.size,
        "epochs_done": trainer.epochs,
        "resumed_from_epoch": start_epoch,
        "steps_per_epoch": steps,
        "batch_per_rank": batch,
        "samples_per_s": samples / wall if wall > 0 else 0.0,
        "comm_share": float(np.mean([r["comm_share"] for r in records])) if records else 0.0,
        "final": {k: v for k, v in last.items() if k.startswith(("d_", "g_"))},
    }

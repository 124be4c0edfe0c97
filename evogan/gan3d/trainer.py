"""Data-parallel 3DGAN training over MPI: ``mpirun -n N evogan train configs/gan3d.yaml``.

Every rank trains on its own contiguous shard of the training events. ``trainer.mode`` picks
how ranks combine their work (:mod:`evogan.gan3d.data_parallel`): ``sync`` averages the
gradients of identical replicas of both networks every step; ``arar`` (SAGIPS) keeps one
discriminator per rank and passes generator gradients around rings without waiting.

Random streams come from the root seed: in sync mode all ranks share one step stream and each
uses its block of every global draw (``GanStep.shard``), so R ranks with batch b draw exactly
what one process with batch R*b draws; in arar mode every rank has its own stream and its own
discriminator initialisation. Ranks meet once per epoch (metrics, checkpoint); in sync mode
they also agree on stopping after every step (:mod:`evogan.gan3d.cadence`), in arar mode
without waiting.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mpi4py import MPI

from evogan import __version__
from evogan.config.base import dump
from evogan.config.gan import Gan3dConfig
from evogan.config.parallel import ParallelConfig
from evogan.distributed.comm import Layout, split_layout
from evogan.distributed.signals import StopFlag, catch_stop_signals
from evogan.engine.seeding import torch_generator
from evogan.errors import EvoganError, RunStopped
from evogan.gan3d import checkpoint as ckpt
from evogan.gan3d.cadence import Cadence
from evogan.gan3d.data_parallel import (
    GradientExchange,
    RingExchange,
    SyncAllreduce,
    average_tensors,
    broadcast_parameters,
)
from evogan.gan3d.loop import (
    EpochLoop,
    Position,
    StepInfo,
    draw_learning_curve,
    float_buffers,
    rank_state,
    summary,
)
from evogan.gan3d.model_file import save_generator
from evogan.gan3d.networks import Discriminator, Generator, build_models
from evogan.gan3d.resume import open_run, resume_command
from evogan.gan3d.spec import GanSpec
from evogan.gan3d.step import GanStep
from evogan.gan3d.validation import MIN_VALIDATION_EVENTS, TrainingValidation
from evogan.store import BEST_MODEL, RunDir, save_weights

ENSEMBLE = "generators"
LAST_MODEL = "last_model.h5"
DISCRIMINATOR = "discriminator.h5"
MANIFEST = "manifest.json"


class ParallelGanStep:
    """A :class:`GanStep` on one rank plus the gradient exchanges its mode needs.

    The order of :meth:`GanStep.train_step` (one discriminator update, then
    ``generator_steps`` generator updates) with an exchange between every backward pass and
    optimiser step.
    """

    def __init__(
        self, step: GanStep, g_exchange: GradientExchange, d_exchange: GradientExchange | None
    ) -> None:
        self.step = step
        self.g_exchange = g_exchange
        self.d_exchange = d_exchange

    def train_step(
        self, real: torch.Tensor, energy: torch.Tensor, theta: torch.Tensor | None, outer: bool
    ) -> dict[str, float]:
        """One step; ``outer`` feeds the outer ring (arar) with the last generator update."""
        start = time.perf_counter()
        metrics = self.step.discriminator_grads(real, energy, theta)
        comm = self.d_exchange.exchange() if self.d_exchange is not None else 0.0
        self.step.d_optimizer.step()
        steps = self.step.spec.generator_steps
        for index in range(steps):
            g_metrics = self.step.generator_grads(real.shape[0], energy, theta)
            comm += self.g_exchange.exchange(outer=outer and index == steps - 1)
            self.step.g_optimizer.step()
            for key, value in g_metrics.items():
                metrics[key] = metrics.get(key, 0.0) + value / steps
        metrics["comm_s"] = comm
        metrics["step_s"] = time.perf_counter() - start
        return metrics

    def exchange_stats(self) -> dict[str, Any]:
        stats = {"generator": self.g_exchange.stats.as_dict()}
        if self.d_exchange is not None:
            stats["discriminator"] = self.d_exchange.stats.as_dict()
        return stats

    def close(self) -> dict[str, Any]:
        """Collective: finish in-flight communication; returns the exchange counters."""
        self.g_exchange.close()
        if self.d_exchange is not None:
            self.d_exchange.close()
        return self.exchange_stats()


def build_parallel_step(
    spec: GanSpec, trainer: ParallelConfig, layout: Layout, seed: int, device: str = "cpu"
) -> ParallelGanStep:
    """Networks, optimisers, random streams and exchanges of this rank (collective)."""
    world, rank = layout.world, layout.world.rank
    sync = trainer.mode == "sync"
    if sync:  # identical replicas (the broadcast below also guards against drift)
        generator, discriminator = build_models(spec, torch_generator(seed, "gan3d", "init"))
    else:  # one shared generator start, a discriminator of its own on every rank
        generator = Generator(spec, torch_generator(seed, "gan3d", "init"))
        own = torch_generator(seed, "gan3d", "init-discriminator", rank)
        discriminator = Discriminator(spec, own)
    stream = ("gan3d", "step") if sync else ("gan3d", "step", rank)
    step = GanStep(
        spec, generator, discriminator, torch_generator(seed, *stream, device=device), device
    )
    broadcast_parameters(world, generator.parameters())
    if sync:
        step.shard = (rank, world.size)
        broadcast_parameters(world, discriminator.parameters())
        bucket = int(trainer.bucket_mb * 2**20)
        return ParallelGanStep(
            step,
            SyncAllreduce(world, generator.parameters(), bucket),
            SyncAllreduce(world, discriminator.parameters(), bucket),
        )
    ring = RingExchange(layout, generator.parameters(), rma=trainer.rma, depth=trainer.ring_depth)
    return ParallelGanStep(step, ring, None)


def _device(config: ParallelConfig, world: MPI.Comm) -> str:
    if config.device == "cpu":
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


def _manifest(config: Gan3dConfig, layout: Layout, layouts: list[dict[str, Any]]) -> dict:
    return {
        "task": "gan3d",
        "evogan": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "mpi": MPI.Get_library_version().splitlines()[0],
        "seed": config.seed,
        "mode": config.trainer.mode,
        "rma": config.trainer.rma,
        "world_size": layout.world.size,
        "groups": len({entry["group"] for entry in layouts}),
        "ranks": layouts,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _load_data(config: Gan3dConfig, world: MPI.Comm) -> tuple[Any, Any]:
    """This rank's training shard and the held-out validation set (test split)."""
    from evogan.data.reader import open_dataset

    announce = print if world.rank == 0 else (lambda _message: None)
    train, test = open_dataset(config.data, announce=announce)
    wanted = config.trainer.validation_events or len(test)
    return train.shard(world.rank, world.size), test.take(min(wanted, len(test)))


def _shape(config: Gan3dConfig, world: MPI.Comm, shard: Any, held_out: Any) -> tuple[int, int]:
    """(batch per rank, steps per epoch), refusing data too small for them in one line."""
    trainer = config.trainer
    batch = trainer.batch_size or config.spec.batch_size
    steps = world.allreduce(len(shard) // batch, op=MPI.MIN)
    if steps < 1:
        smallest = world.allreduce(len(shard), op=MPI.MIN)
        raise EvoganError(
            f"every rank needs at least one batch of trainer.batch_size = {batch} showers, but a "
            f"rank holds {smallest}; use more events, fewer ranks or a smaller batch"
        )
    needed = max(batch, MIN_VALIDATION_EVENTS)
    if trainer.validates and len(held_out) < needed:
        raise EvoganError(
            f"the held-out validation set has {len(held_out)} showers, fewer than {needed} (one "
            f"batch, and 8 for the score's floor); raise trainer.validation_events or "
            "data.test_fraction"
        )
    return batch, min(steps, trainer.steps_per_epoch or steps)


def train_gan3d(
    config: Gan3dConfig,
    run_dir: Path | None = None,
    *,
    resume: bool = False,
    world: MPI.Comm | None = None,
    on_step: Callable[[StepInfo], None] | None = None,
    signals: bool = True,
) -> RunDir:
    """Train ``config`` on every rank of ``world``; returns the run directory (all ranks).

    ``resume`` continues ``run_dir`` from its last committed checkpoint (same rank count,
    spec, data, seed, mode and batch) up to ``trainer.epochs``; otherwise a new run is made.
    With ``signals``, SIGTERM/SIGINT on any rank stops every rank after a checkpoint and
    raises :class:`RunStopped` (callers with their own stop handling pass False).
    """
    world = MPI.COMM_WORLD if world is None else world
    flag = StopFlag()
    with catch_stop_signals(flag) if signals else contextlib.nullcontext():
        return _train(config, run_dir, resume, world, on_step, flag)


def _start(
    config: Gan3dConfig,
    layout: Layout,
    run: RunDir,
    marker: dict[str, Any] | None,
    parallel: ParallelGanStep,
    steps: int,
) -> tuple[Position, int, float | None]:
    """Restore this rank from ``marker``'s checkpoint (or write a new run's manifest) and the
    config; returns the position, the next checkpoint serial and the best score so far."""
    world = layout.world
    layouts = world.gather(layout.describe(), root=0)
    position, serial, best = Position(), 1, None
    if marker is not None:
        files = marker["files"]
        own = files[0] if len(files) == 1 else files[world.rank]
        state = ckpt.load_rank(run, own, rank_state(parallel), world.rank)
        position = Position(state["epoch"], state["step"], state["sums"], state["elapsed"])
        serial, best = marker["serial"] + 1, marker.get("best")
    elif world.rank == 0:
        run.write_json(MANIFEST, _manifest(config, layout, layouts))
    if world.rank == 0:
        run.write_config(dump(config))
        if marker is not None:
            step = position.epoch * steps + position.step
            with run.metrics_writer() as metrics:
                metrics.write(
                    {"kind": "resume", "epoch": position.epoch, "step": step, "ranks": world.size}
                )
    return position, serial, best


def _train(
    config: Gan3dConfig,
    run_dir: Path | None,
    resume: bool,
    world: MPI.Comm,
    on_step: Callable[[StepInfo], None] | None,
    flag: StopFlag,
) -> RunDir:
    trainer = config.trainer
    group_size = trainer.group_size if trainer.mode == "arar" else None
    device = _device(trainer, world)  # bad settings are refused before a run directory exists
    shard, held_out = _load_data(config, world)
    shape = _shape(config, world, shard, held_out)
    run, marker = open_run(config, world, run_dir, resume)
    layout = split_layout(world, None, group_size)
    if device == "cpu":
        share_cores(world)
    parallel = build_parallel_step(config.spec, trainer, layout, config.seed, device)
    position, serial, best = _start(config, layout, run, marker, parallel, shape[1])
    validation = TrainingValidation(config, world, held_out, best) if trainer.validates else None
    every = config.checkpoint.every_seconds
    cadence = Cadence(world, flag, trainer.mode, every, trainer.validate_every_seconds)
    loop = EpochLoop(config, layout, parallel, run, shard, shape, cadence, validation, serial)
    start = Position(position.epoch, position.step)
    outcome = loop.run_epochs(position, on_step)
    stats = world.gather(parallel.close(), root=0)
    cadence.close()
    if outcome.stopped:
        layout.free()
        where = f"epoch {outcome.position.epoch + 1} step {outcome.position.step}"
        if world.rank == 0:
            print(f"stopped by {cadence.signal_name} at {where}; checkpoint in {run.path}")
        raise RunStopped(resume_command(run, world))
    _save_models(config, world, run, parallel, validation is None)
    if world.rank == 0:
        result = summary(config, world, start, shape, outcome.records)
        result["exchange"] = stats
        if validation is not None:
            result["best_score"] = validation.best
        run.write_summary(result)
        draw_learning_curve(run)
        print(f"trained {trainer.epochs} epoch(s) on {world.size} rank(s); run in {run.path}")
    layout.free()
    return run


def _save_models(
    config: Gan3dConfig, world: MPI.Comm, run: RunDir, parallel: ParallelGanStep, best: bool
) -> None:
    """The final generator as ``last_model.h5`` (also ``best_model.h5`` when no validation
    picked one; both self-describing, for ``evogan generate`` and ``evogan validate``) and the
    discriminator; in arar mode also every rank's generator, usable as ensemble members."""
    sync = config.trainer.mode == "sync"
    if sync:
        average_tensors(world, float_buffers(parallel))
    meta = {
        "epochs": config.trainer.epochs,
        "mode": config.trainer.mode,
        "world_size": world.size,
        "seed": config.seed,
        "rank": world.rank,
    }
    step = parallel.step
    if not sync:
        name = run.file(f"{ENSEMBLE}/rank-{world.rank:05d}.h5")
        save_generator(name, config.spec, step.generator, meta)
    if world.rank == 0:
        save_generator(run.file(LAST_MODEL), config.spec, step.generator, meta)
        if best:
            save_generator(run.file(BEST_MODEL), config.spec, step.generator, meta)
        d_meta = {**meta, "kind": "gan3d-discriminator"}
        save_weights(run.file(DISCRIMINATOR), step.discriminator.state_dict(), d_meta)
    world.Barrier()

"""One data-parallel training step, and the two modes that decide how ranks share it.

``trainer.mode`` is read once (:func:`mode_for`) into a :class:`Mode` object that holds
everything the modes do differently, so no other module compares mode names:

- :class:`SyncMode`: every rank holds identical replicas of both networks, draws its block of
  one shared random stream (``GanStep.shard``) and averages both networks' gradients with
  all-reduce every step (over MPI, blocking or overlapped with backward, or over a gloo/NCCL
  group: ``trainer.backend``, ``trainer.overlap``); the ranks stop together after any step,
  rank 0 checkpoints for all, and saved or validated generators carry the ranks' mean
  batch-norm statistics.
- :class:`ArarMode` (SAGIPS): one generator start shared by all, a discriminator of its own on
  every rank, generator gradients passed around rings without waiting; every rank checkpoints
  its own state and every rank's generator is an ensemble member.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch

from evogan.config.trainer import TrainerConfig
from evogan.distributed.comm import GroupSize, Layout
from evogan.distributed.gradients import (
    GradientExchange,
    RingExchange,
    SyncAllreduce,
    broadcast_parameters,
)
from evogan.distributed.mpi_group import MpiGroup
from evogan.distributed.overlap import OverlappedAllreduce
from evogan.distributed.torch_group import TorchGroup
from evogan.gan3d.model.networks import Discriminator, Generator, build_models
from evogan.gan3d.model.spec import GanSpec
from evogan.gan3d.training import checkpoint as ckpt
from evogan.gan3d.training.setup import CPU, RankSetup
from evogan.gan3d.training.step import GanStep
from evogan.gan3d.training.weight_average import WeightAverage
from evogan.seeding import torch_generator
from evogan.store import BEST_MODEL

ENSEMBLE = "generators"
"""Folder of an arar training's per-rank generators (its ensemble members)."""


class ParallelGanStep:
    """A :class:`GanStep` on one rank plus the gradient exchanges its mode needs.

    The order of :meth:`GanStep.train_step` (one discriminator update, then
    ``generator_steps`` generator updates) with an exchange between every backward pass and
    optimiser step. ``group`` is the torch.distributed or overlapping MPI group the exchanges
    use, if any; ``average``, if set, follows the generator's weights after every step.
    """

    def __init__(
        self,
        step: GanStep,
        g_exchange: GradientExchange,
        d_exchange: GradientExchange | None,
        group: TorchGroup | MpiGroup | None = None,
    ) -> None:
        self.step = step
        self.g_exchange = g_exchange
        self.d_exchange = d_exchange
        self.group = group
        self.average: WeightAverage | None = None

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
        if self.average is not None:
            self.average.update(self.step.generator)
        metrics["comm_s"] = comm
        metrics["step_s"] = time.perf_counter() - start
        return metrics

    def scale_learning_rates(self, factor: float) -> None:
        """Set both optimisers' learning rates to the spec's times ``factor``."""
        spec = self.step.spec
        for optimizer, lr in (
            (self.step.g_optimizer, spec.g_lr),
            (self.step.d_optimizer, spec.d_lr),
        ):
            for group in optimizer.param_groups:
                group["lr"] = lr * factor

    def float_buffers(self) -> list[torch.Tensor]:
        """Batch-norm running statistics: they drift apart per rank in sync mode (each rank
        sees its own batches); checkpoints keep every rank's, saved models their mean."""
        modules = (self.step.generator, self.step.discriminator)
        return [b for m in modules for b in m.buffers() if b.is_floating_point()]

    def rank_state(self) -> ckpt.RankState:
        """What a checkpoint saves and restores of this rank."""
        step = self.step
        return ckpt.RankState(
            step.generator,
            step.discriminator,
            step.g_optimizer,
            step.d_optimizer,
            step.rng,
            self.float_buffers(),
            self.average,
        )

    def scored_generator(self) -> Generator:
        """The generator validations score and saves write: the weight average where one is
        kept, else the generator itself."""
        generator = self.step.generator
        return generator if self.average is None else self.average.applied(generator)

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
        self.release()
        return self.exchange_stats()

    def release(self) -> None:
        """Shut down the exchanges' group (local, so also safe after an error)."""
        if self.group is not None:
            self.group.close()


class Mode(ABC):
    """What differs between the parallel modes; one instance per training (:func:`mode_for`)."""

    name: str
    replicas: bool
    """Every rank holds the same networks: ranks stop in lockstep, rank 0 checkpoints for all,
    and batch-norm statistics are averaged over ranks for saved and validated generators."""

    def __init__(self, settings: TrainerConfig) -> None:
        self.settings = settings

    @property
    def group_size(self) -> GroupSize:
        """Ranks of one inner ring (None: the whole world, or no rings at all)."""
        return None

    @abstractmethod
    def build(
        self,
        spec: GanSpec,
        layout: Layout,
        seed: int,
        rank: RankSetup = CPU,
    ) -> ParallelGanStep:
        """Networks, optimisers, random streams and exchanges of this rank (collective), on
        ``rank``'s device, with its forward options, all-reduce backend (sync) and ring buffers
        (arar)."""

    @abstractmethod
    def members(self, ranks: int) -> int:
        """Ensemble members (generators) one training on ``ranks`` ranks yields."""

    @abstractmethod
    def member_files(self, run: Path, ranks: int) -> list[Path]:
        """The generator files of those members, once the training is saved."""

    def received(self, parallel: ParallelGanStep) -> int | None:
        """Gradients this rank received from others so far (rings only)."""
        return None


class SyncMode(Mode):
    name = "sync"
    replicas = True

    def build(
        self,
        spec: GanSpec,
        layout: Layout,
        seed: int,
        rank: RankSetup = CPU,
    ) -> ParallelGanStep:
        world = layout.world
        # identical replicas (the broadcasts below also guard against drift)
        generator, discriminator = build_models(spec, torch_generator(seed, "gan3d", "init"))
        device, backend = rank.device, rank.backend
        rng = torch_generator(seed, "gan3d", "step", device=device)
        step = GanStep(spec, generator, discriminator, rng, device, rank.forward)
        broadcast_parameters(world, generator.parameters())
        step.shard = (world.rank, world.size)
        broadcast_parameters(world, discriminator.parameters())
        bucket = int(self.settings.bucket_mb * 2**20)
        if backend == "mpi" and not self.settings.overlap:
            return ParallelGanStep(
                step,
                SyncAllreduce(world, generator.parameters(), bucket),
                SyncAllreduce(world, discriminator.parameters(), bucket),
            )
        group = MpiGroup(world) if backend == "mpi" else TorchGroup(world, backend, device)
        return ParallelGanStep(
            step,
            OverlappedAllreduce(group, generator.parameters(), bucket),
            OverlappedAllreduce(group, discriminator.parameters(), bucket),
            group,
        )

    def members(self, ranks: int) -> int:
        return 1

    def member_files(self, run: Path, ranks: int) -> list[Path]:
        return [run / BEST_MODEL]


class ArarMode(Mode):
    name = "arar"
    replicas = False

    @property
    def group_size(self) -> GroupSize:
        return self.settings.group_size

    def build(
        self,
        spec: GanSpec,
        layout: Layout,
        seed: int,
        rank: RankSetup = CPU,
    ) -> ParallelGanStep:
        index = layout.world.rank
        # one shared generator start, a discriminator of its own on every rank
        generator = Generator(spec, torch_generator(seed, "gan3d", "init"))
        discriminator = Discriminator(
            spec, torch_generator(seed, "gan3d", "init-discriminator", index)
        )
        rng = torch_generator(seed, "gan3d", "step", index, device=rank.device)
        step = GanStep(spec, generator, discriminator, rng, rank.device, rank.forward)
        broadcast_parameters(layout.world, generator.parameters())
        settings = self.settings
        ring = RingExchange(
            layout,
            generator.parameters(),
            rma=settings.rma,
            depth=settings.ring_depth,
            device=rank.ring_device,
        )
        return ParallelGanStep(step, ring, None)

    def members(self, ranks: int) -> int:
        return ranks

    def member_files(self, run: Path, ranks: int) -> list[Path]:
        return [run / ENSEMBLE / f"rank-{r:05d}.h5" for r in range(ranks)]

    def received(self, parallel: ParallelGanStep) -> int | None:
        return parallel.g_exchange.stats.received


def mode_for(settings: TrainerConfig) -> Mode:
    """The mode object of ``trainer.mode``."""
    return {"sync": SyncMode, "arar": ArarMode}[settings.mode](settings)


def build_parallel_step(
    spec: GanSpec,
    settings: TrainerConfig,
    layout: Layout,
    seed: int,
    rank: RankSetup = CPU,
) -> ParallelGanStep:
    """This rank's parallel step for ``settings.mode`` (collective)."""
    return mode_for(settings).build(spec, layout, seed, rank)
